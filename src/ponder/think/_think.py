"""``Think``: an agent that owns the whole chat lifecycle.

Why this module exists: a subclass that only says which model to use must already be a working chat agent —
messages stored as a tree, one turn at a time, streamed to every client in the AI SDK's wire format, tools
executed, approvals and client tool results applied, programmatic turns available. This module holds the
transport-neutral admission of chat requests (:meth:`Think.handle_chat_request`, used by the WebSocket frames
and by the server's HTTP ``/chat`` route alike), the ``message_concurrency`` rules, the turn queue, the HTTP
``get-messages`` route and the programmatic API. The frame handlers live in ``_protocol.py``, the resume
handshake in ``_resume.py``, the step loop in ``_turn.py``.
"""

from __future__ import annotations

import asyncio
import copy
import inspect
import logging
from collections.abc import Callable, Iterable
from contextvars import ContextVar
from typing import Any, ClassVar, Literal

from ..chat import (
    apply_tool_chunk_to_message,
    find_tool_part,
    new_message_id,
    reconcile_messages,
    sanitize_message,
)
from ..models import ModelClient, resolve_model
from ..runtime import Agent, Connection, FiberRecoveryContext, Schedule
from ._config import ThinkConfig
from ._context import PromptContext
from ._history import SessionHistory, take_client_answers
from ._protocol import RESPONSE, ChatProtocol, PendingContinuation, batch_settled, text_or
from ._recovery import ChatRecoveryContext, ChatRecoveryDecision, ChatStreamStalled, Recovery
from ._requests import (
    CONCURRENCY_MODES,
    ChatAdmission,
    ChatRequestError,
    ParsedChatRequest,
    parse_chat_request,
)
from ._resume import ResumeHandshake
from ._run_turn import ProgrammaticTurns, _as_messages, _trailing_user_ids
from ._submissions import Submissions, _NotRunning, _SubmissionSpec
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
_RESPONSE = RESPONSE

#: The Think agent whose turn is running in the current task (the nesting guard).
_current_turn: ContextVar[Any] = ContextVar("ponder_think_current_turn", default=None)


class _Skipped(Exception):
    pass


