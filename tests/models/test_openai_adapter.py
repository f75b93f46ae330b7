"""The OpenAI-family adapters (openai, ollama, openai-compatible) end to end against the fake provider."""

from __future__ import annotations

import asyncio
import base64
import json
import time

import pytest

from ponder.models import (
    AssistantMessage,
    FileContent,
    Finish,
    ModelError,
    ModelEvent,
    ModelRequest,
    ModelSettings,
    OpenAICompatibleModel,
    OpenAIModel,
    ReasoningContent,
    SystemMessage,
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
TIME = ToolDefinition(
    "get_time", "Current time.", {"type": "object", "properties": {"zone": {"type": "string"}}}
)
NO_RETRY = ModelSettings(max_retries=0)


def simple(system: str | None = "Be brief.", **settings: object) -> ModelRequest:
    return ModelRequest(
        system=system,
        messages=[UserMessage("hi")],
        tools=[WEATHER, TIME],
        settings=ModelSettings(max_retries=0, **settings),  # type: ignore[arg-type]
    )


async def collect(spec: str | object, request: ModelRequest) -> list[ModelEvent]:
    model = resolve_model(spec)  # type: ignore[arg-type]
    return [event async for event in model.stream(request)]


async def test_text_is_streamed_with_usage_and_finish(fake: FakeProvider) -> None:
    events = await collect("openai:text", simple())
    assert events == [
        TextDelta("Hello"),
        TextDelta(", wor"),
        TextDelta("ld!"),
        Usage(input_tokens=11, output_tokens=3),
        Finish("stop"),
    ]
    sent = fake.last()
    assert sent.path == "/openai/v1/chat/completions"
    assert sent.headers["authorization"] == "Bearer sk-test-openai"
    assert sent.body["model"] == "text"
    assert sent.body["stream"] is True
    assert sent.body["stream_options"] == {"include_usage": True}
    assert sent.body["messages"] == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "hi"},
    ]


async def test_tool_definitions_are_sent_as_json_schema(fake: FakeProvider) -> None:
    await collect("openai:text", simple())
    tools = {t["function"]["name"]: t["function"] for t in fake.last().body["tools"]}
    assert set(tools) == {"get_weather", "get_time"}
    assert tools["get_weather"]["description"] == "Current weather in a city."
    assert tools["get_weather"]["parameters"]["properties"] == {"city": {"type": "string"}}
    assert tools["get_weather"]["parameters"]["required"] == ["city"]
    assert tools["get_time"]["parameters"]["properties"] == {"zone": {"type": "string"}}
    assert all(t["type"] == "function" for t in fake.last().body["tools"])


async def test_no_tools_and_no_system(fake: FakeProvider) -> None:
    request = ModelRequest(messages=[UserMessage("hi")], settings=NO_RETRY)
    events = await collect("openai:text", request)
    assert "".join(e.text for e in events if isinstance(e, TextDelta)) == "Hello, world!"
    body = fake.last().body
    assert "tools" not in body
    assert body["messages"] == [{"role": "user", "content": "hi"}]


async def test_parallel_tool_calls_streamed_in_pieces(fake: FakeProvider) -> None:
    events = await collect("openai:tools", simple())
    assert events[0] == TextDelta("Let me check.")
    assert events[1] == ToolCallStart("call_a", "get_weather")
    pieces = [e.args_delta for e in events if isinstance(e, ToolCallDelta) and e.tool_call_id == "call_a"]
    assert len(pieces) == 3
    assert "".join(pieces) == '{"city": "Paris"}'
    ends = [e for e in events if isinstance(e, ToolCallEnd)]
    assert ends == [
        ToolCallEnd("call_a", "get_weather", {"city": "Paris"}),
        ToolCallEnd("call_b", "get_time", {"zone": "CET"}),
    ]
    assert all(end.args_valid for end in ends)
    # each call starts before its deltas and ends after them
    kinds = [(type(e).__name__, getattr(e, "tool_call_id", None)) for e in events]
    assert kinds.index(("ToolCallStart", "call_b")) > kinds.index(("ToolCallEnd", "call_a"))
    assert events[-2:] == [Usage(input_tokens=42, output_tokens=17), Finish("tool-calls")]


