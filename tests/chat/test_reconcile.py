"""reconcile_messages: the client's submitted transcript vs the stored path (spec §3.8, §10.2)."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from ponder.chat import UIMessage, reconcile_messages


def user(message_id: str, text: str) -> UIMessage:
    return {"id": message_id, "role": "user", "parts": [{"type": "text", "text": text}]}


def reply(message_id: str, text: str) -> UIMessage:
    return {
        "id": message_id,
        "role": "assistant",
        "parts": [{"type": "step-start"}, {"type": "text", "text": text, "state": "done"}],
    }


def tool_reply(message_id: str, call_id: str, state: str, **fields: Any) -> UIMessage:
    part = {"type": "tool-calc", "toolCallId": call_id, "toolName": "calc", "state": state, **fields}
    return {"id": message_id, "role": "assistant", "parts": [{"type": "step-start"}, part]}


def tool_of(message: UIMessage) -> dict[str, Any]:
    return message["parts"][1]


# ------------------------------------------------------------------------------------ stale tool states


@pytest.mark.parametrize("client_state", ["input-available", "approval-requested", "approval-responded"])
def test_stale_client_tool_part_takes_the_servers_output(client_state: str) -> None:
    stored = [user("u1", "2+2?"), tool_reply("a1", "c1", "output-available", input={"e": "2+2"}, output=4)]
    incoming = [user("u1", "2+2?"), tool_reply("a1", "c1", client_state, input={"e": "2+2"})]
    result = reconcile_messages(incoming, stored)
    assert tool_of(result[1])["state"] == "output-available"
    assert tool_of(result[1])["output"] == 4
    assert tool_of(result[1])["input"] == {"e": "2+2"}


def test_server_error_is_not_clobbered_and_brings_only_its_error_text() -> None:
    stored = [tool_reply("a1", "c1", "output-error", input={}, errorText="Tool blew up", output="stray")]
    incoming = [tool_reply("a1", "c1", "input-available", input={})]
    part = tool_of(reconcile_messages(incoming, stored)[0])
    assert part["state"] == "output-error"
    assert part["errorText"] == "Tool blew up"
    assert "output" not in part


def test_server_denial_is_merged_with_its_approval_record() -> None:
    stored = [tool_reply("a1", "c1", "output-denied", input={}, approval={"id": "ap", "approved": False})]
    incoming = [tool_reply("a1", "c1", "approval-requested", input={}, approval={"id": "ap"})]
    part = tool_of(reconcile_messages(incoming, stored)[0])
    assert part["state"] == "output-denied"
    assert part["approval"] == {"id": "ap", "approved": False}


def test_a_client_part_that_already_has_a_result_is_kept() -> None:
    stored = [tool_reply("a1", "c1", "output-available", input={}, output="server")]
    incoming = [tool_reply("a1", "c1", "output-available", input={}, output="client")]
    assert tool_of(reconcile_messages(incoming, stored)[0])["output"] == "client"


def test_user_messages_pass_through_as_the_same_objects() -> None:
    stored = [tool_reply("a1", "c1", "output-available", input={}, output=1)]
    incoming = [user("u1", "hi")]
    assert reconcile_messages(incoming, stored)[0] is incoming[0]


def test_no_stored_results_means_nothing_to_merge() -> None:
    stored = [reply("a0", "Hello")]
    incoming = [user("u1", "hi"), tool_reply("cli-1", "c1", "input-available", input={})]
    result = reconcile_messages(incoming, stored)
    assert tool_of(result[1])["state"] == "input-available"


# ------------------------------------------------------------------------------------------------- ids


def test_exact_ids_are_kept() -> None:
    stored = [user("u1", "hi"), reply("srv-a1", "Hello")]
    incoming = [user("u1", "hi"), reply("srv-a1", "Hello")]
    assert [m["id"] for m in reconcile_messages(incoming, stored)] == ["u1", "srv-a1"]


def test_optimistic_client_assistant_collapses_into_the_stored_row() -> None:
    """cloudflare/agents#1761: a CLI client minting its own assistant id must not duplicate the row."""
    stored = [user("u1", "hi"), reply("srv-a1", "Hello there")]
    incoming = [user("u1", "hi"), reply("cli-a1", "Hello there"), user("u2", "and?")]
    result = reconcile_messages(incoming, stored)
    assert [m["id"] for m in result] == ["u1", "srv-a1", "u2"]
    assert incoming[1]["id"] == "cli-a1", "the incoming list is not mutated"


