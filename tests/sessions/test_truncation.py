"""Read-time truncation: older text and tool outputs cut for the model only, at a stepped cutoff."""

from __future__ import annotations

import json
import math
from typing import Any

import pytest

from ponder.models import ui_messages_to_model_messages
from ponder.sessions import (
    Session,
    truncate_message,
    truncate_older_messages,
    truncate_value,
    truncation_cutoff,
)
from ponder.sessions._truncate import normalize_step

from .conftest import MakeSession
from .helpers import assistant, conversation, tool_answer, user


@pytest.mark.parametrize(
    ("n", "step", "cutoff"),
    [
        (0, 8, 0),
        (4, 8, 0),
        (5, 8, 0),
        (11, 8, 0),
        (12, 8, 8),
        (19, 8, 8),
        (20, 8, 16),
        (5, 1, 1),
        (10, 1, 6),
        (100, math.inf, 0),
        (13, 3, 9),
    ],
)
def test_cutoff_moves_in_steps(n: int, step: float, cutoff: int) -> None:
    assert truncation_cutoff(n, step) == cutoff


def test_cutoff_is_always_a_multiple_of_the_step_and_keeps_4_to_step_plus_3() -> None:
    for step in (1, 2, 5, 8):
        for n in range(0, 60):
            cut = truncation_cutoff(n, step)
            assert cut % step == 0
            if n > 4:
                assert 4 <= n - cut <= step + 3


def test_step_normalisation() -> None:
    assert normalize_step(math.inf) == math.inf
    assert normalize_step(0) == 1
    assert normalize_step(-3) == 1
    assert normalize_step(math.nan) == 1
    assert normalize_step(-math.inf) == 1
    assert normalize_step(7.9) == 7


