import pytest

from ponder.runtime import agent_id_for, kebab_case


@pytest.mark.parametrize(
    ("name", "kebab"),
    [
        ("MyThinkAgent", "my-think-agent"),
        ("Counter", "counter"),
        ("ALL_CAPS", "all-caps"),
        ("HTTPAgent", "h-t-t-p-agent"),
        ("snake_case_agent", "snake-case-agent"),
        ("Trailing_", "trailing"),
        ("already-kebab", "already-kebab"),
    ],
)
def test_kebab_case_matches_the_js_clients(name: str, kebab: str) -> None:
    assert kebab_case(name) == kebab


def test_agent_ids_are_unambiguous_for_any_name() -> None:
    assert agent_id_for("counter", "alice") == "counter/alice"
    # A name containing the sub-agent separator cannot collide with a real sub-agent id.
    assert agent_id_for("counter", "a/sub/x/y") != "counter/a/sub/x/y"
    assert agent_id_for("counter", "a b%") == "counter/a%20b%25"


def test_only_ascii_capitals_split_words_like_the_js_rule() -> None:
    assert kebab_case("ÄAgent") == "Ä-agent"
