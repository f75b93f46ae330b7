"""A local fake model provider: OpenAI chat-completions and Anthropic messages, streamed as SSE.

The adapters are tested end to end against this real HTTP server on 127.0.0.1, so no test needs the network
or a key. The scenario is chosen by the request's ``model`` field; every request body is recorded so tests
can assert what the adapter sent. The wire formats follow the providers' documented streaming formats
(``chat.completion.chunk`` deltas with ``tool_calls[index]`` pieces; Anthropic ``message_start`` /
``content_block_*`` / ``message_delta`` / ``message_stop`` events).
"""

from __future__ import annotations

import asyncio
import json
import socket
import threading
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route


@dataclass
class Recorded:
    """One request the fake provider received."""

    path: str
    headers: dict[str, str]
    body: dict[str, Any]


@dataclass
class FakeProvider:
    """Handle on the running server: its base URLs and what it saw."""

    host: str
    port: int
    requests: list[Recorded] = field(default_factory=list)
    disconnected: threading.Event = field(default_factory=threading.Event)
    slow_chunks_sent: int = 0

    @property
    def openai_base_url(self) -> str:
        return f"http://{self.host}:{self.port}/openai/v1"

    @property
    def anthropic_base_url(self) -> str:
        return f"http://{self.host}:{self.port}/anthropic"

    @property
    def ollama_base_url(self) -> str:
        return f"http://{self.host}:{self.port}/openai/v1"

    def last(self) -> Recorded:
        return self.requests[-1]

    def reset(self) -> None:
        self.requests.clear()
        self.disconnected.clear()
        self.slow_chunks_sent = 0


def _sse(data: Any, event: str | None = None) -> bytes:
    text = data if isinstance(data, str) else json.dumps(data)
    prefix = f"event: {event}\n" if event else ""
    return f"{prefix}data: {text}\n\n".encode()


# --------------------------------------------------------------------------- OpenAI chat completions


def _oa_chunk(model: str, delta: dict[str, Any] | None, finish: str | None = None, **extra: Any) -> bytes:
    choices = (
        [] if delta is None else [{"index": 0, "delta": delta, "finish_reason": finish, "logprobs": None}]
    )
    body = {
        "id": "chatcmpl-fake",
        "object": "chat.completion.chunk",
        "created": 1_700_000_000,
        "model": model,
        "choices": choices,
        **extra,
    }
    return _sse(body)


def _oa_usage(model: str, prompt: int, completion: int) -> bytes:
    usage = {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}
    return _oa_chunk(model, None, usage=usage)


async def _openai_stream(model: str, provider: FakeProvider) -> AsyncIterator[bytes]:
    yield _oa_chunk(model, {"role": "assistant", "content": ""})
    if model == "text":
        for piece in ["Hello", ", wor", "ld!"]:
            yield _oa_chunk(model, {"content": piece})
        yield _oa_chunk(model, {}, "stop")
        yield _oa_usage(model, 11, 3)
    elif model == "length":
        yield _oa_chunk(model, {"content": "cut"})
        yield _oa_chunk(model, {}, "length")
        yield _oa_usage(model, 5, 1)
    elif model in ("tools", "bad-json"):
        yield _oa_chunk(model, {"content": "Let me check."})
        first_args = ['{"ci', 'ty": "Par', 'is"}'] if model == "tools" else ['{"city": ', "Par"]
        yield _oa_chunk(
            model,
            {
                "tool_calls": [
                    {
                        "index": 0,
                        "id": "call_a",
                        "type": "function",
                        "function": {"name": "get_weather", "arguments": ""},
                    }
                ]
            },
        )
        for piece in first_args:
            yield _oa_chunk(model, {"tool_calls": [{"index": 0, "function": {"arguments": piece}}]})
        if model == "tools":
            yield _oa_chunk(
                model,
                {
                    "tool_calls": [
                        {
                            "index": 1,
                            "id": "call_b",
                            "type": "function",
                            "function": {"name": "get_time", "arguments": '{"zone": '},
                        }
                    ]
                },
            )
            yield _oa_chunk(model, {"tool_calls": [{"index": 1, "function": {"arguments": '"CET"}'}}]})
        yield _oa_chunk(model, {}, "tool_calls")
        yield _oa_usage(model, 42, 17)
    elif model == "midstream-error":
        yield _oa_chunk(model, {"content": "partial"})
        yield _sse(
            {"error": {"message": "upstream exploded", "type": "server_error", "code": "server_error"}}
        )
    elif model == "hang":
        try:
            await asyncio.sleep(30)
        finally:
            provider.disconnected.set()
        return
    elif model == "slow":
        try:
            for i in range(600):
                yield _oa_chunk(model, {"content": f"tick{i} "})
                provider.slow_chunks_sent += 1
                await asyncio.sleep(0.05)
        finally:
            provider.disconnected.set()
        return
    else:
        yield _oa_chunk(model, {"content": f"unknown scenario {model}"})
        yield _oa_chunk(model, {}, "stop")
    yield _sse("[DONE]")


def _openai_error(status: int, message: str, kind: str) -> JSONResponse:
    return JSONResponse({"error": {"message": message, "type": kind, "param": None, "code": None}}, status)


# --------------------------------------------------------------------------- Anthropic messages


def _an(event: str, data: dict[str, Any]) -> bytes:
    return _sse({"type": event, **data}, event=event)


