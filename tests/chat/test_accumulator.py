"""MessageAccumulator: UIMessageChunk streams -> one assistant UIMessage (spec §4, §13.8)."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from ponder.chat import (
    ChunkOutcome,
    MessageAccumulator,
    UIMessage,
    UIMessageChunk,
    apply_tool_result,
)


def feed(acc: MessageAccumulator, chunks: list[UIMessageChunk]) -> list[Any]:
    return [acc.apply(chunk) for chunk in chunks]


def text_chunks(text_id: str, *deltas: str) -> list[UIMessageChunk]:
    return [
        {"type": "text-start", "id": text_id},
        *({"type": "text-delta", "id": text_id, "delta": d} for d in deltas),
        {"type": "text-end", "id": text_id},
    ]


def tool_call_chunks(call_id: str, name: str, args: dict[str, Any]) -> list[UIMessageChunk]:
    encoded = json.dumps(args)
    return [
        {"type": "tool-input-start", "toolCallId": call_id, "toolName": name},
        {"type": "tool-input-delta", "toolCallId": call_id, "inputTextDelta": encoded[:5]},
        {"type": "tool-input-delta", "toolCallId": call_id, "inputTextDelta": encoded[5:]},
        {"type": "tool-input-available", "toolCallId": call_id, "toolName": name, "input": args},
    ]


def tool_part(acc: MessageAccumulator, call_id: str) -> dict[str, Any]:
    matches = [p for p in acc.message["parts"] if p.get("toolCallId") == call_id]
    assert len(matches) == 1, f"expected exactly one part for {call_id}, got {matches}"
    return matches[0]


# ------------------------------------------------------------------------------------------ text replies


def test_full_text_reply_builds_the_message_the_ai_sdk_client_renders() -> None:
    acc = MessageAccumulator("local-id")
    results = feed(
        acc,
        [
            {"type": "start", "messageId": "asst_1", "messageMetadata": {"model": "test"}},
            {"type": "start-step"},
            *text_chunks("t1", "You said: ", "Hi there", "."),
            {"type": "finish-step"},
            {"type": "finish", "finishReason": "stop", "messageMetadata": {"usage": {"outputTokens": 4}}},
        ],
    )

    assert all(r.applied for r in results)
    assert acc.message == {
        "id": "asst_1",
        "role": "assistant",
        "parts": [{"type": "step-start"}, {"type": "text", "text": "You said: Hi there.", "state": "done"}],
        "metadata": {"model": "test", "usage": {"outputTokens": 4}},
    }
    assert acc.finish_reason == "stop"
    assert acc.message_id == "asst_1"


def test_message_serialises_with_the_ai_sdk_key_order() -> None:
    acc = MessageAccumulator("asst_d92m4oc7")
    feed(acc, [{"type": "start"}, {"type": "start-step"}, *text_chunks("t", "Hello")])
    assert json.dumps(acc.message, separators=(",", ":")) == (
        '{"id":"asst_d92m4oc7","role":"assistant","parts":[{"type":"step-start"},'
        '{"type":"text","text":"Hello","state":"done"}]}'
    )


def test_without_an_id_the_accumulator_mints_one_and_a_start_without_message_id_keeps_it() -> None:
    acc = MessageAccumulator()
    minted = acc.message_id
    assert len(minted) == 16 and minted.isalnum()
    acc.apply({"type": "start", "messageMetadata": {"k": 1}})
    assert acc.message_id == minted
    assert acc.metadata == {"k": 1}


def test_message_has_no_metadata_key_until_a_chunk_sets_metadata() -> None:
    acc = MessageAccumulator("m")
    feed(acc, [{"type": "start", "messageId": "m2"}, *text_chunks("t", "x"), {"type": "finish"}])
    assert "metadata" not in acc.message


def test_text_part_is_streaming_until_text_end_and_reads_are_current_mid_stream() -> None:
    acc = MessageAccumulator("m")
    feed(acc, [{"type": "text-start", "id": "t"}, {"type": "text-delta", "id": "t", "delta": "Hel"}])
    assert acc.message["parts"] == [{"type": "text", "text": "Hel", "state": "streaming"}]

    acc.apply({"type": "text-delta", "id": "t", "delta": "lo"})
    assert acc.parts[0]["text"] == "Hello"
    assert acc.parts[0]["state"] == "streaming"

    acc.apply({"type": "text-end", "id": "t"})
    assert acc.parts[0] == {"type": "text", "text": "Hello", "state": "done"}


def test_text_delta_without_text_start_opens_a_part_for_resumed_streams() -> None:
    acc = MessageAccumulator("m")
    acc.apply({"type": "text-delta", "id": "t9", "delta": "resumed"})
    acc.apply({"type": "text-delta", "id": "t9", "delta": " text"})
    acc.apply({"type": "text-end", "id": "t9"})
    assert acc.parts == [{"type": "text", "text": "resumed text", "state": "done"}]


def test_consecutive_text_segments_become_separate_parts() -> None:
    acc = MessageAccumulator("m")
    feed(acc, [*text_chunks("a", "first"), *text_chunks("b", "second")])
    assert [p["text"] for p in acc.parts] == ["first", "second"]


def test_interleaved_text_ids_go_to_their_own_parts() -> None:
    acc = MessageAccumulator("m")
    feed(
        acc,
        [
            {"type": "text-start", "id": "a"},
            {"type": "text-start", "id": "b"},
            {"type": "text-delta", "id": "a", "delta": "A1"},
            {"type": "text-delta", "id": "b", "delta": "B1"},
            {"type": "text-delta", "id": "a", "delta": "A2"},
            {"type": "text-end", "id": "a"},
            {"type": "text-delta", "id": "b", "delta": "B2"},
        ],
    )
    assert acc.parts == [
        {"type": "text", "text": "A1A2", "state": "done"},
        {"type": "text", "text": "B1B2", "state": "streaming"},
    ]


def test_chunks_without_ids_still_build_text() -> None:
    acc = MessageAccumulator("m")
    feed(
        acc,
        [
            {"type": "text-start"},
            {"type": "text-delta", "delta": "hello "},
            {"type": "text-delta", "delta": "world"},
            {"type": "text-end"},
        ],
    )
    assert acc.parts == [{"type": "text", "text": "hello world", "state": "done"}]


# ------------------------------------------------------------------------------------------- reasoning


def test_reasoning_part_lifecycle_keeps_the_anthropic_signature_from_reasoning_end() -> None:
    acc = MessageAccumulator("m")
    feed(
        acc,
        [
            {"type": "reasoning-start", "id": "r"},
            {"type": "reasoning-delta", "id": "r", "delta": "deep ", "providerMetadata": {"x": {"a": 1}}},
            {"type": "reasoning-delta", "id": "r", "delta": "thought"},
            {"type": "reasoning-end", "id": "r", "providerMetadata": {"anthropic": {"signature": "sig-1"}}},
        ],
    )
    assert acc.parts == [
        {
            "type": "reasoning",
            "text": "deep thought",
            "state": "done",
            "providerMetadata": {"x": {"a": 1}, "anthropic": {"signature": "sig-1"}},
        }
    ]


def test_reasoning_without_provider_metadata_has_no_metadata_key() -> None:
    acc = MessageAccumulator("m")
    feed(
        acc,
        [
            {"type": "reasoning-start", "id": "r"},
            {"type": "reasoning-delta", "id": "r", "delta": "hmm"},
            {"type": "reasoning-end", "id": "r"},
        ],
    )
    assert acc.parts == [{"type": "reasoning", "text": "hmm", "state": "done"}]


def test_reasoning_delta_without_start_opens_a_part_with_its_provider_metadata() -> None:
    acc = MessageAccumulator("m")
    acc.apply(
        {
            "type": "reasoning-delta",
            "id": "r",
            "delta": "resumed",
            "providerMetadata": {"anthropic": {"redactedData": "enc"}},
        }
    )
    assert acc.parts == [
        {
            "type": "reasoning",
            "text": "resumed",
            "state": "streaming",
            "providerMetadata": {"anthropic": {"redactedData": "enc"}},
        }
    ]


def test_reasoning_then_text_in_one_step() -> None:
    acc = MessageAccumulator("m")
    feed(
        acc,
        [
            {"type": "start-step"},
            {"type": "reasoning-start", "id": "r"},
            {"type": "reasoning-delta", "id": "r", "delta": "think"},
            {"type": "reasoning-end", "id": "r"},
            *text_chunks("t", "answer"),
            {"type": "finish-step"},
        ],
    )
    assert [p["type"] for p in acc.parts] == ["step-start", "reasoning", "text"]


# --------------------------------------------------------------------------------- files, sources, steps


def test_file_and_source_chunks_append_parts() -> None:
    acc = MessageAccumulator("m")
    feed(
        acc,
        [
            {"type": "file", "mediaType": "image/png", "url": "https://example.com/a.png"},
            {"type": "source-url", "sourceId": "s1", "url": "https://example.com", "title": "Example"},
            {"type": "source-url", "sourceId": "s2", "url": "https://example.org"},
            {
                "type": "source-document",
                "sourceId": "s3",
                "mediaType": "application/pdf",
                "title": "Doc",
                "filename": "doc.pdf",
            },
        ],
    )
    assert acc.parts == [
        {"type": "file", "mediaType": "image/png", "url": "https://example.com/a.png"},
        {"type": "source-url", "sourceId": "s1", "url": "https://example.com", "title": "Example"},
        {"type": "source-url", "sourceId": "s2", "url": "https://example.org"},
        {
            "type": "source-document",
            "sourceId": "s3",
            "mediaType": "application/pdf",
            "title": "Doc",
            "filename": "doc.pdf",
        },
    ]


@pytest.mark.parametrize("chunk_type", ["start-step", "step-start"])
def test_both_step_start_spellings_push_a_step_boundary(chunk_type: str) -> None:
    acc = MessageAccumulator("m")
    assert acc.apply({"type": chunk_type}).applied
    assert acc.parts == [{"type": "step-start"}]


def test_finish_step_changes_no_parts() -> None:
    acc = MessageAccumulator("m")
    assert acc.apply({"type": "finish-step"}).applied
    assert acc.parts == []
    assert not acc.has_parts()


# ------------------------------------------------------------------------------------------------ tools


def test_tool_call_streams_input_then_output() -> None:
    acc = MessageAccumulator("m")
    acc.apply({"type": "tool-input-start", "toolCallId": "c1", "toolName": "getWeather"})
    assert tool_part(acc, "c1") == {
        "type": "tool-getWeather",
        "toolCallId": "c1",
        "toolName": "getWeather",
        "state": "input-streaming",
    }

    acc.apply({"type": "tool-input-delta", "toolCallId": "c1", "inputTextDelta": '{"city":'})
    assert "input" not in tool_part(acc, "c1"), "partial JSON text never becomes the stored input"

    feed(
        acc,
        [
            {"type": "tool-input-delta", "toolCallId": "c1", "inputTextDelta": '"Lisbon"}'},
            {
                "type": "tool-input-available",
                "toolCallId": "c1",
                "toolName": "getWeather",
                "input": {"city": "Lisbon"},
            },
            {"type": "tool-output-available", "toolCallId": "c1", "output": {"temp": 21}},
        ],
    )
    assert tool_part(acc, "c1") == {
        "type": "tool-getWeather",
        "toolCallId": "c1",
        "toolName": "getWeather",
        "state": "output-available",
        "input": {"city": "Lisbon"},
        "output": {"temp": 21},
    }


def test_tool_input_available_without_start_creates_the_part() -> None:
    acc = MessageAccumulator("m")
    result = acc.apply(
        {"type": "tool-input-available", "toolCallId": "c1", "toolName": "calc", "input": {"x": 1}}
    )
    assert result.applied
    assert tool_part(acc, "c1") == {
        "type": "tool-calc",
        "toolCallId": "c1",
        "toolName": "calc",
        "state": "input-available",
        "input": {"x": 1},
    }


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ('{"q": "cats"}', {"q": "cats"}),
        ('  {"q": 1}', {"q": 1}),
        ([1, 2], {}),
        ([{"q": "x"}], {}),
        (None, {}),
        ("", {}),
        ('{"q": ', {}),
        ("[1]", {}),
        (42, {}),
    ],
)
def test_tool_input_is_always_stored_as_an_object(raw: Any, expected: dict[str, Any]) -> None:
    acc = MessageAccumulator("m")
    acc.apply({"type": "tool-input-start", "toolCallId": "c1", "toolName": "search"})
    acc.apply({"type": "tool-input-available", "toolCallId": "c1", "toolName": "search", "input": raw})
    assert tool_part(acc, "c1")["input"] == expected


def test_dynamic_tools_use_the_dynamic_tool_part_type() -> None:
    acc = MessageAccumulator("m")
    feed(
        acc,
        [
            {"type": "tool-input-start", "toolCallId": "c1", "toolName": "mcp_search", "dynamic": True},
            {
                "type": "tool-input-available",
                "toolCallId": "c1",
                "toolName": "mcp_search",
                "input": {},
                "dynamic": True,
            },
            {"type": "tool-output-available", "toolCallId": "c1", "output": "ok", "dynamic": True},
        ],
    )
    part = tool_part(acc, "c1")
    assert part["type"] == "dynamic-tool"
    assert part["toolName"] == "mcp_search"
    assert part["state"] == "output-available"


def test_call_fields_from_the_provider_are_kept() -> None:
    acc = MessageAccumulator("m")
    feed(
        acc,
        [
            {
                "type": "tool-input-start",
                "toolCallId": "c1",
                "toolName": "code_exec",
                "providerExecuted": True,
                "title": "Run code",
            },
            {
                "type": "tool-input-available",
                "toolCallId": "c1",
                "toolName": "code_exec",
                "input": {"code": "1+1"},
                "providerMetadata": {"google": {"k": "v"}},
            },
            {
                "type": "tool-output-available",
                "toolCallId": "c1",
                "output": 2,
                "providerMetadata": {"google": {"r": 1}},
            },
        ],
    )
    part = tool_part(acc, "c1")
    assert part["providerExecuted"] is True
    assert part["title"] == "Run code"
    assert part["callProviderMetadata"] == {"google": {"k": "v"}}
    assert part["resultProviderMetadata"] == {"google": {"r": 1}}


def test_parallel_tool_calls_resolve_independently_in_any_order() -> None:
    acc = MessageAccumulator("m")
    feed(
        acc,
        [
            {"type": "start-step"},
            {"type": "tool-input-start", "toolCallId": "a", "toolName": "weather"},
            {"type": "tool-input-start", "toolCallId": "b", "toolName": "time"},
            {"type": "tool-input-delta", "toolCallId": "b", "inputTextDelta": '{"tz":"UTC"}'},
            {"type": "tool-input-delta", "toolCallId": "a", "inputTextDelta": '{"city":"Oslo"}'},
            {"type": "tool-input-available", "toolCallId": "b", "toolName": "time", "input": {"tz": "UTC"}},
            {
                "type": "tool-input-available",
                "toolCallId": "a",
                "toolName": "weather",
                "input": {"city": "Oslo"},
            },
            {"type": "tool-output-available", "toolCallId": "b", "output": "12:00"},
            {"type": "tool-output-error", "toolCallId": "a", "errorText": "upstream timeout"},
            {"type": "finish-step"},
        ],
    )
    assert [p["type"] for p in acc.parts] == ["step-start", "tool-weather", "tool-time"]
    assert tool_part(acc, "a")["state"] == "output-error"
    assert tool_part(acc, "a")["errorText"] == "upstream timeout"
    assert "output" not in tool_part(acc, "a")
    assert tool_part(acc, "b")["state"] == "output-available"
    assert tool_part(acc, "b")["output"] == "12:00"


def test_multi_step_turn_with_a_tool_round_trip() -> None:
    acc = MessageAccumulator("m")
    feed(
        acc,
        [
            {"type": "start", "messageId": "asst"},
            {"type": "start-step"},
            *tool_call_chunks("c1", "lookup", {"q": "python"}),
            {"type": "tool-output-available", "toolCallId": "c1", "output": ["3.13"]},
            {"type": "finish-step"},
            {"type": "start-step"},
            *text_chunks("t2", "Latest is ", "3.13"),
            {"type": "finish-step"},
            {"type": "finish", "finishReason": "stop"},
        ],
    )
    assert [p["type"] for p in acc.parts] == ["step-start", "tool-lookup", "step-start", "text"]
    assert acc.parts[3]["text"] == "Latest is 3.13"
    assert tool_part(acc, "c1")["input"] == {"q": "python"}


def test_tool_input_error_turns_the_call_into_an_error() -> None:
    acc = MessageAccumulator("m")
    feed(
        acc,
        [
            {"type": "tool-input-start", "toolCallId": "c1", "toolName": "calc"},
            {
                "type": "tool-input-error",
                "toolCallId": "c1",
                "toolName": "calc",
                "input": '{"x": 1}',
                "errorText": "Invalid input for tool calc",
            },
        ],
    )
    assert tool_part(acc, "c1") == {
        "type": "tool-calc",
        "toolCallId": "c1",
        "toolName": "calc",
        "state": "output-error",
        "input": {"x": 1},
        "errorText": "Invalid input for tool calc",
    }


def test_tool_input_error_for_an_unseen_call_creates_an_errored_part() -> None:
    acc = MessageAccumulator("m")
    acc.apply(
        {
            "type": "tool-input-error",
            "toolCallId": "c1",
            "toolName": "nope",
            "input": [],
            "errorText": "no such tool",
        }
    )
    part = tool_part(acc, "c1")
    assert part["state"] == "output-error"
    assert part["input"] == {}
    assert part["errorText"] == "no such tool"


def test_preliminary_outputs_are_replaced_by_the_final_output() -> None:
    acc = MessageAccumulator("m")
    feed(acc, tool_call_chunks("c1", "research", {"topic": "x"}))
    acc.apply(
        {
            "type": "tool-output-available",
            "toolCallId": "c1",
            "output": {"progress": 0.5},
            "preliminary": True,
        }
    )
    assert tool_part(acc, "c1")["preliminary"] is True

    result = acc.apply({"type": "tool-output-available", "toolCallId": "c1", "output": {"summary": "done"}})
    assert result.applied
    part = tool_part(acc, "c1")
    assert part["output"] == {"summary": "done"}
    assert "preliminary" not in part


def test_a_failing_streaming_tool_can_error_after_preliminary_output() -> None:
    acc = MessageAccumulator("m")
    feed(acc, tool_call_chunks("c1", "research", {}))
    acc.apply({"type": "tool-output-available", "toolCallId": "c1", "output": "50%", "preliminary": True})
    assert acc.apply({"type": "tool-output-error", "toolCallId": "c1", "errorText": "crashed"}).applied
    part = tool_part(acc, "c1")
    assert part["state"] == "output-error"
    assert "output" not in part and "preliminary" not in part


def test_output_for_a_call_that_never_got_input_available_still_has_object_input() -> None:
    acc = MessageAccumulator("m")
    feed(
        acc,
        [
            {"type": "tool-input-start", "toolCallId": "c1", "toolName": "t"},
            {"type": "tool-input-delta", "toolCallId": "c1", "inputTextDelta": '{"a": 1}'},
            {"type": "tool-output-available", "toolCallId": "c1", "output": "ok"},
        ],
    )
    assert tool_part(acc, "c1")["input"] == {"a": 1}


# --------------------------------------------------------------------------------------------- approvals


def test_approval_request_moves_the_call_to_approval_requested_with_the_descriptor() -> None:
    acc = MessageAccumulator("m")
    feed(acc, tool_call_chunks("c1", "deleteFile", {"path": "/tmp/x"}))
    result = acc.apply(
        {
            "type": "tool-approval-request",
            "toolCallId": "c1",
            "approvalId": "ap1",
            "approvalDescriptor": {"action": "delete", "target": "/tmp/x"},
        }
    )
    assert result.applied
    part = tool_part(acc, "c1")
    assert part["state"] == "approval-requested"
    assert part["approval"] == {"id": "ap1", "descriptor": {"action": "delete", "target": "/tmp/x"}}
    assert part["input"] == {"path": "/tmp/x"}


def test_approval_request_straight_after_input_deltas_records_the_input_being_approved() -> None:
    acc = MessageAccumulator("m")
    feed(
        acc,
        [
            {"type": "tool-input-start", "toolCallId": "c1", "toolName": "pay"},
            {"type": "tool-input-delta", "toolCallId": "c1", "inputTextDelta": '{"amount":'},
            {"type": "tool-input-delta", "toolCallId": "c1", "inputTextDelta": " 10}"},
            {"type": "tool-approval-request", "toolCallId": "c1", "approvalId": "ap1"},
        ],
    )
    part = tool_part(acc, "c1")
    assert part["state"] == "approval-requested"
    assert part["input"] == {"amount": 10}


def test_late_canonical_input_fills_an_approval_part_without_reopening_it() -> None:
    acc = MessageAccumulator("m")
    feed(
        acc,
        [
            {"type": "tool-input-start", "toolCallId": "c1", "toolName": "pay"},
            {"type": "tool-approval-request", "toolCallId": "c1", "approvalId": "ap1"},
        ],
    )
    assert "input" not in tool_part(acc, "c1")

    result = acc.apply(
        {"type": "tool-input-available", "toolCallId": "c1", "toolName": "pay", "input": {"amount": 5}}
    )
    assert result.suppressed, "relaying it would move the client's part back to input-available"
    part = tool_part(acc, "c1")
    assert part["state"] == "approval-requested"
    assert part["input"] == {"amount": 5}


def test_late_input_never_replaces_an_input_the_user_already_saw() -> None:
    acc = MessageAccumulator("m")
    feed(acc, tool_call_chunks("c1", "pay", {"amount": 5}))
    acc.apply({"type": "tool-approval-request", "toolCallId": "c1", "approvalId": "ap1"})
    acc.apply(
        {"type": "tool-input-available", "toolCallId": "c1", "toolName": "pay", "input": {"amount": 500}}
    )
    assert tool_part(acc, "c1")["input"] == {"amount": 5}


def test_denied_in_stream_marks_the_call_output_denied() -> None:
    acc = MessageAccumulator("m")
    feed(acc, tool_call_chunks("c1", "rm", {}))
    acc.apply({"type": "tool-approval-request", "toolCallId": "c1", "approvalId": "ap1"})
    assert acc.apply({"type": "tool-output-denied", "toolCallId": "c1"}).applied
    part = tool_part(acc, "c1")
    assert part["state"] == "output-denied"
    assert part["approval"] == {"id": "ap1"}


# ------------------------------------------------------------------------------------- regression guard


def _settled_call(state: str = "output-available") -> MessageAccumulator:
    acc = MessageAccumulator("m")
    feed(acc, tool_call_chunks("c1", "search", {"q": "a"}))
    if state == "output-available":
        acc.apply({"type": "tool-output-available", "toolCallId": "c1", "output": "original"})
    elif state == "output-error":
        acc.apply({"type": "tool-output-error", "toolCallId": "c1", "errorText": "boom"})
    elif state == "output-denied":
        acc.apply({"type": "tool-output-denied", "toolCallId": "c1"})
    return acc


def test_provider_replay_of_a_finished_tool_round_trip_changes_nothing() -> None:
    """OpenAI Responses replays earlier calls in continuation streams (cloudflare/agents#1404)."""
    acc = _settled_call()
    before = copy.deepcopy(acc.message)
    replay = [
        {"type": "tool-input-start", "toolCallId": "c1", "toolName": "search"},
        {"type": "tool-input-delta", "toolCallId": "c1", "inputTextDelta": '{"q":"a"}'},
        {"type": "tool-input-available", "toolCallId": "c1", "toolName": "search", "input": {"q": "a"}},
        {"type": "tool-output-available", "toolCallId": "c1", "output": "replayed"},
    ]
    results = feed(acc, replay)
    assert [r.outcome for r in results] == [ChunkOutcome.SUPPRESSED] * 4
    assert [r.reason for r in results] == [
        "duplicate-tool-start",
        "stale-tool-input",
        "stale-tool-input",
        "tool-already-settled",
    ]
    assert all(r.tool_call_id == "c1" for r in results)
    assert acc.message == before


def test_duplicate_tool_start_is_suppressed_even_while_input_streams() -> None:
    acc = MessageAccumulator("m")
    acc.apply({"type": "tool-input-start", "toolCallId": "c1", "toolName": "a"})
    result = acc.apply({"type": "tool-input-start", "toolCallId": "c1", "toolName": "a"})
    assert result.suppressed and result.reason == "duplicate-tool-start"
    assert len(acc.parts) == 1


def test_late_delta_after_input_available_is_suppressed() -> None:
    acc = MessageAccumulator("m")
    feed(acc, tool_call_chunks("c1", "a", {"x": 1}))
    result = acc.apply(
        {"type": "tool-input-delta", "toolCallId": "c1", "inputTextDelta": "garbage", "input": {"x": 9}}
    )
    assert result.suppressed
    assert tool_part(acc, "c1")["input"] == {"x": 1}


def test_delta_for_an_unknown_call_is_suppressed() -> None:
    acc = MessageAccumulator("m")
    result = acc.apply({"type": "tool-input-delta", "toolCallId": "ghost", "inputTextDelta": "{"})
    assert result.suppressed and result.reason == "unknown-tool-call"
    assert acc.parts == []


def test_repeated_input_available_is_suppressed() -> None:
    acc = MessageAccumulator("m")
    feed(acc, tool_call_chunks("c1", "a", {"x": 1}))
    result = acc.apply(
        {"type": "tool-input-available", "toolCallId": "c1", "toolName": "a", "input": {"x": 2}}
    )
    assert result.suppressed
    assert tool_part(acc, "c1")["input"] == {"x": 1}


@pytest.mark.parametrize("state", ["output-available", "output-error", "output-denied"])
def test_a_settled_call_keeps_its_first_outcome(state: str) -> None:
    acc = _settled_call(state)
    before = copy.deepcopy(acc.message)
    for chunk in (
        {"type": "tool-output-available", "toolCallId": "c1", "output": "late"},
        {"type": "tool-output-error", "toolCallId": "c1", "errorText": "late"},
        {"type": "tool-output-denied", "toolCallId": "c1"},
        {"type": "tool-approval-request", "toolCallId": "c1", "approvalId": "ap9"},
        {"type": "tool-input-error", "toolCallId": "c1", "toolName": "search", "errorText": "late"},
    ):
        assert acc.apply(chunk).suppressed, chunk
    assert acc.message == before


def _continuing_after_approval() -> tuple[MessageAccumulator, UIMessage]:
    stored: UIMessage = {
        "id": "asst_1",
        "role": "assistant",
        "parts": [
            {"type": "step-start"},
            {
                "type": "tool-deploy",
                "toolCallId": "c1",
                "toolName": "deploy",
                "state": "approval-responded",
                "input": {"env": "prod"},
                "approval": {"id": "ap1", "approved": True},
            },
        ],
    }
    return MessageAccumulator(message=stored, continuation=True), stored


def test_denial_or_new_approval_request_after_the_user_approved_is_suppressed() -> None:
    acc, _ = _continuing_after_approval()
    denied = acc.apply({"type": "tool-output-denied", "toolCallId": "c1"})
    requested = acc.apply({"type": "tool-approval-request", "toolCallId": "c1", "approvalId": "ap2"})
    assert denied.suppressed and denied.reason == "tool-already-answered"
    assert requested.suppressed and requested.reason == "tool-already-answered"
    part = tool_part(acc, "c1")
    assert part["state"] == "approval-responded"
    assert part["approval"] == {"id": "ap1", "approved": True}


def test_an_approved_call_in_the_continued_message_receives_its_output_in_place() -> None:
    acc, _ = _continuing_after_approval()
    result = acc.apply({"type": "tool-output-available", "toolCallId": "c1", "output": {"deployed": True}})
    assert result.applied
    part = tool_part(acc, "c1")
    assert part["state"] == "output-available"
    assert part["output"] == {"deployed": True}
    assert part["approval"] == {"id": "ap1", "approved": True}


# ----------------------------------------------------------------------------------------- cross-message


@pytest.mark.parametrize(
    "chunk",
    [
        {"type": "tool-output-available", "toolCallId": "old", "output": 1},
        {"type": "tool-output-error", "toolCallId": "old", "errorText": "x"},
        {"type": "tool-output-denied", "toolCallId": "old"},
        {"type": "tool-approval-request", "toolCallId": "old", "approvalId": "ap"},
    ],
)
def test_tool_outcome_for_a_call_in_an_earlier_message_is_reported_not_applied(chunk: UIMessageChunk) -> None:
    acc = MessageAccumulator("new")
    acc.apply({"type": "start-step"})
    result = acc.apply(chunk)
    assert result.cross_message
    assert result.outcome is ChunkOutcome.CROSS_MESSAGE
    assert result.tool_call_id == "old"
    assert acc.parts == [{"type": "step-start"}]


def test_output_for_a_call_in_this_message_is_not_cross_message() -> None:
    acc = MessageAccumulator("m")
    feed(acc, tool_call_chunks("c1", "a", {}))
    assert not acc.apply({"type": "tool-output-available", "toolCallId": "c1", "output": 1}).cross_message


# -------------------------------------------------------------------------------------------- data parts


def test_transient_data_is_handled_but_never_persisted() -> None:
    acc = MessageAccumulator("m")
    result = acc.apply({"type": "data-progress", "id": "p", "data": {"pct": 10}, "transient": True})
    assert result.applied
    assert acc.parts == []


def test_data_parts_with_an_id_are_upserted_by_type_and_id() -> None:
    acc = MessageAccumulator("m")
    feed(
        acc,
        [
            {"type": "data-status", "id": "job1", "data": {"state": "queued"}},
            *text_chunks("t", "working"),
            {"type": "data-status", "id": "job2", "data": {"state": "queued"}},
            {"type": "data-other", "id": "job1", "data": "separate type, separate part"},
            {"type": "data-status", "id": "job1", "data": {"state": "done"}},
        ],
    )
    assert acc.parts == [
        {"type": "data-status", "id": "job1", "data": {"state": "done"}},
        {"type": "text", "text": "working", "state": "done"},
        {"type": "data-status", "id": "job2", "data": {"state": "queued"}},
        {"type": "data-other", "id": "job1", "data": "separate type, separate part"},
    ]


def test_data_parts_without_an_id_always_append() -> None:
    acc = MessageAccumulator("m")
    feed(acc, [{"type": "data-log", "data": "one"}, {"type": "data-log", "data": "two"}])
    assert acc.parts == [{"type": "data-log", "data": "one"}, {"type": "data-log", "data": "two"}]


# ------------------------------------------------------------------------------------ message metadata


def test_metadata_from_start_message_metadata_and_finish_deep_merges() -> None:
    acc = MessageAccumulator("m")
    feed(
        acc,
        [
            {"type": "start", "messageMetadata": {"model": "a", "usage": {"in": 1}, "tags": ["x"]}},
            {"type": "message-metadata", "messageMetadata": {"usage": {"out": 2}, "tags": ["y"]}},
            {"type": "finish", "messageMetadata": {"model": "b"}},
        ],
    )
    assert acc.metadata == {"model": "b", "usage": {"in": 1, "out": 2}, "tags": ["y"]}


def test_error_and_abort_chunks_are_recorded_without_touching_parts() -> None:
    acc = MessageAccumulator("m")
    feed(
        acc, [*text_chunks("t", "partial"), {"type": "error", "errorText": "rate limited"}, {"type": "abort"}]
    )
    assert acc.error_text == "rate limited"
    assert acc.aborted is True
    assert acc.parts == [{"type": "text", "text": "partial", "state": "done"}]


# -------------------------------------------------------------------------------------------- bad input


def test_unknown_chunk_types_are_unhandled_and_change_nothing() -> None:
    acc = MessageAccumulator("m")
    result = acc.apply({"type": "future-chunk", "x": 1})
    assert not result.handled
    assert result.reason == "unknown-chunk-type"
    assert acc.parts == []


@pytest.mark.parametrize(
    "chunk",
    [
        {},
        {"type": None},
        {"type": ["text-start"]},
        {"type": "tool-input-start", "toolName": "a"},
        {"type": "tool-output-available", "toolCallId": 7, "output": 1},
    ],
)
def test_malformed_chunks_are_unhandled_and_change_nothing(chunk: UIMessageChunk) -> None:
    acc = MessageAccumulator("m")
    result = acc.apply(chunk)
    assert result.outcome is ChunkOutcome.UNHANDLED
    assert result.reason == "malformed-chunk"
    assert acc.parts == []


# ------------------------------------------------------------------------------ live message and replay


def test_a_client_tool_result_applied_to_the_live_message_mid_stream_is_kept() -> None:
    acc = MessageAccumulator("m")
    feed(acc, tool_call_chunks("c1", "getLocation", {}))
    assert apply_tool_result(acc.message, "c1", output={"city": "Lisbon"}) is acc.message

    feed(acc, text_chunks("t", "You are in Lisbon"))
    assert tool_part(acc, "c1")["output"] == {"city": "Lisbon"}
    late = acc.apply({"type": "tool-output-available", "toolCallId": "c1", "output": "other"})
    assert late.suppressed
    assert tool_part(acc, "c1")["output"] == {"city": "Lisbon"}


def test_replaying_a_stored_chunk_buffer_rebuilds_the_same_message() -> None:
    chunks = [
        {"type": "start", "messageId": "asst"},
        {"type": "start-step"},
        {"type": "reasoning-start", "id": "r"},
        {"type": "reasoning-delta", "id": "r", "delta": "plan"},
        {"type": "reasoning-end", "id": "r"},
        *tool_call_chunks("c1", "search", {"q": "x"}),
        {"type": "tool-output-available", "toolCallId": "c1", "output": [1, 2]},
        {"type": "finish-step"},
        {"type": "start-step"},
        {"type": "text-start", "id": "t"},
        {"type": "text-delta", "id": "t", "delta": "half"},
    ]
    live = MessageAccumulator("a")
    feed(live, chunks)
    stored_bodies = [json.dumps(chunk) for chunk in chunks]

    rebuilt = MessageAccumulator("b").apply_all(json.loads(body) for body in stored_bodies)
    assert rebuilt == live.message


def test_snapshot_is_independent_of_later_chunks() -> None:
    acc = MessageAccumulator("m")
    feed(acc, [{"type": "text-start", "id": "t"}, {"type": "text-delta", "id": "t", "delta": "a"}])
    snap = acc.snapshot()
    acc.apply({"type": "text-delta", "id": "t", "delta": "b"})
    assert snap["parts"][0]["text"] == "a"
    assert acc.parts[0]["text"] == "ab"


def test_long_replies_keep_every_delta() -> None:
    acc = MessageAccumulator("m")
    acc.apply({"type": "text-start", "id": "t"})
    for _ in range(50_000):
        acc.apply({"type": "text-delta", "id": "t", "delta": "token "})
    acc.apply({"type": "text-end", "id": "t"})
    assert len(acc.parts[0]["text"]) == 300_000


# ------------------------------------------------------------------------------------------ continuation


def _interrupted_message() -> UIMessage:
    return {
        "id": "asst_1",
        "role": "assistant",
        "parts": [
            {"type": "step-start"},
            {"type": "reasoning", "text": "let me", "state": "streaming"},
            {"type": "text", "text": "The answer is", "state": "streaming"},
            {"type": "data-status", "id": "s", "data": {"step": 1}},
        ],
        "metadata": {"createdAt": 1, "model": "a", "usage": {"in": 5}},
    }


def test_continuation_streams_into_the_same_message_after_its_existing_parts() -> None:
    stored = _interrupted_message()
    pristine = copy.deepcopy(stored)
    acc = MessageAccumulator(message=stored, continuation=True)

    feed(
        acc,
        [
            {"type": "start", "messageId": "some-other-id"},
            {"type": "start-step"},
            *text_chunks("t", " 42."),
            {"type": "data-status", "id": "s", "data": {"step": 2}},
            {"type": "finish-step"},
            {"type": "finish", "finishReason": "stop"},
        ],
    )

    assert acc.message_id == "asst_1"
    assert acc.message["parts"] == [
        {"type": "step-start"},
        {"type": "reasoning", "text": "let me", "state": "done"},
        {"type": "text", "text": "The answer is", "state": "done"},
        {"type": "data-status", "id": "s", "data": {"step": 2}},
        {"type": "step-start"},
        {"type": "text", "text": " 42.", "state": "done"},
    ]
    assert stored == pristine, "the seed message is never mutated"


def test_continuation_start_metadata_replaces_keys_and_keeps_the_rest() -> None:
    acc = MessageAccumulator(message=_interrupted_message(), continuation=True)
    acc.apply({"type": "start", "messageMetadata": {"model": "b", "usage": {"out": 1}}})
    assert acc.metadata == {"createdAt": 1, "model": "b", "usage": {"out": 1}}
    acc.apply({"type": "finish", "messageMetadata": {"usage": {"total": 9}}})
    assert acc.metadata == {"createdAt": 1, "model": "b", "usage": {"out": 1, "total": 9}}


def test_continuation_without_a_seed_message_keeps_its_id_on_start() -> None:
    acc = MessageAccumulator("client-id", continuation=True)
    acc.apply({"type": "start", "messageId": "server-id"})
    assert acc.message_id == "client-id"


def test_non_continuation_seed_can_be_renamed_by_start() -> None:
    acc = MessageAccumulator(message={"id": "a", "role": "assistant", "parts": []})
    acc.apply({"type": "start", "messageId": "b"})
    assert acc.message_id == "b"


def test_continuation_indexes_existing_tool_calls() -> None:
    stored: UIMessage = {
        "id": "asst_1",
        "role": "assistant",
        "parts": [
            {
                "type": "tool-search",
                "toolCallId": "c1",
                "toolName": "search",
                "state": "input-available",
                "input": {},
            },
        ],
    }
    acc = MessageAccumulator(message=stored, continuation=True)
    assert acc.apply({"type": "tool-input-start", "toolCallId": "c1", "toolName": "search"}).suppressed
    assert acc.apply({"type": "tool-output-available", "toolCallId": "c1", "output": 3}).applied
    assert len(acc.parts) == 1
    assert acc.parts[0]["output"] == 3
    assert stored["parts"][0]["state"] == "input-available"


def test_seeding_rejects_a_non_assistant_message_or_a_conflicting_id() -> None:
    with pytest.raises(ValueError):
        MessageAccumulator(message={"id": "u", "role": "user", "parts": []}, continuation=True)
    with pytest.raises(ValueError):
        MessageAccumulator("x", message={"id": "y", "role": "assistant", "parts": []})
