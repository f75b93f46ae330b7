"""ui_messages_to_model_messages: AI SDK UIMessages → provider-neutral model messages."""

from __future__ import annotations

from typing import Any

import pytest

from ponder.models import (
    AssistantMessage,
    FileContent,
    ReasoningContent,
    SystemMessage,
    TextContent,
    ToolCall,
    ToolMessage,
    ToolResult,
    UserMessage,
    ui_messages_to_model_messages,
)


def ui(role: str, *parts: dict[str, Any], id: str = "m") -> dict[str, Any]:
    return {"id": id, "role": role, "parts": list(parts)}


def text(value: str) -> dict[str, Any]:
    return {"type": "text", "text": value}


def tool(name: str, call_id: str, state: str, **extra: Any) -> dict[str, Any]:
    return {"type": f"tool-{name}", "toolCallId": call_id, "state": state, **extra}


def test_plain_conversation() -> None:
    messages = [
        ui("system", text("You are terse.")),
        ui("user", text("hi")),
        ui("assistant", {"type": "step-start"}, text("hello")),
    ]
    assert ui_messages_to_model_messages(messages) == [
        SystemMessage("You are terse."),
        UserMessage("hi"),
        AssistantMessage("hello"),
    ]


def test_user_files() -> None:
    part = {
        "type": "file",
        "mediaType": "image/png",
        "filename": "cat.png",
        "url": "data:image/png;base64,AAAA",
    }
    [message] = ui_messages_to_model_messages([ui("user", text("what is this"), part)])
    assert message == UserMessage(
        [TextContent("what is this"), FileContent("data:image/png;base64,AAAA", "image/png", "cat.png")]
    )


def test_settled_tool_becomes_call_plus_result() -> None:
    part = tool("weather", "c1", "output-available", input={"city": "Paris"}, output={"temp": 21})
    result = ui_messages_to_model_messages([ui("assistant", text("Checking."), part, text(""))])
    assert result == [
        AssistantMessage([TextContent("Checking."), ToolCall("c1", "weather", {"city": "Paris"})]),
        ToolMessage([ToolResult("c1", "weather", output={"temp": 21})]),
    ]


def test_tool_error_uses_error_text_and_raw_input() -> None:
    part = tool("weather", "c1", "output-error", rawInput='{"city": Par', errorText="invalid arguments")
    assert ui_messages_to_model_messages([ui("assistant", part)]) == [
        AssistantMessage([ToolCall("c1", "weather", '{"city": Par')]),
        ToolMessage([ToolResult("c1", "weather", error="invalid arguments")]),
    ]


def test_denied_tool_becomes_an_error_result() -> None:
    denied = tool(
        "delete",
        "c1",
        "output-denied",
        input={"path": "/"},
        approval={"id": "a1", "approved": False, "reason": "too risky"},
    )
    bare = tool(
        "delete", "c2", "output-denied", input={"path": "/tmp"}, approval={"id": "a2", "approved": False}
    )
    [_, results] = ui_messages_to_model_messages([ui("assistant", denied, bare)])
    assert isinstance(results, ToolMessage)
    first, second = results.results
    assert first.is_error and "denied" in (first.error or "") and "too risky" in (first.error or "")
    assert second.is_error and "denied by the user" in (second.error or "")


@pytest.mark.parametrize(
    "state", ["input-streaming", "input-available", "approval-requested", "approval-responded"]
)
def test_incomplete_tool_calls_are_left_out(state: str) -> None:
    part = tool("weather", "c1", state, input={"city": "Paris"})
    assert ui_messages_to_model_messages([ui("assistant", text("Checking."), part)]) == [
        AssistantMessage("Checking.")
    ]
    assert ui_messages_to_model_messages([ui("assistant", part)]) == []


def test_step_start_splits_steps() -> None:
    parts = [
        {"type": "step-start"},
        text("Let me look."),
        tool("search", "c1", "output-available", input={"q": "x"}, output="found"),
        tool("search", "c2", "output-available", input={"q": "y"}, output="none"),
        {"type": "step-start"},
        text("Found it."),
    ]
    assert ui_messages_to_model_messages([ui("assistant", *parts)]) == [
        AssistantMessage(
            [
                TextContent("Let me look."),
                ToolCall("c1", "search", {"q": "x"}),
                ToolCall("c2", "search", {"q": "y"}),
            ]
        ),
        ToolMessage([ToolResult("c1", "search", output="found"), ToolResult("c2", "search", output="none")]),
        AssistantMessage("Found it."),
    ]


def test_dynamic_tool_parts() -> None:
    part = {
        "type": "dynamic-tool",
        "toolName": "mcp_lookup",
        "toolCallId": "d1",
        "state": "output-available",
        "input": {"id": 3},
        "output": [1, 2],
    }
    assert ui_messages_to_model_messages([ui("assistant", part)]) == [
        AssistantMessage([ToolCall("d1", "mcp_lookup", {"id": 3})]),
        ToolMessage([ToolResult("d1", "mcp_lookup", output=[1, 2])]),
    ]


def test_data_and_source_parts_are_ignored() -> None:
    messages = [
        ui("user", text("hi"), {"type": "data-weather", "data": {"x": 1}}),
        ui(
            "assistant",
            {"type": "data-progress", "data": {"pct": 50}},
            {"type": "source-url", "sourceId": "s", "url": "https://example.com"},
            text("done"),
        ),
        ui("assistant", {"type": "data-only", "data": 1}),
    ]
    assert ui_messages_to_model_messages(messages) == [UserMessage("hi"), AssistantMessage("done")]


def test_reasoning_keeps_provider_signature() -> None:
    parts = [
        {"type": "reasoning", "text": "think", "providerMetadata": {"anthropic": {"signature": "sig"}}},
        {"type": "reasoning", "text": "plain"},
        {"type": "reasoning", "text": ""},
        text("answer"),
    ]
    assert ui_messages_to_model_messages([ui("assistant", *parts)]) == [
        AssistantMessage(
            [
                ReasoningContent("think", signature="sig", provider="anthropic"),
                ReasoningContent("plain"),
                TextContent("answer"),
            ]
        )
    ]


def test_provider_executed_tools_are_skipped() -> None:
    part = tool("web_search", "p1", "output-available", input={}, output="x", providerExecuted=True)
    assert ui_messages_to_model_messages([ui("assistant", part, text("ok"))]) == [AssistantMessage("ok")]


def test_non_object_input_is_kept_as_json_text() -> None:
    part = tool("echo", "c1", "output-available", input=[1, 2], output="ok")
    [assistant, _] = ui_messages_to_model_messages([ui("assistant", part)])
    assert isinstance(assistant, AssistantMessage)
    assert assistant.tool_calls == [ToolCall("c1", "echo", "[1, 2]")]


def test_bad_messages_raise_clear_errors() -> None:
    with pytest.raises(ValueError, match="unknown role 'robot'"):
        ui_messages_to_model_messages([ui("robot", text("x"), id="m7")])
    with pytest.raises(ValueError, match=r"m8.*toolCallId"):
        ui_messages_to_model_messages(
            [ui("assistant", {"type": "tool-x", "state": "output-available"}, id="m8")]
        )
    with pytest.raises(ValueError, match="parts"):
        ui_messages_to_model_messages([{"id": "m9", "role": "user", "parts": "hi"}])


def test_empty_messages_are_dropped() -> None:
    assert ui_messages_to_model_messages([ui("user"), ui("system", text("")), ui("assistant")]) == []