async def _anthropic_stream(model: str, provider: FakeProvider) -> AsyncIterator[bytes]:
    yield _an(
        "message_start",
        {
            "message": {
                "id": "msg_fake",
                "type": "message",
                "role": "assistant",
                "content": [],
                "model": model,
                "stop_reason": None,
                "stop_sequence": None,
                "usage": {"input_tokens": 25, "output_tokens": 1},
            }
        },
    )
    yield _sse({"type": "ping"}, event="ping")
    if model == "text":
        yield _an("content_block_start", {"index": 0, "content_block": {"type": "text", "text": ""}})
        for piece in ["Hello", ", wor", "ld!"]:
            yield _an("content_block_delta", {"index": 0, "delta": {"type": "text_delta", "text": piece}})
        yield _an("content_block_stop", {"index": 0})
        yield _an(
            "message_delta",
            {"delta": {"stop_reason": "end_turn", "stop_sequence": None}, "usage": {"output_tokens": 3}},
        )
    elif model == "tools":
        yield _an(
            "content_block_start",
            {"index": 0, "content_block": {"type": "thinking", "thinking": "", "signature": ""}},
        )
        for piece in ["I should ", "call tools."]:
            yield _an(
                "content_block_delta",
                {"index": 0, "delta": {"type": "thinking_delta", "thinking": piece}},
            )
        yield _an(
            "content_block_delta", {"index": 0, "delta": {"type": "signature_delta", "signature": "sig"}}
        )
        yield _an("content_block_stop", {"index": 0})
        yield _an("content_block_start", {"index": 1, "content_block": {"type": "text", "text": ""}})
        yield _an(
            "content_block_delta", {"index": 1, "delta": {"type": "text_delta", "text": "Let me check."}}
        )
        yield _an("content_block_stop", {"index": 1})
        for index, (call_id, name, pieces) in enumerate(
            [
                ("toolu_a", "get_weather", ['{"ci', 'ty": "Par', 'is"}']),
                ("toolu_b", "get_time", ['{"zone": ', '"CET"}']),
            ],
            start=2,
        ):
            yield _an(
                "content_block_start",
                {
                    "index": index,
                    "content_block": {"type": "tool_use", "id": call_id, "name": name, "input": {}},
                },
            )
            for piece in pieces:
                yield _an(
                    "content_block_delta",
                    {"index": index, "delta": {"type": "input_json_delta", "partial_json": piece}},
                )
            yield _an("content_block_stop", {"index": index})
        yield _an(
            "message_delta",
            {"delta": {"stop_reason": "tool_use", "stop_sequence": None}, "usage": {"output_tokens": 30}},
        )
    elif model == "midstream-error":
        yield _an("content_block_start", {"index": 0, "content_block": {"type": "text", "text": ""}})
        yield _an("content_block_delta", {"index": 0, "delta": {"type": "text_delta", "text": "partial"}})
        yield _sse({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}, "error")
        return
    elif model == "slow":
        yield _an("content_block_start", {"index": 0, "content_block": {"type": "text", "text": ""}})
        try:
            for i in range(600):
                yield _an(
                    "content_block_delta", {"index": 0, "delta": {"type": "text_delta", "text": f"tick{i} "}}
                )
                provider.slow_chunks_sent += 1
                await asyncio.sleep(0.05)
        finally:
            provider.disconnected.set()
        return
    else:
        yield _an("content_block_start", {"index": 0, "content_block": {"type": "text", "text": ""}})
        yield _an("content_block_delta", {"index": 0, "delta": {"type": "text_delta", "text": model}})
        yield _an("content_block_stop", {"index": 0})
        yield _an("message_delta", {"delta": {"stop_reason": "end_turn"}, "usage": {"output_tokens": 1}})
    yield _an("message_stop", {})


def _anthropic_error(status: int, message: str, kind: str) -> JSONResponse:
    return JSONResponse({"type": "error", "error": {"type": kind, "message": message}}, status)


# --------------------------------------------------------------------------- app + server


def build_app(provider: FakeProvider) -> Starlette:
    async def openai_chat(request: Request) -> Response:
        body = await request.json()
        provider.requests.append(Recorded(request.url.path, dict(request.headers), body))
        model = body.get("model", "")
        if model == "http-400":
            return _openai_error(400, "bad request: messages is malformed", "invalid_request_error")
        if model == "http-429":
            return _openai_error(429, "slow down", "rate_limit_exceeded")
        if model == "http-401":
            return _openai_error(401, "invalid api key", "invalid_request_error")
        return StreamingResponse(_openai_stream(model, provider), media_type="text/event-stream")

    async def anthropic_messages(request: Request) -> Response:
        body = await request.json()
        provider.requests.append(Recorded(request.url.path, dict(request.headers), body))
        model = body.get("model", "")
        if model == "http-400":
            return _anthropic_error(400, "messages: roles must alternate", "invalid_request_error")
        if model == "http-429":
            return _anthropic_error(429, "rate limited", "rate_limit_error")
        return StreamingResponse(_anthropic_stream(model, provider), media_type="text/event-stream")

    return Starlette(
        routes=[
            Route("/openai/v1/chat/completions", openai_chat, methods=["POST"]),
            Route("/anthropic/v1/messages", anthropic_messages, methods=["POST"]),
        ]
    )


class FakeProviderServer:
    """Runs the fake provider with uvicorn in a background thread on a free loopback port."""

    def __init__(self) -> None:
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            port = sock.getsockname()[1]
        self.provider = FakeProvider("127.0.0.1", port)
        config = uvicorn.Config(
            build_app(self.provider), host="127.0.0.1", port=port, log_level="warning", lifespan="off"
        )
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(target=self._server.run, name="fake-provider", daemon=True)

    def start(self) -> FakeProvider:
        self._thread.start()
        deadline = time.monotonic() + 10
        while not self._server.started:
            if time.monotonic() > deadline or not self._thread.is_alive():
                raise RuntimeError("fake provider server did not start")
            time.sleep(0.01)
        return self.provider

    def stop(self) -> None:
        self._server.should_exit = True
        self._thread.join(timeout=10)
