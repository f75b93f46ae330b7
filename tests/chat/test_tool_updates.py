"""Tool results, approvals and cross-message tool chunks applied to stored messages (spec §3.6, §2.5)."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from ponder.chat import (
    DEFAULT_STREAMED_TOOL_ERROR_TEXT,
    DEFAULT_TOOL_ERROR_TEXT,
    MessageAccumulator,
    UIMessage,
    apply_tool_approval,
    apply_tool_chunk_to_message,
    apply_tool_result,
    find_tool_part,
)


def tool(call_id: str, state: str, **extra: Any) -> dict[str, Any]:
    return {
        "type": "tool-getLocation",
        "toolCallId": call_id,
        "toolName": "getLocation",
        "state": state,
        **extra,
    }


def assistant(message_id: str, *parts: dict[str, Any]) -> UIMessage:
    return {"id": message_id, "role": "assistant", "parts": [{"type": "step-start"}, *parts]}


def transcript() -> list[UIMessage]:
    return [
        {"id": "u1", "role": "user", "parts": [{"type": "text", "text": "where am I?"}]},
        assistant("a1", tool("c1", "input-available", input={})),
    ]


# ----------------------------------------------------------------------------------- apply_tool_result


def test_client_result_settles_the_waiting_call_in_place() -> None:
    messages = transcript()
    updated = apply_tool_result(messages, "c1", output={"city": "Lisbon"})
    assert updated is messages[1]
    assert messages[1]["parts"][1] == tool(
        "c1", "output-available", input={}, output={"city": "Lisbon"}, preliminary=False
    )


@pytest.mark.parametrize("state", ["input-available", "approval-requested", "approval-responded"])
def test_result_applies_to_every_waiting_state_and_keeps_approval_data(state: str) -> None:
    approval = {"id": "ap1", "approved": True} if state == "approval-responded" else {"id": "ap1"}
    message = assistant("a1", tool("c1", state, input={"q": 1}, approval=approval))
    assert apply_tool_result(message, "c1", output="ok") is message
    part = message["parts"][1]
    assert part["state"] == "output-available"
    assert part["output"] == "ok"
    assert part["approval"] == approval


@pytest.mark.parametrize(
    "settled",
    [
        tool("c1", "output-available", input={}, output="first"),
        tool("c1", "output-error", input={}, errorText="boom"),
        tool("c1", "output-denied", input={}, approval={"id": "ap", "approved": False}),
    ],
)
def test_a_settled_call_is_never_overwritten_by_a_result(settled: dict[str, Any]) -> None:
    message = assistant("a1", settled)
    before = copy.deepcopy(message)
    assert apply_tool_result(message, "c1", output="late") is None
    assert apply_tool_result(message, "c1", state="output-error", error_text="late") is None
    assert message == before


def test_a_call_still_streaming_its_input_cannot_take_a_result() -> None:
    message = assistant("a1", tool("c1", "input-streaming"))
    assert apply_tool_result(message, "c1", output=1) is None
    assert message["parts"][1]["state"] == "input-streaming"


def test_unknown_tool_call_id_is_a_no_op() -> None:
    messages = transcript()
    before = copy.deepcopy(messages)
    assert apply_tool_result(messages, "nope", output=1) is None
    assert messages == before


def test_error_result_defaults_to_the_stock_denial_text() -> None:
    message = assistant("a1", tool("c1", "input-available", input={}))
    apply_tool_result(message, "c1", state="output-error")
    assert message["parts"][1]["state"] == "output-error"
    assert message["parts"][1]["errorText"] == DEFAULT_TOOL_ERROR_TEXT == "Tool execution denied by user"
    assert "output" not in message["parts"][1]


def test_error_result_keeps_the_clients_error_text() -> None:
    message = assistant("a1", tool("c1", "input-available", input={}))
    apply_tool_result(message, "c1", state="output-error", error_text="GPS unavailable")
    assert message["parts"][1]["errorText"] == "GPS unavailable"


def test_result_with_an_invalid_state_is_rejected_before_anything_changes() -> None:
    message = assistant("a1", tool("c1", "input-available", input={}))
    with pytest.raises(ValueError):
        apply_tool_result(message, "c1", output=1, state="output-denied")  # type: ignore[arg-type]
    assert message["parts"][1]["state"] == "input-available"


def test_result_goes_to_the_newest_waiting_call_when_an_id_is_reused() -> None:
    messages = [
        assistant("a1", tool("c1", "output-available", input={}, output="turn 1")),
        {"id": "u2", "role": "user", "parts": [{"type": "text", "text": "again"}]},
        assistant("a2", tool("c1", "input-available", input={})),
    ]
    assert apply_tool_result(messages, "c1", output="turn 2") is messages[2]
    assert messages[0]["parts"][1]["output"] == "turn 1"
    assert messages[2]["parts"][1]["output"] == "turn 2"


def test_only_the_matching_call_of_a_parallel_batch_changes() -> None:
    message = assistant(
        "a1", tool("c1", "input-available", input={}), tool("c2", "input-available", input={})
    )
    apply_tool_result(message, "c2", output="two")
    assert message["parts"][1]["state"] == "input-available"
    assert message["parts"][2]["state"] == "output-available"


def test_result_normalises_a_bad_stored_input() -> None:
    message = assistant("a1", tool("c1", "input-available", input=[]))
    apply_tool_result(message, "c1", output=1)
    assert message["parts"][1]["input"] == {}


# --------------------------------------------------------------------------------- apply_tool_approval


def test_approval_moves_the_request_to_approval_responded_keeping_its_data() -> None:
    message = assistant(
        "a1", tool("c1", "approval-requested", input={}, approval={"id": "ap1", "descriptor": {"x": 1}})
    )
    assert apply_tool_approval([message], "c1", True) is message
    part = message["parts"][1]
    assert part["state"] == "approval-responded"
    assert part["approval"] == {"id": "ap1", "descriptor": {"x": 1}, "approved": True}


def test_rejection_denies_the_call() -> None:
    message = assistant("a1", tool("c1", "approval-requested", input={}, approval={"id": "ap1"}))
    apply_tool_approval(message, "c1", False, reason="not now")
    part = message["parts"][1]
    assert part["state"] == "output-denied"
    assert part["approval"] == {"id": "ap1", "approved": False, "reason": "not now"}


def test_approval_for_a_call_without_a_request_gets_an_approval_record() -> None:
    message = assistant("a1", tool("c1", "input-available", input={}))
    apply_tool_approval(message, "c1", True)
    assert message["parts"][1]["approval"] == {"id": "c1", "approved": True}


@pytest.mark.parametrize(
    "state", ["input-streaming", "approval-responded", "output-available", "output-error", "output-denied"]
)
def test_approval_is_ignored_once_answered_or_before_input(state: str) -> None:
    message = assistant("a1", tool("c1", state, input={}, approval={"id": "ap1", "approved": True}))
    before = copy.deepcopy(message)
    assert apply_tool_approval(message, "c1", False) is None
    assert message == before


def test_approval_for_an_unknown_call_is_a_no_op() -> None:
    assert apply_tool_approval(transcript(), "ghost", True) is None


# -------------------------------------------------------------------------- apply_tool_chunk_to_message


def test_approved_tool_output_from_the_continuation_lands_in_the_earlier_message() -> None:
    """cloudflare/agents#1627: an approved server tool must not stay stuck at approval-responded."""
    stored = [
        {"id": "u1", "role": "user", "parts": [{"type": "text", "text": "deploy"}]},
        assistant(
            "a1",
            tool("c1", "approval-responded", input={"env": "prod"}, approval={"id": "ap1", "approved": True}),
        ),
    ]
    continuation = MessageAccumulator("a2")
    chunk = {"type": "tool-output-available", "toolCallId": "c1", "output": {"ok": True}}
    result = continuation.apply(chunk)

    assert result.cross_message
    assert find_tool_part(stored, result.tool_call_id) == (1, 1)
    updated = apply_tool_chunk_to_message(stored, chunk)
    assert updated is stored[1]
    assert stored[1]["parts"][1] == tool(
        "c1",
        "output-available",
        input={"env": "prod"},
        approval={"id": "ap1", "approved": True},
        output={"ok": True},
        preliminary=False,
    )
    assert continuation.parts == []


