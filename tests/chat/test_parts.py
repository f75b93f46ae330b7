"""Part helpers and ids: the questions every layer asks of a UIMessage, answered like the AI SDK does."""

from __future__ import annotations

from typing import Any

import pytest

from ponder.chat import (
    is_settled_tool_part,
    is_tool_part,
    message_text,
    new_message_id,
    normalize_tool_input,
    tool_part_name,
    user_message,
)


def test_new_message_ids_look_like_the_ai_sdks_and_do_not_repeat() -> None:
    ids = {new_message_id() for _ in range(2000)}
    assert len(ids) == 2000
    assert all(len(i) == 16 and i.isascii() and i.isalnum() for i in ids)


@pytest.mark.parametrize(
    ("part", "expected"),
    [
        ({"type": "tool-getWeather", "toolCallId": "c"}, True),
        ({"type": "dynamic-tool", "toolName": "mcp_x", "toolCallId": "c"}, True),
        ({"type": "text", "text": "tool-ish"}, False),
        ({"type": "step-start"}, False),
        ({"type": "data-tool-log", "data": 1}, False),
        ({}, False),
    ],
)
def test_is_tool_part(part: dict[str, Any], expected: bool) -> None:
    assert is_tool_part(part) is expected


def test_tool_part_name_for_static_dynamic_and_other_parts() -> None:
    assert tool_part_name({"type": "tool-getWeather"}) == "getWeather"
    assert tool_part_name({"type": "tool-web-search"}) == "web-search"
    assert tool_part_name({"type": "dynamic-tool", "toolName": "mcp_search"}) == "mcp_search"
    assert tool_part_name({"type": "text", "text": "x"}) is None


@pytest.mark.parametrize(
    ("part", "settled"),
    [
        ({"state": "output-available", "output": 1}, True),
        ({"state": "output-available", "output": 1, "preliminary": False}, True),
        ({"state": "output-available", "output": "50%", "preliminary": True}, False),
        ({"state": "output-error", "errorText": "x"}, True),
        ({"state": "output-denied"}, True),
        ({"state": "approval-responded"}, False),
        ({"state": "approval-requested"}, False),
        ({"state": "input-available"}, False),
        ({"state": "input-streaming"}, False),
    ],
)
def test_is_settled_tool_part(part: dict[str, Any], settled: bool) -> None:
    assert is_settled_tool_part({"type": "tool-a", "toolCallId": "c", **part}) is settled


def test_message_text_joins_text_parts_only() -> None:
    message = {
        "id": "a",
        "role": "assistant",
        "parts": [
            {"type": "step-start"},
            {"type": "reasoning", "text": "hidden"},
            {"type": "text", "text": "Hello, "},
            {"type": "tool-a", "toolCallId": "c", "state": "output-available", "output": "x"},
            {"type": "text", "text": "world"},
        ],
    }
    assert message_text(message) == "Hello, world"
    assert message_text({"id": "b", "role": "assistant", "parts": []}) == ""


def test_user_message_builds_a_single_text_part_message() -> None:
    assert user_message("hi", id="u1") == {
        "id": "u1",
        "role": "user",
        "parts": [{"type": "text", "text": "hi"}],
    }
    minted = user_message("")
    assert len(minted["id"]) == 16 and minted["parts"] == [{"type": "text", "text": ""}]


def test_normalize_tool_input_keeps_objects_as_the_same_object() -> None:
    value = {"a": [1]}
    assert normalize_tool_input(value) is value
    assert normalize_tool_input('{"a": [1]}') == value
    assert normalize_tool_input("[1]") == {}
    assert normalize_tool_input("not json") == {}
