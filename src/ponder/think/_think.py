"""``Think``: an agent that owns the whole chat lifecycle.

Why this module exists: a subclass that only says which model to use must already be a working chat agent —
messages stored as a tree, one turn at a time, streamed to every client in the AI SDK's wire format, tools
executed, approvals and client tool results applied, programmatic turns available. This module holds the
admission queue, the WebSocket chat protocol (``cf_agent_*`` frames), the HTTP ``get-messages`` route and the
programmatic API; the step loop itself lives in ``_turn.py``.
"""

from __future__ import annotations

import asyncio
import copy
import inspect
import json
import logging
from collections.abc import Callable, Iterable
from contextvars import ContextVar
from typing import Any, ClassVar, Literal

from ..chat import (
    apply_tool_approval,
    apply_tool_chunk_to_message,
    apply_tool_result,
    find_tool_part,
    is_tool_part,
    new_message_id,
    reconcile_messages,
    sanitize_message,
    user_message,
)
from ..models import ModelClient, resolve_model
from ..runtime import Agent, Connection, FiberRecoveryContext
from ._messages import MessageTree
from ._turn import Turn, TurnSpec, error_text, maybe_await
from ._types import (
    ChatErrorContext,
    ChatResult,
    StepConfig,
    StepContext,
    StepResult,
    ToolCallContext,
    ToolCallDecision,
    ToolCallResult,
    TurnConfig,
    TurnContext,
)

__all__ = ["CHAT_TURN_FIBER_PREFIX", "Think"]

logger = logging.getLogger("ponder.think")

CHAT_TURN_FIBER_PREFIX = "ponder:chat-turn:"
_RESPONSE = "cf_agent_use_chat_response"
_WAITING_STATES = frozenset({"input-streaming", "input-available", "approval-requested"})

#: The Think agent whose turn is running in the current task (the nesting guard).
_current_turn: ContextVar[Any] = ContextVar("ponder_think_current_turn", default=None)


class _Skipped(Exception):
    pass