def test_identical_replies_map_to_distinct_stored_rows() -> None:
    stored = [user("u1", "q1"), reply("srv-a1", "Sure"), user("u2", "q2"), reply("srv-a2", "Sure")]
    incoming = [user("u1", "q1"), reply("cli-a1", "Sure"), user("u2", "q2"), reply("cli-a2", "Sure")]
    assert [m["id"] for m in reconcile_messages(incoming, stored)] == ["u1", "srv-a1", "u2", "srv-a2"]


def test_an_exactly_matched_row_is_not_lent_to_another_message() -> None:
    stored = [reply("srv-a1", "Sure")]
    incoming = [reply("srv-a1", "Sure"), reply("cli-a2", "Sure")]
    assert [m["id"] for m in reconcile_messages(incoming, stored)] == ["srv-a1", "cli-a2"]


def test_content_match_compares_sanitised_parts() -> None:
    stored: list[UIMessage] = [
        {
            "id": "srv-a1",
            "role": "assistant",
            "parts": [
                {"type": "reasoning", "text": "", "providerMetadata": {"openai": {"itemId": "rs_1"}}},
                {
                    "type": "text",
                    "text": "Hello",
                    "state": "done",
                    "providerMetadata": {"openai": {"itemId": "msg_1"}},
                },
            ],
        }
    ]
    incoming: list[UIMessage] = [
        {"id": "cli-a1", "role": "assistant", "parts": [{"type": "text", "text": "Hello", "state": "done"}]}
    ]
    assert reconcile_messages(incoming, stored)[0]["id"] == "srv-a1"


def test_content_match_ignores_json_key_order() -> None:
    stored = [reply("srv-a1", "Hello")]
    incoming: list[UIMessage] = [
        {
            "role": "assistant",
            "id": "cli-a1",
            "parts": [{"type": "step-start"}, {"state": "done", "text": "Hello", "type": "text"}],
        }
    ]
    assert reconcile_messages(incoming, stored)[0]["id"] == "srv-a1"


def test_different_content_keeps_the_client_id() -> None:
    assert (
        reconcile_messages([reply("cli-a1", "Response B")], [reply("srv-a1", "Response A")])[0]["id"]
        == "cli-a1"
    )


def test_tool_call_id_match_adopts_the_server_id_and_its_result() -> None:
    stored = [user("u1", "calc"), tool_reply("srv-a1", "c1", "output-available", input={"x": 1}, output=2)]
    incoming = [user("u1", "calc"), tool_reply("cli-a1", "c1", "input-available", input={"x": 1})]
    result = reconcile_messages(incoming, stored)
    assert result[1]["id"] == "srv-a1"
    assert tool_of(result[1])["state"] == "output-available"
    assert tool_of(result[1])["output"] == 2


def test_tool_bearing_messages_are_never_matched_by_content() -> None:
    stored = [tool_reply("srv-a1", "c1", "input-available", input={})]
    incoming = [tool_reply("cli-a1", "c2", "input-available", input={})]
    assert reconcile_messages(incoming, stored)[0]["id"] == "cli-a1"


def test_text_messages_never_borrow_the_id_of_a_stored_tool_message() -> None:
    stored: list[UIMessage] = [
        {
            "id": "srv-a1",
            "role": "assistant",
            "parts": [
                {"type": "text", "text": "ok"},
                {"type": "tool-a", "toolCallId": "c1", "state": "input-available"},
            ],
        }
    ]
    incoming: list[UIMessage] = [
        {"id": "cli-a1", "role": "assistant", "parts": [{"type": "text", "text": "ok"}]}
    ]
    assert reconcile_messages(incoming, stored)[0]["id"] == "cli-a1"