async def test_invalid_tool_arguments_are_carried_raw(fake: FakeProvider) -> None:
    events = await collect("openai:bad-json", simple())
    end = next(e for e in events if isinstance(e, ToolCallEnd))
    assert end.args == {}
    assert end.invalid_args == '{"city": Par'
    assert not end.args_valid
    assert events[-1] == Finish("tool-calls")


async def test_length_finish_reason(fake: FakeProvider) -> None:
    events = await collect("openai:length", simple())
    assert events[-1] == Finish("length")


async def test_full_conversation_and_settings_are_mapped(fake: FakeProvider) -> None:
    png = "data:image/png;base64," + base64.b64encode(b"\x89PNG fake").decode()
    request = ModelRequest(
        system="Be brief.",
        messages=[
            UserMessage([TextContent("What is this?"), FileContent(png, "image/png", "a.png")]),
            AssistantMessage(
                [
                    ReasoningContent("signed elsewhere", signature="sig", provider="anthropic"),
                    TextContent("Checking."),
                    ToolCall("c1", "get_weather", {"city": "Paris"}),
                    ToolCall("c2", "get_time", {"zone": "CET"}),
                ]
            ),
            ToolMessage(
                [
                    ToolResult("c1", "get_weather", output={"temp": 21}),
                    ToolResult("c2", "get_time", error="no clock"),
                ]
            ),
            AssistantMessage("It is 21."),
            SystemMessage("Now be verbose."),
            UserMessage("thanks"),
        ],
        tools=[WEATHER, TIME],
        settings=ModelSettings(
            max_retries=0,
            temperature=0.2,
            max_tokens=100,
            top_p=0.9,
            stop_sequences=["END"],
            seed=7,
            tool_choice={"tool": "get_weather"},
        ),
    )
    await collect("openai:text", request)
    body = fake.last().body
    messages = body["messages"]
    assert [m["role"] for m in messages] == [
        "system",
        "user",
        "assistant",
        "tool",
        "tool",
        "assistant",
        "system",
        "user",
    ]
    assert messages[0]["content"] == "Be brief."
    assert messages[1]["content"][0] == {"type": "text", "text": "What is this?"}
    assert messages[1]["content"][1]["type"] == "image_url"
    assert messages[1]["content"][1]["image_url"]["url"] == png
    assistant = messages[2]
    assert assistant["content"] == "Checking."  # reasoning signed by another provider is not replayed
    assert [
        (c["id"], c["function"]["name"], json.loads(c["function"]["arguments"]))
        for c in assistant["tool_calls"]
    ] == [
        ("c1", "get_weather", {"city": "Paris"}),
        ("c2", "get_time", {"zone": "CET"}),
    ]
    assert messages[3] == {"role": "tool", "tool_call_id": "c1", "content": '{"temp":21}'}
    assert messages[4]["tool_call_id"] == "c2"
    assert "no clock" in messages[4]["content"]
    assert messages[5] == {"role": "assistant", "content": "It is 21."}
    assert messages[6] == {"role": "system", "content": "Now be verbose."}
    assert messages[7] == {"role": "user", "content": "thanks"}
    assert body["temperature"] == 0.2
    assert body["top_p"] == 0.9
    assert body["seed"] == 7
    assert body["stop"] == ["END"]
    assert body.get("max_completion_tokens", body.get("max_tokens")) == 100
    assert body["tool_choice"] == {"type": "function", "function": {"name": "get_weather"}}


@pytest.mark.parametrize("choice", ["none", "required", "auto"])
async def test_tool_choice_strings(fake: FakeProvider, choice: str) -> None:
    await collect("openai:text", simple(tool_choice=choice))
    assert fake.last().body["tool_choice"] == choice


async def test_http_4xx_raises_model_error(fake: FakeProvider) -> None:
    with pytest.raises(ModelError) as info:
        await collect("openai:http-400", simple())
    assert info.value.status_code == 400
    assert info.value.retryable is False
    assert "bad request: messages is malformed" in str(info.value)
    assert "openai:http-400" in str(info.value)


async def test_rate_limit_is_retryable(fake: FakeProvider) -> None:
    with pytest.raises(ModelError) as info:
        await collect("openai:http-429", simple())
    assert info.value.status_code == 429
    assert info.value.retryable is True
    assert len(fake.requests) == 1  # max_retries=0 reached the SDK