class Think(Agent):
    """A chat agent: override ``get_model()`` and it speaks the Cloudflare chat protocol.

    Override ``get_system_prompt()``, ``get_tools()`` and the hooks (``before_turn``, ``before_step``,
    ``before_tool_call``, ``after_tool_call``, ``on_step_finish``, ``on_chunk``, ``on_chat_response``,
    ``on_chat_error``) to shape turns. See ``docs/think.md``.
    """

    #: Most model calls one turn may make (each tool round-trip is one more step).
    max_steps: ClassVar[int] = 10
    #: Stream (and store) the model's reasoning.
    send_reasoning: ClassVar[bool] = True
    #: What an overlapping chat request does; only ``"queue"`` (FIFO) is implemented.
    message_concurrency: ClassVar[str] = "queue"

    frame_handlers: ClassVar[dict[str, str]] = {
        **Agent.frame_handlers,
        "cf_agent_use_chat_request": "_on_chat_request_frame",
        "cf_agent_chat_request_cancel": "_on_cancel_frame",
        "cf_agent_chat_clear": "_on_clear_frame",
        "cf_agent_stream_resume_request": "_on_resume_request_frame",
        "cf_agent_stream_resume_ack": "_on_resume_ack_frame",
        "cf_agent_tool_result": "_on_tool_result_frame",
        "cf_agent_tool_approval": "_on_tool_approval_frame",
        "cf_agent_chat_messages": "_on_client_messages_frame",
    }

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._tree = MessageTree(self.host.store, self.id)
        self._load_lock = asyncio.Lock()
        self._models: dict[Any, ModelClient] = {}
        self._queue_tail: asyncio.Future[None] | None = None
        self._generation = 0
        self._turns: dict[str, Turn] = {}
        self._turn_tasks: dict[str, asyncio.Task[None]] = {}
        self._cancelled: set[str] = set()
        self._interaction_lock = asyncio.Lock()
        self._continuation_queued = False
        self._warned_client_messages = False

    # -- configuration (override these) -------------------------------------------------------------

    def get_model(self) -> str | ModelClient:
        """The model: a string such as ``"openai:gpt-4.1-mini"`` or ``"test"``, or a ``ModelClient``."""
        raise NotImplementedError(f"{type(self).__name__} must override get_model()")

    def get_system_prompt(self) -> str:
        return "You are a helpful assistant."

    def get_tools(self) -> Any:
        """Tools for every turn: a list of ``@tool`` functions (or plain functions), or a name→tool dict."""
        return {}

    # -- hooks (override these) ---------------------------------------------------------------------

    async def before_turn(self, ctx: TurnContext) -> TurnConfig | None:
        """Called before the first model call of a turn; return a ``TurnConfig`` to change it."""
        return None

    async def before_step(self, ctx: StepContext) -> StepConfig | None:
        """Called before every model call; return a ``StepConfig`` to change this step."""
        return None

    async def before_tool_call(self, ctx: ToolCallContext) -> ToolCallDecision | None:
        """Called before a server tool runs: allow (maybe with another input), block, or substitute."""
        return None

    async def after_tool_call(self, result: ToolCallResult) -> None:
        """Called after every server tool call (also blocked and substituted ones)."""

    async def on_step_finish(self, step: StepResult) -> None:
        """Called after each step (model call plus the tools it called)."""

    async def on_chunk(self, chunk: dict[str, Any]) -> None:
        """Called for every streamed chunk (only when overridden: it costs a call per chunk)."""

    async def on_chat_response(self, result: ChatResult) -> None:
        """Called after a turn's message was persisted and the turn queue moved on."""

    async def on_chat_error(self, error: BaseException, ctx: ChatErrorContext | None = None) -> Any:
        """Called when a chat request or turn fails. Return a string to change the error text clients see."""
        return None

    async def on_fiber_recovered(self, ctx: FiberRecoveryContext) -> None:
        if ctx.name.startswith(CHAT_TURN_FIBER_PREFIX):
            logger.info(
                "%r: chat turn %s was interrupted; recovery is not implemented, dropping it", self, ctx.name
            )
            return
        await super().on_fiber_recovered(ctx)

    # -- lifecycle ----------------------------------------------------------------------------------

    async def on_start(self) -> None:
        await self._ensure_loaded()

    async def _ensure_loaded(self) -> None:
        if self._tree.loaded:
            return
        async with self._load_lock:
            if not self._tree.loaded:
                await self._tree.load()

    async def _resolve_model(self, spec: str | ModelClient | None) -> ModelClient:
        key: Any = "__default__" if spec is None else spec if isinstance(spec, str) else id(spec)
        model = self._models.get(key)
        if model is None:
            model = resolve_model(spec if spec is not None else await maybe_await(self.get_model()))
            self._models[key] = model
        return model

    # -- messages -----------------------------------------------------------------------------------

    @property
    def messages(self) -> list[dict[str, Any]]:
        """The active conversation (root → newest leaf), as independent copies."""
        return copy.deepcopy(self._tree.path())

    def get_branches(self, message_id: str) -> list[dict[str, Any]]:
        """Every answer stored under ``message_id`` (regenerations are siblings), oldest first."""
        return copy.deepcopy(self._tree.children(message_id))

    def _messages_frame(self, *, connect: bool = False) -> dict[str, Any]:
        frame: dict[str, Any] = {"type": "cf_agent_chat_messages", "messages": self._tree.path()}
        if connect:
            frame["connect"] = True
        return frame

    async def _store_incoming(self, messages: Iterable[dict[str, Any]]) -> str | None:
        """Upsert a client's (reconciled) list, chaining new messages; returns the last message id."""
        previous: str | None = None
        for raw in messages:
            message = sanitize_message(raw)
            existing = self._tree.get(message["id"])
            if existing is None:
                parent = previous if previous is not None and previous in self._tree else self._tree.leaf_id
                await self._tree.upsert(message, parent)
            elif existing != message:
                await self._tree.upsert(message)
            previous = message["id"]
        return previous

    async def add_messages(
        self,
        messages: dict[str, Any] | str | Iterable[dict[str, Any]],
        *,
        parent_id: str | None = None,
        mode: Literal["append", "upsert"] = "append",
        broadcast: bool = True,
    ) -> list[dict[str, Any]]:
        """Store messages without running a turn; new ones are chained under ``parent_id`` (or the leaf).

        ``append`` ignores messages whose id is already stored (idempotent); ``upsert`` updates them in place.
        """
        await self._ensure_loaded()
        items = _as_messages(messages)
        if parent_id is not None and parent_id not in self._tree:
            raise KeyError(f"unknown parent message id {parent_id!r}")
        previous = parent_id if parent_id is not None else self._tree.leaf_id
        for message in items:
            message = sanitize_message(message)
            if message["id"] in self._tree:
                if mode == "upsert":
                    await self._tree.upsert(message)
            else:
                await self._tree.upsert(message, previous)
            previous = message["id"]
        if broadcast and items and _current_turn.get() is not self:
            self.broadcast(self._messages_frame())
        return copy.deepcopy(items)

    async def clear_messages(self) -> None:
        """Delete the whole conversation, abort running turns and tell every client."""
        await self._clear(exclude=())

    async def _clear(self, exclude: Iterable[Connection]) -> None:
        await self._ensure_loaded()
        self._generation += 1
        for turn_id in list(self._turn_tasks):
            self._abort(turn_id)
        await self._tree.clear()
        self.broadcast({"type": "cf_agent_chat_clear"}, exclude=exclude)

    async def _apply_cross_message(self, chunk: dict[str, Any]) -> None:
        path = self._tree.path()
        found = find_tool_part(path, str(chunk.get("toolCallId")))
        if found is None:
            return
        message = copy.deepcopy(path[found[0]])
        if apply_tool_chunk_to_message(message, chunk) is not None:
            await self._tree.upsert(message)
            self.broadcast({"type": "cf_agent_message_updated", "message": message})

    # -- programmatic turns -------------------------------------------------------------------------

    async def save_messages(
        self,
        messages: dict[str, Any] | str | Iterable[dict[str, Any]] | Callable[[list[dict[str, Any]]], Any],
    ) -> ChatResult:
        """Store messages (a text, a message, a list, or ``fn(current) -> list``), run a turn, return its result."""
        return await self._programmatic(messages, None)

    async def chat(self, message: dict[str, Any] | str, callback: Any = None) -> ChatResult:
        """Send one user message and stream the reply's chunks to ``callback``.

        ``callback`` is a function of each chunk dict, or an object with ``on_event(chunk)`` and optional
        ``on_done(result)`` / ``on_error(error_text)`` methods.
        """
        on_event = callback
        if callback is not None and not callable(callback):
            on_event = getattr(callback, "on_event", None) or getattr(callback, "on_chunk", None)
        result = await self._programmatic(message, on_event)
        if callback is not None and not callable(callback):
            if result.status == "error" and hasattr(callback, "on_error"):
                await maybe_await(callback.on_error(result.error))
            elif hasattr(callback, "on_done"):
                await maybe_await(callback.on_done(result))
        return result

    async def _programmatic(self, messages: Any, callback: Any) -> ChatResult:
        if _current_turn.get() is self:
            raise RuntimeError(
                "save_messages()/chat() cannot be called from inside an active turn of the same agent; "
                "use add_messages() instead"
            )
        await self._ensure_loaded()
        if callable(messages) and not isinstance(messages, dict | str):
            messages = await maybe_await(messages(self.messages))
        items = _as_messages(messages)
        last = await self._store_incoming(items) if items else self._tree.leaf_id
        if items:
            self.broadcast(self._messages_frame())
        spec = TurnSpec(
            request_id=new_message_id(),
            parent_id=last,
            message_ids=_trailing_user_ids(items),
            callback=callback,
        )
        return await self._enqueue(spec)

    # -- the turn queue -----------------------------------------------------------------------------

    async def _enqueue(self, spec: TurnSpec) -> ChatResult:
        """Run a turn after every turn admitted before it (FIFO), inside a chat-turn fiber."""
        loop = asyncio.get_running_loop()
        previous = self._queue_tail
        slot: asyncio.Future[None] = loop.create_future()
        self._queue_tail = slot
        spec.generation = self._generation
        result: ChatResult
        try:
            if previous is not None:
                await asyncio.shield(previous)
            if spec.continuation:
                self._continuation_queued = False
            if spec.generation != self._generation or spec.request_id in self._cancelled:
                self._cancelled.discard(spec.request_id)
                raise _Skipped
            if spec.continuation and not self._continuation_ready(spec):
                raise _Skipped
            result = await self.run_fiber(
                f"{CHAT_TURN_FIBER_PREFIX}{spec.request_id}", lambda: self._run_turn(spec)
            )
        except _Skipped:
            frame = {"type": _RESPONSE, "id": spec.request_id, "body": "", "done": True, "outcome": "skipped"}
            self.broadcast(frame)
            return ChatResult(spec.request_id, "skipped", continuation=spec.continuation)
        finally:
            if not slot.done():
                slot.set_result(None)
            if self._queue_tail is slot:
                self._queue_tail = None
        try:
            await maybe_await(self.on_chat_response(result))
        except Exception:
            logger.exception("%r: on_chat_response raised", self)
        return result

    def _continuation_ready(self, spec: TurnSpec) -> bool:
        leaf = self._tree.get(spec.continue_id) if spec.continue_id else None
        return leaf is not None and spec.continue_id == self._tree.leaf_id and _batch_settled(leaf)

    async def _run_turn(self, spec: TurnSpec) -> ChatResult:
        turn = Turn(self, spec)
        self._turns[spec.request_id] = turn
        token = _current_turn.set(self)
        try:
            task = asyncio.get_running_loop().create_task(turn.run(), name=f"chat-turn:{spec.request_id}")
        finally:
            _current_turn.reset(token)
        self._turn_tasks[spec.request_id] = task
        try:
            await asyncio.wait({task})
        except asyncio.CancelledError:
            task.cancel()
            raise
        finally:
            self._turns.pop(spec.request_id, None)
            self._turn_tasks.pop(spec.request_id, None)
        error: BaseException | None = None
        if task.cancelled():
            status = "aborted"
        elif task.exception() is not None:
            status = "error"
            error = task.exception()
        else:
            status = "completed"
        text: str | None = None
        if error is not None:
            text = error_text(error)
            logger.info("%r: turn %s failed: %s", self, spec.request_id, text)
            replacement = await self._report_error(
                error, ChatErrorContext("stream", spec.request_id, messages_persisted=True)
            )
            if isinstance(replacement, str) and replacement:
                text = replacement
            frame: dict[str, Any] = {"type": _RESPONSE, "id": spec.request_id, "body": text, "done": False}
            if spec.continuation:
                frame["continuation"] = True
            frame["error"] = True
            self.broadcast(frame)
        message = _finalize(turn.acc.snapshot())
        persisted: dict[str, Any] | None = None
        if spec.generation == self._generation and message.get("parts"):
            try:
                if spec.continuation:
                    await self._tree.upsert(message)
                elif spec.regenerate and spec.parent_id in self._tree:
                    await self._tree.upsert(message, spec.parent_id)  # a sibling of the earlier answer
                else:
                    await self._tree.upsert(message, self._tree.leaf_id)
                persisted = message
            except Exception as exc:
                logger.exception("%r: persisting the reply of %s failed", self, spec.request_id)
                await self._report_error(exc, ChatErrorContext("persist", spec.request_id))
            self.broadcast(self._messages_frame())
        done: dict[str, Any] = {"type": _RESPONSE, "id": spec.request_id, "body": "", "done": True}
        if spec.continuation:
            done["continuation"] = True
        done["outcome"] = status
        done["messageIds"] = list(spec.message_ids)
        self.broadcast(done)
        return ChatResult(spec.request_id, status, persisted, spec.continuation, text)  # type: ignore[arg-type]

    async def _report_error(self, error: BaseException, ctx: ChatErrorContext) -> Any:
        try:
            hook = self.on_chat_error
            params = inspect.signature(hook).parameters
            return await maybe_await(hook(error, ctx) if len(params) >= 2 else hook(error))  # type: ignore[call-arg]
        except Exception:
            logger.exception("%r: on_chat_error raised", self)
            return None

    def _abort(self, request_id: str) -> bool:
        task = self._turn_tasks.get(request_id)
        if task is None:
            return False
        task.cancel()
        return True

    # -- WebSocket protocol -------------------------------------------------------------------------

    async def _on_connected(self, connection: Connection) -> None:
        await self._ensure_loaded()
        connection.send(self._messages_frame(connect=True))

    async def _on_chat_request_frame(self, connection: Connection, frame: dict[str, Any]) -> None:
        request_id = frame.get("id")
        init = frame.get("init")
        if not isinstance(request_id, str) or not request_id or not isinstance(init, dict):
            logger.info("%r: dropped a chat request without an id or init from %s", self, connection.id)
            return
        if str(init.get("method", "POST")).upper() != "POST" or "body" not in init:
            return
        await self._ensure_loaded()
        try:
            body = _parse_body(init.get("body"))
        except ValueError as exc:
            await self._report_error(exc, ChatErrorContext("parse", request_id))
            connection.send(
                {
                    "type": _RESPONSE,
                    "id": request_id,
                    "body": str(exc),
                    "done": True,
                    "error": True,
                    "outcome": "error",
                }
            )
            return
        messages = body["messages"]
        extra = {k: v for k, v in body.items() if k not in ("messages", "trigger", "clientTools")}
        try:
            reconciled = reconcile_messages(messages, self._tree.path())
            last = await self._store_incoming(reconciled)
        except Exception as exc:
            logger.exception("%r: storing the messages of chat request %s failed", self, request_id)
            text = error_text(exc)
            replacement = await self._report_error(exc, ChatErrorContext("persist", request_id))
            connection.send(
                {
                    "type": _RESPONSE,
                    "id": request_id,
                    "body": replacement if isinstance(replacement, str) and replacement else text,
                    "done": True,
                    "error": True,
                    "outcome": "error",
                }
            )
            return
        self.broadcast(self._messages_frame(), exclude=(connection,))
        spec = TurnSpec(
            request_id=request_id,
            parent_id=last if last is not None else self._tree.leaf_id,
            regenerate=body.get("trigger") == "regenerate-message",
            body=extra,
            message_ids=_trailing_user_ids(reconciled),
        )
        self.create_task(self._enqueue(spec), name=f"chat:{request_id}")

    async def _on_cancel_frame(self, connection: Connection, frame: dict[str, Any]) -> None:
        request_id = frame.get("id")
        if isinstance(request_id, str) and not self._abort(request_id):
            self._cancelled.add(request_id)  # still queued: skipped when it reaches the head

    async def _on_clear_frame(self, connection: Connection, frame: dict[str, Any]) -> None:
        await self._clear(exclude=(connection,))

    async def _on_resume_request_frame(self, connection: Connection, frame: dict[str, Any]) -> None:
        # Stream resumption is not implemented yet: every probe is answered "nothing to resume".
        answer: dict[str, Any] = {"type": "cf_agent_stream_resume_none", "reason": "idle"}
        probe = frame.get("probeId")
        if isinstance(probe, str):
            answer["probeId"] = probe
        connection.send(answer)

    async def _on_resume_ack_frame(self, connection: Connection, frame: dict[str, Any]) -> None:
        request_id = frame.get("id")
        if isinstance(request_id, str):
            connection.send({"type": _RESPONSE, "id": request_id, "body": "", "done": True, "replay": True})

    async def _on_client_messages_frame(self, connection: Connection, frame: dict[str, Any]) -> None:
        if not self._warned_client_messages:
            self._warned_client_messages = True
            logger.warning(
                "%r: ignoring cf_agent_chat_messages from a client (the server owns the transcript)", self
            )

    async def _on_tool_result_frame(self, connection: Connection, frame: dict[str, Any]) -> None:
        call_id = frame.get("toolCallId")
        if not isinstance(call_id, str):
            return
        state = "output-error" if frame.get("state") == "output-error" else "output-available"
        error = frame.get("errorText")

        def apply(message: dict[str, Any]) -> dict[str, Any] | None:
            return apply_tool_result(
                message,
                call_id,
                output=frame.get("output"),
                state=state,  # type: ignore[arg-type]
                error_text=error if isinstance(error, str) else None,
            )

        await self._apply_interaction(call_id, apply, frame.get("autoContinue") is True)

    async def _on_tool_approval_frame(self, connection: Connection, frame: dict[str, Any]) -> None:
        call_id = frame.get("toolCallId")
        if not isinstance(call_id, str):
            return
        approved = frame.get("approved") is True
        reason = frame.get("reason") if isinstance(frame.get("reason"), str) else None
        await self._apply_interaction(
            call_id,
            lambda message: apply_tool_approval(message, call_id, approved, reason=reason),
            frame.get("autoContinue") is True,
        )

    async def _apply_interaction(
        self, call_id: str, apply: Callable[[dict[str, Any]], dict[str, Any] | None], auto_continue: bool
    ) -> None:
        await self._ensure_loaded()
        async with self._interaction_lock:
            path = self._tree.path()
            found = find_tool_part(path, call_id)
            if found is None:
                return
            message = copy.deepcopy(path[found[0]])
            if apply(message) is None:
                return
            await self._tree.upsert(message)
            self.broadcast({"type": "cf_agent_message_updated", "message": message})
        if auto_continue:
            self._maybe_continue()

    def _maybe_continue(self) -> None:
        """Queue a continuation of the last assistant message once its tool calls are all answered."""
        leaf_id = self._tree.leaf_id
        leaf = self._tree.get(leaf_id) if leaf_id else None
        if leaf is None or leaf.get("role") != "assistant" or not _batch_settled(leaf):
            return
        if self._continuation_queued:
            return
        self._continuation_queued = True
        spec = TurnSpec(request_id=new_message_id(), continue_id=leaf_id)
        self.create_task(self._enqueue(spec), name=f"chat-continue:{spec.request_id}")

    # -- HTTP ---------------------------------------------------------------------------------------

    async def on_request(self, request: Any) -> Any:
        """``GET …/get-messages`` answers the active conversation as JSON; anything else is 404."""
        if request.method == "GET" and request.url.path.rstrip("/").endswith("/get-messages"):
            from starlette.responses import JSONResponse

            await self._ensure_loaded()
            return JSONResponse(self._tree.path())
        return await super().on_request(request)


