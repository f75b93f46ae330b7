"""sanitize_message: ephemeral OpenAI metadata and empty reasoning never reach storage (spec §6.5)."""

from __future__ import annotations

import copy

from ponder.chat import UIMessage, sanitize_message


def assistant(*parts: dict) -> UIMessage:
    return {"id": "a1", "role": "assistant", "parts": list(parts), "metadata": {"k": 1}}


def test_openai_item_handles_are_stripped_and_other_metadata_kept() -> None:
    message = assistant(
        {
            "type": "text",
            "text": "hi",
            "providerMetadata": {
                "openai": {"itemId": "msg_1", "reasoningEncryptedContent": "enc", "serviceTier": "flex"},
                "gateway": {"cost": 1},
            },
        }
    )
    result = sanitize_message(message)
    assert result["parts"][0]["providerMetadata"] == {
        "openai": {"serviceTier": "flex"},
        "gateway": {"cost": 1},
    }
    assert result["id"] == "a1" and result["metadata"] == {"k": 1}


def test_tool_call_provider_metadata_is_stripped_too() -> None:
    message = assistant(
        {
            "type": "tool-search",
            "toolCallId": "c1",
            "state": "output-available",
            "input": {},
            "output": 1,
            "callProviderMetadata": {"openai": {"itemId": "fc_1"}, "other": {"x": 1}},
        }
    )
    assert sanitize_message(message)["parts"][0]["callProviderMetadata"] == {"other": {"x": 1}}


def test_metadata_left_empty_is_removed_entirely() -> None:
    message = assistant({"type": "text", "text": "hi", "providerMetadata": {"openai": {"itemId": "msg_1"}}})
    assert sanitize_message(message)["parts"] == [{"type": "text", "text": "hi"}]


def test_empty_reasoning_without_metadata_is_dropped() -> None:
    message = assistant(
        {"type": "reasoning", "text": "", "state": "done"},
        {"type": "reasoning", "text": "   \n", "state": "done"},
        {"type": "text", "text": "answer"},
    )
    assert sanitize_message(message)["parts"] == [{"type": "text", "text": "answer"}]


def test_reasoning_left_empty_after_stripping_openai_handles_is_dropped() -> None:
    message = assistant(
        {
            "type": "reasoning",
            "text": "",
            "providerMetadata": {"openai": {"itemId": "rs_1", "reasoningEncryptedContent": "e"}},
        },
        {"type": "text", "text": "answer"},
    )
    assert sanitize_message(message)["parts"] == [{"type": "text", "text": "answer"}]


def test_empty_reasoning_that_carries_a_signature_is_kept() -> None:
    redacted = {"type": "reasoning", "text": "", "providerMetadata": {"anthropic": {"redactedData": "abc"}}}
    message = assistant(redacted)
    assert sanitize_message(message)["parts"] == [redacted]


def test_reasoning_with_text_is_kept_without_metadata() -> None:
    part = {"type": "reasoning", "text": "thinking", "state": "done"}
    assert sanitize_message(assistant(part))["parts"] == [part]


def test_clean_messages_come_back_as_the_same_object() -> None:
    message = assistant({"type": "text", "text": "hi", "providerMetadata": {"anthropic": {"x": 1}}})
    assert sanitize_message(message) is message
    empty: UIMessage = {"id": "u", "role": "user", "parts": []}
    assert sanitize_message(empty) is empty


def test_the_input_message_is_never_mutated() -> None:
    message = assistant(
        {"type": "reasoning", "text": "", "providerMetadata": {"openai": {"itemId": "rs_1"}}},
        {"type": "text", "text": "hi", "providerMetadata": {"openai": {"itemId": "msg_1", "keep": True}}},
    )
    before = copy.deepcopy(message)
    result = sanitize_message(message)
    assert message == before
    assert result is not message
    assert result["parts"] == [{"type": "text", "text": "hi", "providerMetadata": {"openai": {"keep": True}}}]