async def test_error_mid_stream_after_some_text(fake: FakeProvider) -> None:
    model = resolve_model("openai:midstream-error")
    seen: list[ModelEvent] = []
    with pytest.raises(ModelError) as info:
        async for event in model.stream(simple()):
            seen.append(event)
    assert seen == [TextDelta("partial")]
    assert "upstream exploded" in str(info.value)
    assert info.value.retryable is True


async def test_aclose_stops_the_provider_stream_promptly(fake: FakeProvider) -> None:
    stream = resolve_model("openai:slow").stream(simple())
    first = [await anext(stream) for _ in range(3)]
    assert all(isinstance(e, TextDelta) for e in first)
    started = time.monotonic()
    await stream.aclose()  # type: ignore[attr-defined]
    assert await asyncio.to_thread(fake.disconnected.wait, 5)
    assert time.monotonic() - started < 2
    assert fake.slow_chunks_sent < 20


async def test_task_cancel_stops_the_provider_stream_promptly(fake: FakeProvider) -> None:
    model = resolve_model("openai:slow")
    first_event = asyncio.Event()

    async def consume() -> None:
        async for _ in model.stream(simple()):
            first_event.set()

    task = asyncio.create_task(consume())
    await asyncio.wait_for(first_event.wait(), 5)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert await asyncio.to_thread(fake.disconnected.wait, 5)
    assert fake.slow_chunks_sent < 20


async def test_slash_alias_resolves_the_same_provider(fake: FakeProvider) -> None:
    model = resolve_model("openai/text")
    assert isinstance(model, OpenAIModel)
    assert model.name == "openai:text"
    events = [e async for e in model.stream(simple())]
    assert events[-1] == Finish("stop")


async def test_ollama_uses_its_base_url_and_not_the_openai_key(fake: FakeProvider) -> None:
    fake.requests.clear()
    events = await collect("ollama:text", simple())
    assert events[-1] == Finish("stop")
    sent = fake.last()
    assert sent.body["model"] == "text"
    assert "sk-test-openai" not in sent.headers.get("authorization", "")


async def test_openai_compatible_model_string(fake: FakeProvider) -> None:
    model = resolve_model(f"openai-compatible:text@{fake.openai_base_url}")
    assert isinstance(model, OpenAICompatibleModel)
    events = [e async for e in model.stream(simple())]
    assert "".join(e.text for e in events if isinstance(e, TextDelta)) == "Hello, world!"
    assert "sk-test-openai" not in fake.last().headers.get("authorization", "")


async def test_openai_compatible_constructor_with_key(fake: FakeProvider) -> None:
    model = OpenAICompatibleModel("tools", base_url=fake.openai_base_url, api_key="gateway-key")
    assert resolve_model(model) is model
    events = [e async for e in model.stream(simple())]
    assert [e.tool_name for e in events if isinstance(e, ToolCallEnd)] == ["get_weather", "get_time"]
    assert fake.last().headers["authorization"] == "Bearer gateway-key"


async def test_explicit_openai_model_arguments(fake: FakeProvider, clean_env: pytest.MonkeyPatch) -> None:
    clean_env.delenv("OPENAI_API_KEY")
    clean_env.delenv("OPENAI_BASE_URL")
    model = OpenAIModel("text", api_key="explicit", base_url=fake.openai_base_url)
    events = [e async for e in model.stream(simple())]
    assert events[-1] == Finish("stop")
    assert fake.last().headers["authorization"] == "Bearer explicit"


def test_one_model_object_works_across_event_loops(fake: FakeProvider) -> None:
    model = OpenAIModel("text")

    async def once(close: bool) -> ModelEvent:
        last = [e async for e in model.stream(simple())][-1]
        if close:
            await model.aclose()
        return last

    assert asyncio.run(once(close=False)) == Finish("stop")  # leaves a pooled connection on a dead loop
    assert asyncio.run(once(close=True)) == Finish("stop")


async def test_aclose_then_reuse(fake: FakeProvider) -> None:
    model = OpenAIModel("text")
    assert [e async for e in model.stream(simple())][-1] == Finish("stop")
    await model.aclose()
    assert [e async for e in model.stream(simple())][-1] == Finish("stop")


async def test_timeout_setting_bounds_the_wait_for_a_chunk(fake: FakeProvider) -> None:
    started = time.monotonic()
    with pytest.raises(ModelError) as info:
        await collect("openai:hang", simple(timeout=0.3))
    assert time.monotonic() - started < 5
    assert info.value.retryable is True
