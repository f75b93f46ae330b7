"""The Anthropic adapter end to end against the fake provider's messages streaming endpoint."""

from __future__ import annotations

import asyncio
import time

import pytest

from ponder.models import (
    AnthropicModel,
    AssistantMessage,
    Finish,
    ModelError,
    ModelEvent,
    ModelRequest,
    ModelSettings,
    ReasoningContent,
    ReasoningDelta,
    ReasoningEnd,
    TextContent,
    TextDelta,
    ToolCall,
    ToolCallDelta,
    ToolCallEnd,
    ToolCallStart,
    ToolDefinition,
    ToolMessage,
    ToolResult,
    Usage,
    UserMessage,
    resolve_model,
)
from tests.models.fake_provider import FakeProvider

WEATHER = ToolDefinition(
    "get_weather",
    "Current weather in a city.",
    {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
)


def simple(**settings: object) -> ModelRequest:
    return ModelRequest(
        system="Be brief.",
        messages=[UserMessage("hi")],
        tools=[WEATHER],
        settings=ModelSettings(max_retries=0, **settings),  # type: ignore[arg-type]
    )


def sent_key(headers: dict[str, str]) -> str | None:
    """The API key the SDK sent (``x-api-key``, or ``authorization: Bearer`` in newer SDKs)."""
    if "x-api-key" in headers:
        return headers["x-api-key"]
    auth = headers.get("authorization", "")
    return auth.removeprefix("Bearer ") if auth.startswith("Bearer ") else None


async def collect(spec: str, request: ModelRequest) -> list[ModelEvent]:
    return [event async for event in resolve_model(spec).stream(request)]


async def test_text_is_streamed_with_usage_and_finish(fake: FakeProvider) -> None:
    events = await collect("anthropic:text", simple())
    assert events == [
        TextDelta("Hello"),
        TextDelta(", wor"),
        TextDelta("ld!"),
        Usage(input_tokens=25, output_tokens=3),
        Finish("stop"),
    ]
    sent = fake.last()
    assert sent.path == "/anthropic/v1/messages"
    assert sent_key(sent.headers) == "sk-test-anthropic"
    body = sent.body
    assert body["model"] == "text"
    assert body["stream"] is True
    assert body["system"] == [{"type": "text", "text": "Be brief."}] or body["system"] == "Be brief."
    assert body["messages"] == [{"role": "user", "content": [{"type": "text", "text": "hi"}]}]
    assert isinstance(body["max_tokens"], int)
    assert body["tools"] == [
        {
            "name": "get_weather",
            "description": "Current weather in a city.",
            "input_schema": {
                "type": "object",
                "properties": {"city": {"type": "string"}},
                "required": ["city"],
            },
        }
    ]


async def test_thinking_text_and_parallel_tool_calls(fake: FakeProvider) -> None:
    events = await collect("anthropic:tools", simple())
    assert events[:3] == [
        ReasoningDelta("I should "),
        ReasoningDelta("call tools."),
        ReasoningEnd(signature="sig", provider="anthropic"),
    ]
    assert events[2].provider_metadata == {"anthropic": {"signature": "sig"}}  # type: ignore[union-attr]
    assert events[3] == TextDelta("Let me check.")
    assert events[4] == ToolCallStart("toolu_a", "get_weather")
    pieces = [e.args_delta for e in events if isinstance(e, ToolCallDelta) and e.tool_call_id == "toolu_a"]
    assert pieces == ['{"ci', 'ty": "Par', 'is"}']
    assert [e for e in events if isinstance(e, ToolCallEnd)] == [
        ToolCallEnd("toolu_a", "get_weather", {"city": "Paris"}),
        ToolCallEnd("toolu_b", "get_time", {"zone": "CET"}),
    ]
    assert events[-2:] == [Usage(input_tokens=25, output_tokens=30), Finish("tool-calls")]


async def test_history_with_signed_thinking_tool_results_and_settings(fake: FakeProvider) -> None:
    request = ModelRequest(
        system="Be brief.",
        messages=[
            UserMessage("weather?"),
            AssistantMessage(
                [
                    ReasoningContent("I should call tools.", signature="sig", provider="anthropic"),
                    ReasoningContent("unsigned thoughts are not replayed"),
                    TextContent("Checking."),
                    ToolCall("toolu_a", "get_weather", {"city": "Paris"}),
                ]
            ),
            ToolMessage([ToolResult("toolu_a", "get_weather", error="service down")]),
            UserMessage("try again"),
        ],
        tools=[WEATHER],
        settings=ModelSettings(max_retries=0, temperature=0.1, max_tokens=321, tool_choice="required"),
    )
    await collect("anthropic:text", request)
    body = fake.last().body
    assert [m["role"] for m in body["messages"]] == ["user", "assistant", "user"]
    assistant = body["messages"][1]["content"]
    assert assistant[0] == {"type": "thinking", "thinking": "I should call tools.", "signature": "sig"}
    assert assistant[1] == {"type": "text", "text": "Checking."}
    assert assistant[2] == {
        "type": "tool_use",
        "id": "toolu_a",
        "name": "get_weather",
        "input": {"city": "Paris"},
    }
    assert len(assistant) == 3
    result, follow_up = body["messages"][2]["content"]
    assert result["type"] == "tool_result"
    assert result["tool_use_id"] == "toolu_a"
    assert result["is_error"] is True
    assert "service down" in str(result["content"])
    assert follow_up == {"type": "text", "text": "try again"}
    assert body["temperature"] == 0.1
    assert body["max_tokens"] == 321
    assert body["tool_choice"] == {"type": "any"}


async def test_http_4xx_raises_model_error(fake: FakeProvider) -> None:
    with pytest.raises(ModelError) as info:
        await collect("anthropic:http-400", simple())
    assert info.value.status_code == 400
    assert info.value.retryable is False
    assert "roles must alternate" in str(info.value)


async def test_rate_limit_is_retryable(fake: FakeProvider) -> None:
    with pytest.raises(ModelError) as info:
        await collect("anthropic:http-429", simple())
    assert info.value.status_code == 429
    assert info.value.retryable is True


async def test_error_event_mid_stream(fake: FakeProvider) -> None:
    seen: list[ModelEvent] = []
    with pytest.raises(ModelError) as info:
        async for event in resolve_model("anthropic:midstream-error").stream(simple()):
            seen.append(event)
    assert seen == [TextDelta("partial")]
    assert "Overloaded" in str(info.value)
    assert info.value.retryable is True


async def test_cancel_stops_the_provider_stream_promptly(fake: FakeProvider) -> None:
    model = resolve_model("anthropic:slow")
    first_event = asyncio.Event()

    async def consume() -> None:
        async for _ in model.stream(simple()):
            first_event.set()

    task = asyncio.create_task(consume())
    await asyncio.wait_for(first_event.wait(), 5)
    started = time.monotonic()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert await asyncio.to_thread(fake.disconnected.wait, 5)
    assert time.monotonic() - started < 2
    assert fake.slow_chunks_sent < 20


async def test_explicit_constructor(fake: FakeProvider, clean_env: pytest.MonkeyPatch) -> None:
    clean_env.delenv("ANTHROPIC_API_KEY")
    clean_env.delenv("ANTHROPIC_BASE_URL")
    model = AnthropicModel("text", api_key="explicit", base_url=fake.anthropic_base_url)
    assert model.name == "anthropic:text"
    events = [e async for e in model.stream(simple())]
    assert events[-1] == Finish("stop")
    assert sent_key(fake.last().headers) == "explicit"