def _compact(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"))


def test_truncate_value_strings_and_shapes() -> None:
    assert truncate_value("short", 500) == "short"
    cut = truncate_value("x" * 1200, 500)
    assert cut == "x" * 500 + "... [truncated 700 chars]"
    nested = {"title": "keep", "body": "y" * 5000, "items": [{"text": "z" * 3000}]}
    shaped = truncate_value(nested, 500)
    assert isinstance(shaped, dict) and shaped["title"] == "keep"
    assert shaped["__truncated"] is True
    assert len(_compact(shaped)) <= 500
    many = list(range(2000))
    shortened = truncate_value(many, 500)
    assert isinstance(shortened, list) and "more items truncated" in shortened[-1]
    assert len(_compact(shortened)) <= 500
    assert truncate_value(42, 1) == 42


def test_truncate_value_is_deterministic() -> None:
    value = {"a": "q" * 9000, "b": [1, 2, {"c": "w" * 700}]}
    assert truncate_value(value, 500) == truncate_value(value, 500)


def test_truncate_message_cuts_long_text_and_tool_outputs_only() -> None:
    message = {
        "id": "m",
        "role": "assistant",
        "parts": [
            {"type": "text", "text": "t" * 10_500},
            {"type": "text", "text": "short"},
            {
                "type": "tool-a",
                "toolCallId": "1",
                "state": "output-available",
                "input": {},
                "output": "o" * 800,
            },
            {
                "type": "tool-b",
                "toolCallId": "2",
                "state": "output-available",
                "input": {},
                "output": "p" * 800,
                "providerExecuted": True,
            },
            {"type": "tool-c", "toolCallId": "3", "state": "output-available", "input": {}, "output": "ok"},
        ],
    }
    cut = truncate_message(message)
    assert cut["parts"][0]["text"] == "t" * 10_000 + "... [truncated 500 chars]"
    assert cut["parts"][1] is message["parts"][1]
    assert cut["parts"][2]["output"].startswith("o" * 500 + "... [truncated 300")
    assert cut["parts"][3]["output"] == "p" * 800  # provider-executed results are never cut
    assert cut["parts"][4] is message["parts"][4]
    assert message["parts"][0]["text"] == "t" * 10_500  # the input is untouched
    small = user("s", "tiny")
    assert truncate_message(small) is small


def test_the_last_four_messages_are_never_cut() -> None:
    long = [user(f"m{i}", "L" * 20_000) for i in range(12)]
    out = truncate_older_messages(long, step=1)
    assert [len(m["parts"][0]["text"]) < 20_000 for m in out] == [True] * 8 + [False] * 4
    assert truncate_older_messages(long, step=math.inf) == long


async def test_storage_keeps_everything(session: Session) -> None:
    await session.append_many([user(f"u{i}", "L" * 12_000) for i in range(20)])
    view = await session.read_model_view()
    assert len(view[0]["parts"][0]["text"]) < 12_000
    assert len((await session.get_message("u0"))["parts"][0]["text"]) == 12_000
    assert len(session.get("u0")["parts"][0]["text"]) == 12_000


async def test_model_view_of_another_branch(session: Session) -> None:
    await session.append_many(conversation(8))
    await session.append(assistant("alt", "other"), "u3")
    view = await session.read_model_view("a7")
    assert [m["id"] for m in view][-2:] == ["u7", "a7"]
    with pytest.raises(KeyError):
        await session.read_model_view("nope")


def _request(view: list[dict[str, Any]]) -> list[str]:
    """The model input as comparable strings, one per model message."""
    return [json.dumps(_plain(m), sort_keys=True, default=str) for m in ui_messages_to_model_messages(view)]


def _plain(value: Any) -> Any:
    if hasattr(value, "__dataclass_fields__"):
        return {k: _plain(getattr(value, k)) for k in value.__dataclass_fields__}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value


@pytest.mark.parametrize("step", [8, 1, math.inf])
async def test_prefix_changes_only_when_the_cutoff_moves(make_session: MakeSession, step: float) -> None:
    """16 turns, each with a 4,000-character tool output: a request extends the previous one unless the
    truncation cutoff moved on that turn."""
    session = await make_session(truncation_step=step)
    previous: list[str] | None = None
    previous_cutoff = 0
    changes = 0
    for turn in range(16):
        await session.append(user(f"u{turn}", f"question {turn}"))
        view = await session.read_model_view()
        request = _request(view)
        cutoff = truncation_cutoff(len(view), step)
        if previous is not None and request[: len(previous)] != previous:
            changes += 1
            assert cutoff != previous_cutoff, f"turn {turn}: prefix changed although the cutoff stayed"
        previous, previous_cutoff = request, cutoff
        await session.append(tool_answer(f"a{turn}", f"call{turn}", "R" * 4000, f"answer {turn}"))
    # step 8: the cutoff moves at 13, 21 and 29 messages (turns 6, 10, 14), each time cutting tool outputs.
    assert changes == {8: 3, 1: 13, math.inf: 0}[step]


async def test_model_view_of_an_empty_session(session: Session) -> None:
    assert await session.read_model_view() == []


async def test_model_view_up_to_a_message_on_the_active_path(make_session: MakeSession) -> None:
    """What a regeneration sends: the active path up to the user message, from the window."""
    session = await make_session(hydration_byte_budget=2_000)
    await session.append_many(conversation(20))
    window_start = session.path_length - len(session.active_messages())
    assert window_start > 0
    view = await session.read_model_view("u19")
    assert [m["id"] for m in view] == [m["id"] for m in session.active_messages()][:-1]
    await session.add_compaction("S", "u2", "a19")  # ends after the anchor: not applied to the prefix
    assert [m["id"] for m in await session.read_model_view("u19")] == [m["id"] for m in view]


async def test_model_messages_match_the_converted_view_and_are_cached(session: Session) -> None:
    await session.append_many(
        [
            user(f"u{i}", "L" * 11_000) if i % 3 == 0 else tool_answer(f"u{i}", f"c{i}", "R" * 900)
            for i in range(20)
        ]
    )
    await session.add_compaction("SUMMARY", "u2", "u5")
    view = await session.read_model_view()
    messages = await session.read_model_messages()
    assert _plain(messages) == _plain(ui_messages_to_model_messages(view))
    again = await session.read_model_messages()
    assert all(a is b for a, b in zip(messages, again, strict=True) if "SUMMARY" not in json.dumps(_plain(a)))
    # A write invalidates exactly the changed message's conversion.
    await session.upsert(user("u19", "changed"))
    after = await session.read_model_messages()
    assert _plain(after[-1]) == _plain(ui_messages_to_model_messages([user("u19", "changed")])[0])
    assert after[0] is messages[0]


async def test_model_messages_for_another_branch(session: Session) -> None:
    await session.append_many(conversation(3))
    await session.append(assistant("alt", "other"), "u1")
    converted = await session.read_model_messages("a2")
    assert _plain(converted) == _plain(ui_messages_to_model_messages(await session.read_model_view("a2")))


@pytest.mark.parametrize("seed", [1, 2, 3])
async def test_cached_model_messages_always_equal_a_fresh_conversion(
    make_session: MakeSession, seed: int
) -> None:
    """Random appends, regenerations, edits, overlays, branch switches and window trims: the cached
    per-turn model input must always equal converting the current view from scratch."""
    import random

    rng = random.Random(seed)
    session = await make_session(truncation_step=rng.choice([1, 3, 8]), hydration_byte_budget=60_000)
    counter = 0
    for _ in range(200):
        counter += 1
        op = rng.random()
        path = [m["id"] for m in await session.get_history()]
        if op < 0.55 or len(path) < 3:
            body = "x" * rng.choice([10, 700, 12_000])
            message = (
                tool_answer(f"m{counter}", f"c{counter}", body)
                if rng.random() < 0.4
                else user(f"m{counter}", body)
            )
            await session.append(message)
        elif op < 0.65:
            await session.append(assistant(f"m{counter}", "regenerated"), rng.choice(path[:-1]))
        elif op < 0.8:
            target = rng.choice(path)
            await session.upsert(user(target, f"edited {counter} " + "y" * rng.choice([5, 900])))
        elif op < 0.88:
            start = rng.randrange(len(path) - 1)
            end = rng.randrange(start, len(path) - 1)
            await session.add_compaction(f"summary {counter}", path[start], path[end])
        elif op < 0.95:
            await session.set_active_leaf(rng.choice(list(session._nodes)))
        else:
            await session.delete(rng.choice(path))
        fresh = ui_messages_to_model_messages(await session.read_model_view())
        assert _plain(await session.read_model_messages()) == _plain(fresh)
    await session.wait_idle()
