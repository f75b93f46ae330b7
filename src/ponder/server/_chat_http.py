"""``POST /agents/<class>/<name>/chat``: the AI SDK's HTTP chat transport, served by any ``Think`` agent.

Why this module exists: a frontend that uses the plain AI SDK ``useChat`` (``DefaultChatTransport``) instead of
Cloudflare's WebSocket hooks posts ``{id, messages, trigger, messageId?, ...body}`` and reads the reply as the
UI message stream over server-sent events. Think admits the request exactly as it admits a WebSocket one
(:meth:`~ponder.think.Think.handle_chat_request`: validation, reconciliation, persistence, the turn queue);
this module only speaks HTTP — status codes for refused requests, and the SSE framing:

- headers ``content-type: text/event-stream`` and ``x-vercel-ai-ui-message-stream: v1``;
- one ``data: <chunk JSON>\\n\\n`` event per ``UIMessageChunk``, ending with ``data: [DONE]\\n\\n``;
- a failed turn adds ``{"type":"error","errorText":...}``, an aborted one ``{"type":"abort"}``.

The turn belongs to the agent, not to the HTTP request: if the client goes away mid-stream, the turn still
completes and is persisted, and WebSocket clients of the same agent watch it as usual.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncIterator
from typing import Any

from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse, Response, StreamingResponse

from ..think import ChatRequestError, ChatResult, Think

__all__ = ["UI_MESSAGE_STREAM_HEADERS", "handle_chat_http"]

logger = logging.getLogger("ponder.server")

#: The headers the AI SDK's ``createUIMessageStreamResponse`` sends.
UI_MESSAGE_STREAM_HEADERS = {
    "content-type": "text/event-stream",
    "cache-control": "no-cache",
    "connection": "keep-alive",
    "x-vercel-ai-ui-message-stream": "v1",
    "x-accel-buffering": "no",
}
#: Body keys that belong to the AI SDK transport, not to the custom body hooks see.
_TRANSPORT_KEYS = ("id", "messageId")
_END = object()


def _event(value: Any) -> bytes:
    return b"data: " + json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode("utf-8") + b"\n\n"


async def _read_body(request: Request, limit: int) -> bytes | None:
    """The request body, or ``None`` when it is larger than ``limit`` bytes."""
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        return None
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            return None
        chunks.append(chunk)
    return b"".join(chunks)


async def handle_chat_http(
    agent: Any, request: Request, rest: tuple[str, ...], max_body_bytes: int
) -> Response | None:
    """Answer the chat routes of a ``Think`` agent; ``None`` when the request is not one of them.

    ``POST …/chat`` runs a turn and streams it; ``GET …/chat/<chatId>/stream`` (the AI SDK's resume probe)
    streams the turn in progress from its first chunk, or answers 204 when none is.
    """
    if not isinstance(agent, Think) or not rest or rest[0] != "chat":
        return None
    if len(rest) == 1:
        if request.method != "POST":
            return JSONResponse(
                {"error": "use POST to send a chat request"}, status_code=405, headers={"allow": "POST"}
            )
        return await _post_chat(agent, request, max_body_bytes)
    if len(rest) == 3 and rest[2] == "stream" and request.method == "GET":
        return _resume_stream(agent)
    return None


def _resume_stream(agent: Think) -> Response:
    """The AI SDK's resume probe: the running turn's chunks so far, then live, as the UI message stream.

    204 (nothing to resume) when no turn is streaming. The agent has one conversation, so the chat id in
    the path is not consulted.
    """
    tapped = agent._tap_active_stream()
    if tapped is None:
        return Response(status_code=204)
    turn, queue = tapped

    async def events() -> AsyncIterator[bytes]:
        try:
            while True:
                item = await queue.get()
                if isinstance(item, tuple):
                    status, error = item
                    if status == "error":
                        yield _event({"type": "error", "errorText": error or "The chat turn failed."})
                    elif status == "aborted":
                        yield _event({"type": "abort"})
                    break
                yield b"data: " + item.encode("utf-8") + b"\n\n"
            yield b"data: [DONE]\n\n"
        finally:
            turn.untap(queue)

    return StreamingResponse(events(), headers=UI_MESSAGE_STREAM_HEADERS)


async def _post_chat(agent: Think, request: Request, max_body_bytes: int) -> Response:
    try:
        raw = await _read_body(request, max_body_bytes)
    except ClientDisconnect:
        return Response(status_code=400)
    if raw is None:
        return JSONResponse(
            {"error": f"Invalid chat request: the body exceeds the {max_body_bytes}-byte limit"},
            status_code=413,
        )
    queue: asyncio.Queue[Any] = asyncio.Queue()
    listening = True

    def on_chunk(chunk: dict[str, Any]) -> None:
        if listening:
            queue.put_nowait(chunk)

    try:
        admission = await agent.handle_chat_request(raw, on_chunk=on_chunk, reserved=_TRANSPORT_KEYS)
    except ChatRequestError as exc:
        return JSONResponse({"error": exc.message}, status_code=exc.status)
    if admission.status == "dropped" or admission.result is None:
        return JSONResponse(
            {"error": "another turn is in progress and this agent drops overlapping messages"},
            status_code=409,
        )
    result_future = admission.result
    result_future.add_done_callback(lambda _: queue.put_nowait(_END))

    async def events() -> AsyncIterator[bytes]:
        nonlocal listening
        try:
            while True:
                item = await queue.get()
                if item is _END:
                    break
                yield _event(item)
            result = _result_of(result_future)
            if result is None or result.status == "error":
                text = result.error if result is not None and result.error else "The chat turn failed."
                yield _event({"type": "error", "errorText": text})
            elif result.status == "aborted":
                yield _event({"type": "abort"})
            yield b"data: [DONE]\n\n"
        finally:
            listening = False  # the client is gone or done: stop buffering; the turn itself carries on

    return StreamingResponse(events(), headers=UI_MESSAGE_STREAM_HEADERS)


def _result_of(future: asyncio.Future[ChatResult]) -> ChatResult | None:
    if future.cancelled():
        return None
    error = future.exception()
    if error is not None:
        logger.error("a chat turn failed outside the turn loop", exc_info=error)
        return None
    return future.result()