class Think(Submissions, ProgrammaticTurns, SessionHistory, PromptContext, ChatProtocol, Agent):
    """A chat agent: override ``get_model()`` and it speaks the Cloudflare chat protocol.

    Override ``get_system_prompt()``, ``get_tools()`` and the hooks (``before_turn``, ``before_step``,
    ``before_tool_call``, ``after_tool_call``, ``on_step_finish``, ``on_chunk``, ``on_chat_response``,
    ``on_chat_error``) to shape turns; ``configure_session()`` to set up compaction; ``configure_context()``
    for prompt context blocks. See ``docs/think.md``.
    """

    #: Most model calls one turn may make (each tool round-trip is one more step).
    max_steps: ClassVar[int] = 10
    #: Stream (and store) the model's reasoning.
    send_reasoning: ClassVar[bool] = True
    #: What a chat submit does while another turn is queued or running: ``"queue"`` (FIFO), ``"drop"``
    #: (refuse it), ``"latest"`` / ``"merge"`` (only the newest queued submit runs, seeing every message), or
    #: ``"debounce"`` (like latest, after ``message_debounce`` quiet seconds). Regenerations always queue.
    message_concurrency: ClassVar[str] = "queue"
    #: Seconds a ``"debounce"`` submit waits after its admission before it starts.
    message_debounce: ClassVar[float] = 0.75
    #: Crash/stall recovery budget (see ``docs/durability.md``); keys missing here take their defaults.
    chat_recovery: ClassVar[dict[str, Any]] = {}
    #: Abort a model stream silent for longer than this many seconds and recover it (0 = off).
    chat_stream_stall_timeout: ClassVar[float] = 0.0

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

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        mode = cls.__dict__.get("message_concurrency")
        if isinstance(mode, str) and mode not in CONCURRENCY_MODES:
            raise ValueError(
                f"{cls.__name__}.message_concurrency must be one of {', '.join(sorted(CONCURRENCY_MODES))}, "
                f"not {mode!r}"
            )

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.session = self._make_session()
        self._config = ThinkConfig(self.host.store, self.id)
        self._load_lock = asyncio.Lock()
        self._models: dict[Any, ModelClient] = {}
        self._queue_tail: asyncio.Future[None] | None = None
        self._generation = 0
        #: Turns admitted and not finished (queued or running), in admission order.
        self._inflight: list[TurnSpec] = []
        self._turns: dict[str, Turn] = {}
        self._turn_tasks: dict[str, asyncio.Task[None]] = {}
        self._cancelled: set[str] = set()
        self._interaction_lock = asyncio.Lock()
        #: Ids of messages with a continuation queued that has not reached the head of the queue yet.
        self._queued_continuations: set[str] = set()
        self._pending_continuation: PendingContinuation | None = None
        self._submit_seq = 0
        self._latest_submit = 0
        self._submit_event = asyncio.Event()
        #: The turn whose chunks are being sent right now (turns never overlap).
        self._streaming: Turn | None = None
        self._resume = ResumeHandshake(self)
        self._recovery = Recovery(self)
        self._warned_client_messages = False
        self._loaded = False
        self._init_submissions()

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
            await self._recovery.recover(ctx)
            return
        await super().on_fiber_recovered(ctx)

    async def on_chat_recovery(self, ctx: ChatRecoveryContext) -> str | ChatRecoveryDecision | None:
        """An interrupted turn is about to be retried or continued: return ``"persist"`` (or
        ``ChatRecoveryDecision(continue_=False)``) to keep the partial and stop there; anything else recovers."""
        return None

    async def on_exhausted(self, ctx: ChatRecoveryContext) -> None:
        """Recovery gave up on a turn (``ctx.reason``); the terminal message is sent after this returns."""

    def repair_interrupted_tool_part(self, part: dict[str, Any]) -> dict[str, Any] | None:
        """An interrupted tool part, already turned into an ``output-error``; return another part, or None to
        drop it."""
        return part

    async def _sweep_stream_buffers(self, payload: Any = None, schedule: Schedule | None = None) -> None:
        """The stream-buffer sweep schedule (one per agent, armed when a stream ends; see durability.md)."""
        await self._ensure_loaded()
        await self._recovery.scheduled_sweep(schedule.id if schedule is not None else None)

    # -- lifecycle ----------------------------------------------------------------------------------

    async def on_start(self) -> None:
        await self._ensure_loaded()
        await self._recover_submissions()

    async def _ensure_loaded(self) -> None:
        if self._loaded:
            return
        async with self._load_lock:
            if not self._loaded:
                await maybe_await(self.configure_session(self.session))
                await self.session.open()
                await self._load_context()
                await self._config.load()
                await self._recovery.load()
                self._loaded = True

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
        return copy.deepcopy(self.session.active_messages())

    @property
    def client_tools(self) -> list[dict[str, Any]]:
        """The client tools the last request declared (``{name, description, parameters}``), persisted."""
        return copy.deepcopy(self._config.get("client_tools") or [])

    @property
    def last_body(self) -> dict[str, Any]:
        """The custom body of the last chat request (keys other than messages/trigger/clientTools)."""
        return copy.deepcopy(self._config.get("body") or {})

    def _tap_active_stream(self) -> tuple[Turn, asyncio.Queue[Any]] | None:
        """The turn streaming right now and a tap on it (replay so far, then live), or ``None`` when idle."""
        turn = self._streaming
        return (turn, turn.tap()) if turn is not None else None

    def _broadcast_messages(self, exclude: Iterable[Connection | str] = ()) -> None:
        """Send the transcript to every client (but ``exclude``); nothing is built when nobody is connected."""
        if self._connections:
            self.broadcast(self._messages_frame_text(), exclude=exclude)

    def _messages_frame_text(self, *, connect: bool = False) -> str:
        """:meth:`_messages_frame`, encoded: the messages' cached encodings joined (no re-encoding of a long
        transcript on every turn)."""
        tail = ',"connect":true}' if connect else "}"
        return '{"type":"cf_agent_chat_messages","messages":' + self.session.active_messages_json() + tail

    def _messages_frame(self, *, connect: bool = False) -> dict[str, Any]:
        frame: dict[str, Any] = {"type": "cf_agent_chat_messages", "messages": self.session.active_messages()}
        if connect:
            frame["connect"] = True
        return frame

    async def _store_incoming(self, messages: Iterable[dict[str, Any]]) -> str | None:
        """Upsert a client's (reconciled) list, chaining new messages; returns the last message id."""
        previous: str | None = None
        for raw in messages:
            message = sanitize_message(raw)
            session = self.session
            existing = await self._stored(message["id"])
            if existing is None:
                parent = previous if previous is not None and previous in session else session.active_leaf_id
                await session.upsert(message, parent)
            else:
                if existing.get("role") == "assistant" or message.get("role") == "assistant":
                    message = take_client_answers(existing, message)
                if existing != message:
                    await session.upsert(message)
            previous = message["id"]
        return previous

    async def _store_progress(self, message: dict[str, Any]) -> None:
        """Persist a message a running turn is still building (it already exists)."""
        await self.session.upsert(message)

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
        session = self.session
        if parent_id is not None and parent_id not in session:
            raise KeyError(f"unknown parent message id {parent_id!r}")
        previous = parent_id if parent_id is not None else session.active_leaf_id
        for message in items:
            message = sanitize_message(message)
            if message["id"] in session:
                if mode == "upsert":
                    await session.upsert(message)
            else:
                await session.append(message, previous)
            previous = message["id"]
        if broadcast and items and _current_turn.get() is not self:
            self._broadcast_messages()
        return copy.deepcopy(items)

    async def clear_messages(self) -> None:
        """Delete the whole conversation, abort running turns and tell every client."""
        await self._clear(exclude=())

    async def _clear(self, exclude: Iterable[Connection]) -> None:
        await self._ensure_loaded()
        self._generation += 1
        self._submit_seq = self._latest_submit = 0
        self._wake_submits()
        self._pending_continuation = None
        self._queued_continuations.clear()
        for turn_id in list(self._turn_tasks):
            self._abort(turn_id)
        await self.session.clear()
        await self._context_cleared()
        await self._config.clear()
        await self._recovery.clear()
        self._resume.release_parked()
        self.broadcast({"type": "cf_agent_chat_clear"}, exclude=exclude)

    async def _apply_cross_message(self, chunk: dict[str, Any]) -> None:
        call_id = str(chunk.get("toolCallId"))
        path = self.session.active_messages()
        found = find_tool_part(path, call_id)
        if found is None and self.session.hydration.truncated:
            path = await self.session.get_history()
            found = find_tool_part(path, call_id)
        if found is None:
            return
        message = copy.deepcopy(path[found[0]])
        if apply_tool_chunk_to_message(message, chunk) is not None:
            await self.session.upsert(message)
            self.broadcast({"type": "cf_agent_message_updated", "message": message})

    # -- chat requests (every transport) --------------------------------------------------------------

    async def handle_chat_request(
        self,
        body: Any,
        *,
        request_id: str | None = None,
        origin: Connection | None = None,
        on_chunk: Callable[[dict[str, Any]], Any] | None = None,
        reserved: Iterable[str] = (),
    ) -> ChatAdmission:
        """Admit one chat request, whatever transport carried it, exactly as the WebSocket protocol does.

        ``body`` is the request body (a dict, or JSON text/bytes): ``{messages, trigger?, clientTools?,
        ...custom}``; ``reserved`` names transport keys to leave out of the custom body (the AI SDK's ``id``,
        ``messageId``). The body is validated (a bad one raises :class:`ChatRequestError`, status 400, and
        nothing is stored), the ``message_concurrency`` decision is made, the declared client tools and the
        custom body are persisted, the client's list is reconciled with storage and upserted, the transcript
        is broadcast (to every connection except ``origin``) and the turn is queued. Its chunks are broadcast
        to every connection and, when given, passed to ``on_chunk`` (called synchronously or awaited).

        Returns a :class:`ChatAdmission`; ``await admission.result`` gives the turn's :class:`ChatResult`. The
        turn runs as the agent's own task: it completes (and is persisted) even if the caller goes away.
        """
        await self._ensure_loaded()
        request_id = request_id or new_message_id()
        try:
            request = parse_chat_request(body, reserved)
        except ValueError as exc:
            replacement = await self._report_error(exc, ChatErrorContext("parse", request_id))
            raise ChatRequestError(text_or(replacement, str(exc)), 400) from None
        mode = self._concurrency_mode()
        if not request.regenerate and mode == "drop" and self._busy():
            logger.info("%r: dropped chat request %s (another turn is in progress)", self, request_id)
            return ChatAdmission(request_id, "dropped")
        loop = asyncio.get_running_loop()
        spec = TurnSpec(
            request_id=request_id,
            regenerate=request.regenerate,
            body=request.body,
            callback=on_chunk,
            owner=origin.id if origin is not None else None,
            ready=loop.create_future(),
        )
        if not request.regenerate and mode in ("latest", "merge", "debounce"):
            self._submit_seq += 1
            self._latest_submit = spec.submit_seq = self._submit_seq
            self._wake_submits()
        task = self._admit(spec)  # the queue slot is taken now, in arrival order
        try:
            await self._accept_request(request, spec)
        except Exception as exc:
            logger.exception("%r: storing the messages of chat request %s failed", self, request_id)
            replacement = await self._report_error(exc, ChatErrorContext("persist", request_id))
            raise ChatRequestError(text_or(replacement, error_text(exc)), 500) from None
        finally:
            if not spec.ready.done():  # type: ignore[union-attr]
                spec.ready.set_result(False)  # type: ignore[union-attr]
        self._broadcast_messages(exclude=(origin,) if origin is not None else ())
        return ChatAdmission(request_id, "accepted", list(spec.message_ids), task)

    async def _accept_request(self, request: ParsedChatRequest, spec: TurnSpec) -> None:
        """Persist the request's client tools, body and messages; complete ``spec``; mark it ready."""
        # Accept before acknowledging: a durable record of the turn exists before its messages are
        # stored, so a crash before the turn starts leaves a fiber that recovery retries.
        accepted: dict[str, Any] = {"request_id": spec.request_id, "accepted": True, "body": request.body}
        spec.accepted_fiber = await self.record_fiber(f"{CHAT_TURN_FIBER_PREFIX}{spec.request_id}", accepted)
        if request.client_tools is not None:
            await self._config.set("client_tools", request.client_tools or None)
        await self._config.set("body", request.body or None)
        reconciled = reconcile_messages(request.messages, await self._full_path())
        last = await self._store_incoming(reconciled)
        spec.parent_id = last if last is not None else self.session.active_leaf_id
        spec.message_ids = _trailing_user_ids(reconciled)
        spec.client_tools = self._config.get("client_tools")
        await self.update_fiber(
            spec.accepted_fiber,
            {
                **accepted,
                "stored": True,
                "parent_id": spec.parent_id,
                "regenerate": request.regenerate,
                "message_ids": spec.message_ids,
                "client_tools": spec.client_tools,
            },
        )
        if (
            not request.regenerate
            and reconciled
            and reconciled[-1].get("role") == "assistant"
            and last == self.session.active_leaf_id
        ):
            # The client sent its list back ending with the assistant message (an AI SDK client after a
            # client tool result): continue that message rather than answer it with a new one.
            spec.continue_id = last
        if not spec.ready.done():  # type: ignore[union-attr]
            spec.ready.set_result(True)  # type: ignore[union-attr]

    def _concurrency_mode(self) -> str:
        mode = self.message_concurrency
        if mode not in CONCURRENCY_MODES:
            raise ValueError(f"unknown message_concurrency {mode!r}")
        return mode

    def _busy(self) -> bool:
        """A turn of the current generation is queued or running."""
        return any(spec.generation == self._generation for spec in self._inflight)

    def _wake_submits(self) -> None:
        self._submit_event.set()
        self._submit_event = asyncio.Event()

    # -- programmatic turns: see _run_turn.py (run_turn, save_messages, chat, continue_last_turn) --------

    # -- the turn queue -----------------------------------------------------------------------------

    def _admit(self, spec: TurnSpec) -> asyncio.Task[ChatResult]:
        """Give ``spec`` the next slot of the FIFO turn queue and start the task that will run it."""
        previous, slot = self._take_slot(spec)
        return self.create_task(self._run_queued(spec, previous, slot), name=f"chat:{spec.request_id}")

    async def _enqueue(self, spec: TurnSpec) -> ChatResult:
        """Queue ``spec`` (its messages already stored) and run it in the calling task."""
        previous, slot = self._take_slot(spec)
        return await self._run_queued(spec, previous, slot)

    def _take_slot(self, spec: TurnSpec) -> tuple[asyncio.Future[None] | None, asyncio.Future[None]]:
        loop = asyncio.get_running_loop()
        previous = self._queue_tail
        slot: asyncio.Future[None] = loop.create_future()
        self._queue_tail = slot
        spec.generation = self._generation
        spec.admitted_at = loop.time()
        self._inflight.append(spec)
        return previous, slot

    async def _run_queued(
        self, spec: TurnSpec, previous: asyncio.Future[None] | None, slot: asyncio.Future[None]
    ) -> ChatResult:
        """Wait for every turn admitted before ``spec``, then run it inside a chat-turn fiber."""
        result: ChatResult | None = None
        try:
            if spec.ready is not None:
                stored = spec.ready.result() if spec.ready.done() else await asyncio.shield(spec.ready)
                if not stored:  # storing the request failed; the caller already answered it
                    return ChatResult(spec.request_id, "skipped", continuation=spec.continuation)
            if previous is not None:
                await asyncio.shield(previous)
            if spec.continue_id is not None:
                self._queued_continuations.discard(spec.continue_id)
            await self._check_runnable(spec)
            if isinstance(spec, _SubmissionSpec):
                await self._prepare_submission(spec)  # a submission's messages land only now
            result = await self.run_fiber(
                f"{CHAT_TURN_FIBER_PREFIX}{spec.request_id}", lambda: self._start_turn(spec)
            )
        except (_Skipped, _NotRunning):
            frame: dict[str, Any] = {"type": _RESPONSE, "id": spec.request_id, "body": "", "done": True}
            if spec.continuation:
                frame["continuation"] = True
            frame["outcome"] = "skipped"
            if spec.message_ids:
                frame["messageIds"] = list(spec.message_ids)
            self.broadcast(frame)
            return ChatResult(spec.request_id, "skipped", continuation=spec.continuation)
        finally:
            if spec.accepted_fiber is not None:  # the turn's own fiber took over, or it will never run
                await self.forget_fiber(spec.accepted_fiber)
                spec.accepted_fiber = None
            if not slot.done():
                slot.set_result(None)
            if self._queue_tail is slot:
                self._queue_tail = None
            self._inflight.remove(spec)
            if self._pending_continuation is None and not self._busy():
                self._resume.release_parked()
        if self._sub_recovering or (result.status == "recovering" and isinstance(spec, _SubmissionSpec)):
            await self._settle_recovered_submission(result, spec)
        if result.status == "recovering":
            return result  # a stall handed the turn to recovery: the continuation reports the outcome
        try:
            await maybe_await(self.on_chat_response(result))
        except Exception:
            logger.exception("%r: on_chat_response raised", self)
        return result

    async def _start_turn(self, spec: TurnSpec) -> ChatResult:
        """Inside the turn's fiber: the acceptance record is no longer needed, then run the turn."""
        if spec.accepted_fiber is not None:
            await self.forget_fiber(spec.accepted_fiber)
            spec.accepted_fiber = None
        return await self._run_turn(spec)

    async def _check_runnable(self, spec: TurnSpec) -> None:
        """At the head of the queue: raise ``_Skipped`` for a turn that must not run (cleared, cancelled,
        superseded, or a continuation whose message moved on); wait out a debounce window."""
        loop = asyncio.get_running_loop()
        while True:
            if spec.generation != self._generation or spec.request_id in self._cancelled:
                self._cancelled.discard(spec.request_id)
                raise _Skipped
            if spec.continuation and not self._continuation_ready(spec):
                raise _Skipped
            if spec.submit_seq is None:
                return
            if spec.submit_seq < self._latest_submit:
                logger.debug("%r: chat request %s superseded by a newer one", self, spec.request_id)
                raise _Skipped
            if self.message_concurrency != "debounce":
                return
            remaining = spec.admitted_at + float(self.message_debounce) - loop.time()
            if remaining <= 0:
                return
            event = self._submit_event
            try:
                await asyncio.wait_for(event.wait(), remaining)
            except TimeoutError:
                pass

    def _continuation_ready(self, spec: TurnSpec) -> bool:
        leaf = self.session.get(spec.continue_id) if spec.continue_id else None
        return leaf is not None and spec.continue_id == self.session.active_leaf_id and batch_settled(leaf)

    def _stream_started(self, turn: Turn) -> None:
        """Called by a turn before its first chunk goes out."""
        turn.spec.streamed = True
        self._streaming = turn
        self._resume.stream_started(turn)

    def _pending_request_for(self, connection_id: str) -> str | None:
        """The id of a turn accepted but not streaming yet that this connection may wait for."""
        pending = self._pending_continuation
        if pending is not None and (
            pending.owner in (None, connection_id) or self.get_connection(pending.owner) is None
        ):
            return pending.request_id
        for spec in self._inflight:
            if spec.streamed or spec.generation != self._generation:
                continue
            if spec.continuation and spec.owner not in (None, connection_id):
                if self.get_connection(spec.owner) is not None:
                    continue
            return spec.request_id
        return None

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
            if self._streaming is turn:
                self._streaming = None
                self._resume.stream_ended()
        error: BaseException | None = None
        if task.cancelled():
            status = "aborted"
        elif task.exception() is not None:
            status = "error"
            error = task.exception()
        else:
            status = "completed"
        text: str | None = None
        stalled = isinstance(error, ChatStreamStalled)
        stall_text = error_text(error) if stalled and error is not None else None
        if stalled:
            status, error = "recovering", None
        if error is not None:
            text = error_text(error)
            logger.info("%r: turn %s failed: %s", self, spec.request_id, text)
            replacement = await self._report_error(
                error, ChatErrorContext("stream", spec.request_id, messages_persisted=True)
            )
            text = text_or(replacement, text)
            frame: dict[str, Any] = {"type": _RESPONSE, "id": spec.request_id, "body": text, "done": False}
            if spec.continuation:
                frame["continuation"] = True
            frame["error"] = True
            self.broadcast(frame)
        try:
            message = _finalize(turn.acc.snapshot())
            persisted: dict[str, Any] | None = None
            # The stream is closed (with its last chunks) BEFORE the reply is persisted: a crash in between leaves
            # a closed stream holding every chunk, from which recovery persists the same reply. A stalled turn's
            # stream stays open until recovery has taken it over (a crash meanwhile continues it).
            try:
                if stalled:
                    await turn.flush()
                else:
                    await self._recovery.close_stream(turn, "error" if status == "error" else "completed")
            except Exception:
                logger.exception("%r: closing the stream of %s failed", self, spec.request_id)
            if spec.generation == self._generation and message.get("parts"):
                try:
                    session = self.session
                    if spec.continuation:
                        await session.upsert(message)
                    elif spec.regenerate and spec.parent_id in session:
                        await session.upsert(message, spec.parent_id)  # a sibling of the earlier answer
                        await (
                            self._restore_loaded_skills()
                        )  # the skills the replaced answer loaded are off the path
                    else:
                        await session.upsert(message, session.active_leaf_id)
                    persisted = message
                    self._after_interaction(message, False, None)  # re-check a pending continuation
                except Exception as exc:
                    logger.exception("%r: persisting the reply of %s failed", self, spec.request_id)
                    await self._report_error(exc, ChatErrorContext("persist", spec.request_id))
                self._broadcast_messages()
            if stalled:
                outcome = await self._recovery.stalled(turn, persisted)
                if outcome == "exhausted":  # the terminal message already went out
                    status, text = "error", str(self._recovery.budget()["terminal_message"])
                elif outcome == "declined":  # on_chat_recovery kept the partial: the turn ends with the stall
                    status, text = "error", stall_text
                    frame = {"type": _RESPONSE, "id": spec.request_id, "body": text, "done": False}
                    if spec.continuation:
                        frame["continuation"] = True
                    frame["error"] = True
                    self.broadcast(frame)
            turn.error_text = text
            await self._recovery.turn_ended(turn, status)
            done: dict[str, Any] = {"type": _RESPONSE, "id": spec.request_id, "body": "", "done": True}
            if spec.continuation:
                done["continuation"] = True
            done["outcome"] = status
            done["messageIds"] = list(spec.message_ids)
            self.broadcast(done)
            return ChatResult(spec.request_id, status, persisted, spec.continuation, text)  # type: ignore[arg-type]
        finally:
            turn.close_taps(status, text)  # HTTP resume streams (GET …/chat/<id>/stream) end here

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

    # -- HTTP ---------------------------------------------------------------------------------------

    async def on_request(self, request: Any) -> Any:
        """``GET …/get-messages`` answers the active conversation as JSON; anything else is 404."""
        if request.method == "GET" and request.url.path.rstrip("/").endswith("/get-messages"):
            from starlette.responses import JSONResponse

            await self._ensure_loaded()
            return JSONResponse(self.session.active_messages())
        return await super().on_request(request)


# -- helpers ------------------------------------------------------------------------------------------


def _finalize(message: dict[str, Any]) -> dict[str, Any]:
    """Close text/reasoning parts an interrupted stream left open before the message is stored."""
    for part in message.get("parts") or ():
        if part.get("type") in ("text", "reasoning") and part.get("state") == "streaming":
            part["state"] = "done"
    return message