def test_cross_message_output_keeps_a_streamed_preliminary_flag() -> None:
    message = assistant("a1", tool("c1", "approval-responded", input={}))
    apply_tool_chunk_to_message(
        message, {"type": "tool-output-available", "toolCallId": "c1", "output": "50%", "preliminary": True}
    )
    assert message["parts"][1]["preliminary"] is True
    final = {"type": "tool-output-available", "toolCallId": "c1", "output": "done"}
    assert apply_tool_chunk_to_message(message, final) is message
    assert message["parts"][1]["output"] == "done"
    assert message["parts"][1]["preliminary"] is False


def test_cross_message_error_uses_the_chunk_text_or_a_default() -> None:
    a = assistant("a1", tool("c1", "approval-responded", input={}))
    b = assistant("a2", tool("c2", "approval-responded", input={}))
    apply_tool_chunk_to_message(
        a, {"type": "tool-output-error", "toolCallId": "c1", "errorText": "deploy failed"}
    )
    apply_tool_chunk_to_message(b, {"type": "tool-output-error", "toolCallId": "c2"})
    assert a["parts"][1]["errorText"] == "deploy failed"
    assert b["parts"][1]["errorText"] == DEFAULT_STREAMED_TOOL_ERROR_TEXT


@pytest.mark.parametrize(
    "settled",
    [
        tool("c1", "output-available", input={}, output="original"),
        tool("c1", "output-error", input={}, errorText="boom"),
        tool("c1", "output-denied", input={}),
    ],
)
def test_cross_message_replays_never_overwrite_a_settled_call(settled: dict[str, Any]) -> None:
    message = assistant("a1", settled)
    before = copy.deepcopy(message)
    for chunk in (
        {"type": "tool-output-available", "toolCallId": "c1", "output": "replayed"},
        {"type": "tool-output-error", "toolCallId": "c1", "errorText": "replayed"},
        {"type": "tool-output-denied", "toolCallId": "c1"},
        {"type": "tool-approval-request", "toolCallId": "c1", "approvalId": "ap2"},
    ):
        assert apply_tool_chunk_to_message(message, chunk) is None
    assert message == before