def test_a_reused_tool_call_id_claims_stored_rows_one_to_one() -> None:
    stored = [
        user("u1", "first"),
        tool_reply("srv-a1", "c1", "output-available", input={"turn": 1}, output="old"),
    ]
    incoming = [
        user("u1", "first"),
        tool_reply("srv-a1", "c1", "output-available", input={"turn": 1}, output="old"),
        user("u2", "second"),
        tool_reply("cli-a2", "c1", "input-available", input={"turn": 2}),
    ]
    result = reconcile_messages(incoming, stored)
    assert [m["id"] for m in result] == ["u1", "srv-a1", "u2", "cli-a2"]
    assert tool_of(result[3])["state"] == "input-available"
    assert "output" not in tool_of(result[3])


def test_an_unclaimed_duplicate_of_the_same_call_still_gets_the_result() -> None:
    stored = [tool_reply("srv-a1", "c1", "output-error", input={"q": "same"}, errorText="boom")]
    incoming = [
        tool_reply("srv-a1", "c1", "output-error", input={"q": "same"}, errorText="boom"),
        tool_reply("cli-a9", "c1", "input-available", input={"q": "same"}),
    ]
    result = reconcile_messages(incoming, stored)
    assert result[1]["id"] == "cli-a9"
    assert tool_of(result[1])["state"] == "output-error"
    assert tool_of(result[1])["errorText"] == "boom"


def test_a_reused_id_with_different_input_does_not_inherit_the_old_result() -> None:
    stored = [tool_reply("srv-a1", "c1", "output-available", input={"q": "first"}, output="old")]
    incoming = [
        tool_reply("srv-a1", "c1", "output-available", input={"q": "first"}, output="old"),
        tool_reply("cli-a9", "c1", "input-available", input={"q": "second"}),
    ]
    result = reconcile_messages(incoming, stored)
    assert tool_of(result[1])["state"] == "input-available"
    assert "output" not in tool_of(result[1])


def test_empty_storage_keeps_every_id() -> None:
    incoming = [user("u1", "hi"), reply("cli-a1", "Hello")]
    assert [m["id"] for m in reconcile_messages(incoming, [])] == ["u1", "cli-a1"]


# ------------------------------------------------------------------------------------------ tool inputs


@pytest.mark.parametrize(
    ("fields", "expected"),
    [
        ({"input": []}, {}),
        ({"input": [{"a": 1}]}, {}),
        ({}, {}),
        ({"input": None}, {}),
        ({"input": '{"a": 1}'}, {"a": 1}),
    ],
)
def test_non_object_tool_inputs_become_objects(fields: dict[str, Any], expected: dict[str, Any]) -> None:
    incoming = [tool_reply("a1", "c1", "input-available", **fields)]
    assert tool_of(reconcile_messages(incoming, [])[0])["input"] == expected


@pytest.mark.parametrize("state", ["output-error", "output-denied"])
def test_errored_and_denied_parts_are_left_untouched(state: str) -> None:
    incoming = [tool_reply("a1", "c1", state, input=[1, 2], errorText="x")]
    result = reconcile_messages(incoming, [])
    assert result[0] is incoming[0]
    assert tool_of(result[0])["input"] == [1, 2]


def test_reconciliation_never_mutates_its_arguments() -> None:
    stored = [
        user("u1", "q"),
        tool_reply("srv-a1", "c1", "output-available", input={"x": 1}, output=2),
        reply("srv-a2", "ok"),
    ]
    incoming = [
        user("u1", "q"),
        tool_reply("cli-a1", "c1", "input-available", input={"x": 1}),
        reply("cli-a2", "ok"),
        tool_reply("cli-a3", "c9", "input-available", input=[]),
    ]
    stored_before, incoming_before = copy.deepcopy(stored), copy.deepcopy(incoming)
    result = reconcile_messages(incoming, stored)
    assert stored == stored_before
    assert incoming == incoming_before
    assert [m["id"] for m in result] == ["u1", "srv-a1", "srv-a2", "cli-a3"]
    assert tool_of(result[3])["input"] == {}