# -- helpers ------------------------------------------------------------------------------------------


def _as_messages(value: Any) -> list[dict[str, Any]]:
    if value is None:
        return []
    if isinstance(value, str):
        return [user_message(value)]
    if isinstance(value, dict):
        value = [value]
    items: list[dict[str, Any]] = []
    for item in value:
        if isinstance(item, str):
            item = user_message(item)
        _check_message(item)
        items.append(item)
    return items


def _check_message(message: Any) -> None:
    if not isinstance(message, dict):
        raise ValueError(f"a message must be an object, got {type(message).__name__}")
    if not isinstance(message.get("id"), str) or not message["id"]:
        raise ValueError("every message needs a non-empty string 'id'")
    if message.get("role") not in ("user", "assistant", "system"):
        raise ValueError(f"message {message['id']!r} has an invalid role {message.get('role')!r}")
    if not isinstance(message.get("parts"), list) or not all(isinstance(p, dict) for p in message["parts"]):
        raise ValueError(f"message {message['id']!r} needs a 'parts' list of objects")


def _parse_body(raw: Any) -> dict[str, Any]:
    if not isinstance(raw, str):
        raise ValueError("Invalid chat request: init.body must be a JSON string")
    try:
        body = json.loads(raw)
    except (ValueError, RecursionError):
        raise ValueError("Invalid chat request: init.body is not valid JSON") from None
    if not isinstance(body, dict):
        raise ValueError("Invalid chat request: init.body must be a JSON object")
    messages = body.get("messages", [])
    if not isinstance(messages, list):
        raise ValueError("Invalid chat request: 'messages' must be an array")
    for message in messages:
        try:
            _check_message(message)
        except ValueError as exc:
            raise ValueError(f"Invalid chat request: {exc}") from None
    body["messages"] = messages
    return body


def _trailing_user_ids(messages: list[dict[str, Any]]) -> list[str]:
    ids: list[str] = []
    for message in reversed(messages):
        if message.get("role") != "user":
            break
        ids.append(message["id"])
    ids.reverse()
    return ids


def _batch_settled(message: dict[str, Any]) -> bool:
    """No tool call of the message still waits for input, a result or an approval."""
    return not any(is_tool_part(p) and p.get("state") in _WAITING_STATES for p in message.get("parts") or ())


def _finalize(message: dict[str, Any]) -> dict[str, Any]:
    """Close text/reasoning parts an interrupted stream left open before the message is stored."""
    for part in message.get("parts") or ():
        if part.get("type") in ("text", "reasoning") and part.get("state") == "streaming":
            part["state"] = "done"
    return message