def test_cross_message_denial_never_overrides_an_approval() -> None:
    message = assistant(
        "a1", tool("c1", "approval-responded", input={}, approval={"id": "ap1", "approved": True})
    )
    assert apply_tool_chunk_to_message(message, {"type": "tool-output-denied", "toolCallId": "c1"}) is None
    assert (
        apply_tool_chunk_to_message(
            message, {"type": "tool-approval-request", "toolCallId": "c1", "approvalId": "x"}
        )
        is None
    )
    assert message["parts"][1]["state"] == "approval-responded"


def test_cross_message_denial_and_approval_request_apply_to_open_calls() -> None:
    message = assistant(
        "a1",
        tool("c1", "approval-requested", input={}, approval={"id": "ap1"}),
        tool("c2", "input-available", input={}),
    )
    assert apply_tool_chunk_to_message(message, {"type": "tool-output-denied", "toolCallId": "c1"}) is message
    assert (
        apply_tool_chunk_to_message(
            message,
            {
                "type": "tool-approval-request",
                "toolCallId": "c2",
                "approvalId": "ap2",
                "approvalDescriptor": "pay",
            },
        )
        is message
    )
    assert message["parts"][1]["state"] == "output-denied"
    assert message["parts"][2]["state"] == "approval-requested"
    assert message["parts"][2]["approval"] == {"id": "ap2", "descriptor": "pay"}


def test_cross_message_chunk_for_an_unknown_call_changes_nothing() -> None:
    messages = transcript()
    before = copy.deepcopy(messages)
    assert (
        apply_tool_chunk_to_message(
            messages, {"type": "tool-output-available", "toolCallId": "ghost", "output": 1}
        )
        is None
    )
    assert messages == before


def test_only_tool_outcome_chunks_can_be_applied_across_messages() -> None:
    with pytest.raises(ValueError):
        apply_tool_chunk_to_message(transcript(), {"type": "text-delta", "delta": "x"})


# --------------------------------------------------------------------------------------- find_tool_part


def test_find_tool_part_returns_the_newest_location() -> None:
    messages = [
        assistant("a1", tool("c1", "output-available", input={}, output=1)),
        {"id": "u", "role": "user", "parts": [{"type": "text", "text": "hi"}]},
        assistant("a2", {"type": "text", "text": "x"}, tool("c1", "input-available", input={})),
    ]
    assert find_tool_part(messages, "c1") == (2, 2)
    assert find_tool_part(messages[:1], "c1") == (0, 1)
    assert find_tool_part(messages, "missing") is None
    assert find_tool_part([], "c1") is None
