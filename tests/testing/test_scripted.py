"""ScriptedModel: every reply kind, exhaustion, echo, request recording, chunk_delay, stalls."""

from __future__ import annotations

import asyncio
import itertools
import time

import pytest

from ponder.models import (
    AssistantMessage,
    Finish,
    ModelClient,
    ModelError,
    ModelEvent,
    ModelRequest,
    ReasoningDelta,
    ReasoningEnd,
    TextDelta,
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
from ponder.testing import (
    ScriptedModel,
    ScriptedModelExhausted,
    error,
    reasoning,
    reply,
    stall,
    tool_call,
)


def ask(text: str = "hi", **kwargs: object) -> ModelRequest:
    return ModelRequest(messages=[UserMessage(text)], **kwargs)  # type: ignore[arg-type]


async def run(model: ModelClient, request: ModelRequest | None = None) -> list[ModelEvent]:
    return [event async for event in model.stream(request or ask())]


def texts(events: list[ModelEvent]) -> list[str]:
    return [e.text for e in events if isinstance(e, TextDelta)]


async def test_is_a_model_client() -> None:
    model = ScriptedModel(["x"])
    assert isinstance(model, ModelClient)
    assert resolve_model(model) is model
    assert model.name == "scripted"


async def test_text_streams_one_delta_per_word_keeping_spacing() -> None:
    message = "Hello,  world!\nHow are you? "
    events = await run(ScriptedModel([message]))
    assert texts(events) == ["Hello,  ", "world!\n", "How ", "are ", "you? "]
    assert "".join(texts(events)) == message
    assert events[-2:] == [Usage(input_tokens=1, output_tokens=5), Finish("stop")]


async def test_leading_whitespace_and_empty_text() -> None:
    assert "".join(texts(await run(ScriptedModel(["  indented text"])))) == "  indented text"
    assert await run(ScriptedModel([""])) == [Usage(input_tokens=1, output_tokens=0), Finish("stop")]


async def test_reasoning_reply() -> None:
    events = await run(ScriptedModel([reasoning("let me think")]))
    assert events[:4] == [
        ReasoningDelta("let "),
        ReasoningDelta("me "),
        ReasoningDelta("think"),
        ReasoningEnd(),
    ]
    assert events[-1] == Finish("stop")


async def test_single_tool_call() -> None:
    events = await run(ScriptedModel([tool_call("get_weather", {"city": "Paris"})]))
    assert events[:3] == [
        ToolCallStart("call_1", "get_weather"),
        ToolCallDelta("call_1", '{"city": "Paris"}'),
        ToolCallEnd("call_1", "get_weather", {"city": "Paris"}),
    ]
    assert events[-1] == Finish("tool-calls")


async def test_parallel_tool_calls_and_ids() -> None:
    model = ScriptedModel(
        [
            [tool_call("a", {"x": 1}), tool_call("b", id="mine")],
            tool_call("c"),
        ]
    )
    ends = [e for e in await run(model) if isinstance(e, ToolCallEnd)]
    assert ends == [ToolCallEnd("call_1", "a", {"x": 1}), ToolCallEnd("mine", "b", {})]
    ends = [e for e in await run(model) if isinstance(e, ToolCallEnd)]
    assert ends == [ToolCallEnd("call_3", "c", {})]


async def test_invalid_tool_args_are_carried_raw() -> None:
    events = await run(ScriptedModel([tool_call("a", '{"x": oops')]))
    end = next(e for e in events if isinstance(e, ToolCallEnd))
    assert end.args == {} and end.invalid_args == '{"x": oops'


async def test_reply_combines_items_in_order() -> None:
    model = ScriptedModel([reply(reasoning("hmm"), "Sure, checking.", tool_call("lookup", {"q": "x"}))])
    kinds = [type(e).__name__ for e in await run(model)]
    assert kinds == [
        "ReasoningDelta",
        "ReasoningEnd",
        "TextDelta",
        "TextDelta",
        "ToolCallStart",
        "ToolCallDelta",
        "ToolCallEnd",
        "Usage",
        "Finish",
    ]


async def test_reply_finish_override() -> None:
    events = await run(ScriptedModel([reply("cut", finish="length")]))
    assert events[-1] == Finish("length")


async def test_error_reply_raises_model_error() -> None:
    model = ScriptedModel([error("provider down", retryable=True, status_code=503)])
    with pytest.raises(ModelError) as info:
        await run(model)
    assert info.value.message == "provider down"
    assert info.value.retryable is True
    assert info.value.status_code == 503


async def test_error_after_partial_text() -> None:
    seen: list[ModelEvent] = []
    with pytest.raises(ModelError, match="boom"):
        async for event in ScriptedModel([reply("partial answer", error("boom"))]).stream(ask()):
            seen.append(event)
    assert texts(seen) == ["partial ", "answer"]


async def test_stall_emits_nothing_until_cancelled() -> None:
    model = ScriptedModel([reply("before", stall(30), "after")])
    seen: list[ModelEvent] = []

    async def consume() -> None:
        async for event in model.stream(ask()):
            seen.append(event)

    task = asyncio.create_task(consume())
    await asyncio.sleep(0.05)
    assert texts(seen) == ["before"]
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert texts(seen) == ["before"]


async def test_short_stall_then_finish() -> None:
    started = time.monotonic()
    events = await run(ScriptedModel([stall(0.05)]))
    assert time.monotonic() - started >= 0.05
    assert events == [Usage(input_tokens=1, output_tokens=0), Finish("stop")]


async def test_stall_with_wait_for_times_out() -> None:
    with pytest.raises(TimeoutError):
        await asyncio.wait_for(run(ScriptedModel([stall(10)])), 0.05)


async def test_chunk_delay_between_chunks() -> None:
    model = ScriptedModel(["one two three four"], chunk_delay=0.02)
    stamps: list[float] = []
    async for event in model.stream(ask()):
        if isinstance(event, TextDelta):
            stamps.append(time.monotonic())
    gaps = [b - a for a, b in itertools.pairwise(stamps)]
    assert len(gaps) == 3
    assert all(gap >= 0.015 for gap in gaps)


async def test_function_reply_sees_the_request() -> None:
    def answer(request: ModelRequest) -> str:
        return f"you said {request.last_user_text()} with {len(request.tools)} tools"

    model = ScriptedModel([answer])
    request = ask("ping", tools=[ToolDefinition("t")], system="sys")
    assert "".join(texts(await run(model, request))) == "you said ping with 1 tools"


async def test_async_function_reply_and_recording() -> None:
    seen: list[ModelRequest] = []

    async def answer(request: ModelRequest) -> list[object]:
        seen.append(request)
        return [tool_call("x")]

    model = ScriptedModel([answer, "done"])
    first, second = ask("a"), ask("b")
    await run(model, first)
    await run(model, second)
    assert seen == [first]
    assert model.requests == [first, second]
    assert model.calls == 2
    assert model.remaining == 0


async def test_function_returning_garbage_is_a_clear_error() -> None:
    with pytest.raises(TypeError, match="not a scripted reply item"):
        await run(ScriptedModel([lambda request: 42]))


def test_bad_replies_are_rejected_up_front() -> None:
    with pytest.raises(TypeError, match="not a scripted reply item"):
        ScriptedModel([object()])  # type: ignore[list-item]
    with pytest.raises(TypeError):
        reply("ok", 3)  # type: ignore[arg-type]


async def test_exhaustion_raises_a_clear_error() -> None:
    model = ScriptedModel(["one", "two"])
    await run(model)
    await run(model)
    with pytest.raises(ScriptedModelExhausted) as info:
        await run(model, ask("third question"))
    message = str(info.value)
    assert "scripted with 2 replies" in message
    assert "call 3" in message
    assert "third question" in message
    assert model.calls == 3


async def test_add_and_default() -> None:
    model = ScriptedModel(["first"], default="again")
    model.add("second")
    outputs = ["".join(texts(await run(model))) for _ in range(4)]
    assert outputs == ["first", "second", "again", "again"]


async def test_echo() -> None:
    model = ScriptedModel.echo()
    request = ModelRequest(
        messages=[
            UserMessage("first"),
            AssistantMessage("ok"),
            ToolMessage([ToolResult("c", "t", output=1)]),
            UserMessage("second message"),
        ]
    )
    events = await run(model, request)
    assert "".join(texts(events)) == "echo: second message"
    assert "".join(texts(await run(model, ask("again")))) == "echo: again"
    assert model.calls == 2


async def test_usage_counts_words() -> None:
    request = ModelRequest(
        system="be nice",
        messages=[
            UserMessage("one two three"),
            AssistantMessage("four"),
            ToolMessage([ToolResult("c", "t", "x y")]),
        ],
    )
    events = await run(ScriptedModel(["a b"]), request)
    assert events[-2] == Usage(input_tokens=2 + 3 + 1 + 2, output_tokens=2)


async def test_usage_counts_words_of_requests_that_share_most_messages() -> None:
    """Turns resend the same message objects; a message replaced anywhere (a truncated older message, a
    rewritten tool result) must still be counted afresh."""
    history = [UserMessage(f"word{i} extra") if i % 2 == 0 else AssistantMessage("one") for i in range(1_000)]
    first = await run(ScriptedModel(["a"]), ModelRequest(messages=history))
    assert first[-2] == Usage(input_tokens=500 * 2 + 500 * 1, output_tokens=1)
    grown = [*history, UserMessage("three more words")]
    assert (await run(ScriptedModel(["a"]), ModelRequest(messages=grown)))[-2].input_tokens == 1_503
    changed = list(grown)
    changed[700] = UserMessage("now four words here")  # was two words, at an index past the first blocks
    assert (await run(ScriptedModel(["a"]), ModelRequest(messages=changed)))[-2].input_tokens == 1_505
    shorter = changed[:10]
    assert (await run(ScriptedModel(["a"]), ModelRequest(messages=shorter)))[-2].input_tokens == 15


async def test_aclose_midway() -> None:
    stream = ScriptedModel(["a b c d"]).stream(ask())
    assert await anext(stream) == TextDelta("a ")
    await stream.aclose()  # type: ignore[attr-defined]
