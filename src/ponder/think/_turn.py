"""One chat turn: the step loop that turns model events into AI SDK chunks and runs server tools.

Why this module exists: a turn is the heart of Think — build the tools and prompt, call the model, translate
its events into ``UIMessageChunk`` dicts (applied to one assistant message and relayed to every client),
execute the tools it called, and loop until the model stops calling tools or the step budget is spent. It is
kept apart from the protocol and queue code in ``_think.py`` so each stays small.
"""

from __future__ import annotations

import asyncio
import copy
import inspect
import json
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pydantic_core import to_jsonable_python

from ..chat import MessageAccumulator, new_message_id
from ..models import (
    AssistantMessage,
    Finish,
    ModelClient,
    ModelRequest,
    ModelSettings,
    ReasoningDelta,
    ReasoningEnd,
    TextDelta,
    ToolCallDelta,
    ToolCallEnd,
    ToolCallStart,
    Usage,
    UserMessage,
    ui_messages_to_model_messages,
)
from ..tools import Tool, ToolContext, ToolInputError, to_tools
from ._client_tools import ClientTool, client_tools_from
from ._context import attach_reminder
from ._recovery import ChatStreamStalled
from ._stream_store import FLUSH_EVERY, FLUSH_NOW
from ._types import (
    StepConfig,
    StepContext,
    StepResult,
    ToolCallContext,
    ToolCallDecision,
    ToolCallResult,
    TurnConfig,
    TurnContext,
)

if TYPE_CHECKING:
    from ._think import Think

__all__ = ["CONTINUE_PROMPT", "Turn", "TurnSpec"]

logger = logging.getLogger("ponder.think")

CONTINUE_PROMPT = "Continue your previous response from exactly where it left off. Do not repeat any of it."
BLOCKED_TOOL_TEXT = "The tool call was blocked."
_STEP_START = {"type": "step-start"}

ChunkCallback = Callable[[dict[str, Any]], Any]


def dumps(value: Any) -> str:
    """Compact JSON, as chunks go on the wire."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False, default=to_jsonable_python)


async def maybe_await(value: Any) -> Any:
    if inspect.isawaitable(value):
        return await value
    return value


@dataclass(slots=True)
class TurnSpec:
    """What to run: a new answer (under ``parent_id`` for a regeneration, else after the newest leaf), or a
    continuation of ``continue_id``."""

    request_id: str
    parent_id: str | None = None
    regenerate: bool = False
    continue_id: str | None = None
    body: dict[str, Any] = field(default_factory=dict)
    message_ids: list[str] = field(default_factory=list)
    callback: ChunkCallback | None = None
    generation: int = 0
    #: Declarations of the client tools this turn exposes (``{name, description, parameters}``).
    client_tools: list[dict[str, Any]] | None = None
    #: The connection that asked for a continuation (it owns the resume of its stream).
    owner: str | None = None
    #: For ``latest``/``merge``/``debounce`` submits: the admission number (a newer one supersedes it).
    submit_seq: int | None = None
    #: ``loop.time()`` at admission (the debounce window counts from here).
    admitted_at: float = 0.0
    #: Resolves True once the request's messages are stored, False if storing failed (the turn is dropped).
    ready: asyncio.Future[bool] | None = None
    #: The fiber row that records the accepted request until the turn's own fiber starts.
    accepted_fiber: str | None = None
    #: The turn has sent its first chunk.
    streamed: bool = False
    #: Scheduled by crash/stall recovery (same request id as the interrupted turn).
    recovery: bool = False
    #: Durable chunks the request streamed before this attempt (recovery's progress measure).
    progress_base: int = 0
    #: A stall handed the turn to recovery: its outcome belongs to the recovered turn.
    recovering_after: bool = False
    #: A recovered retry answers under the message id the interrupted attempt announced in its ``start``
    #: chunk, so a client that saw that attempt replaces its message instead of keeping a stale one.
    message_id: str | None = None

    @property
    def continuation(self) -> bool:
        return self.continue_id is not None


@dataclass(slots=True)
class _Call:
    tool_call_id: str
    tool_name: str
    tool: Tool | None
    input: dict[str, Any]
    validated: dict[str, Any]


class Turn:
    """Runs one turn for a :class:`Think` agent; ``acc`` holds the assistant message being built."""

    def __init__(self, agent: Think, spec: TurnSpec) -> None:
        self.agent = agent
        self.spec = spec
        self.request_id = spec.request_id
        #: Every chunk sent so far, JSON-encoded; the index is the chunk's ``seq`` (replayed on resume).
        self.bodies: list[str] = []
        #: Ids of the calls this turn runs on the server (a client may not answer those).
        self.server_calls: set[str] = set()
        self.error_text: str | None = None
        #: The durable buffer of this turn's chunks, and the ``(seq, body)`` rows not written yet.
        self.stream_id = new_message_id()
        self._unflushed: list[tuple[int, str]] = []
        #: The stream row has its final status (set with the last chunks, before the reply is persisted).
        self.stream_closed = False
        #: What recovery stashed in the turn's fiber before the first chunk (``None`` until then).
        self.recovery_snapshot: dict[str, Any] | None = None
        #: Readers of this stream other than WebSocket clients (HTTP resume), and how the turn ended.
        self._taps: list[asyncio.Queue[Any]] = []
        self._ended: tuple[str, str | None] | None = None
        self.server_tool_names: set[str] = set()
        self.stall_timeout = float(getattr(agent, "chat_stream_stall_timeout", 0) or 0)
        seed = agent.session.get(spec.continue_id) if spec.continue_id else None
        #: The stored form of the continued message (its model input is replaced by the accumulator's).
        self._seed: dict[str, Any] = seed if seed is not None else {}
        if seed is not None:
            # A copy: the stored (cached) message changes only when the turn persists its own.
            self.acc = MessageAccumulator(message=copy.deepcopy(seed), continuation=True)
        else:
            self.acc = MessageAccumulator(spec.message_id)
        self._text_id: str | None = None
        self._reasoning_id: str | None = None
        self._part_counter = 0
        #: ``agent._skill_reclaims`` when the model input was last read (an unload rewrites stored messages).
        self._reclaims_seen = 0
        #: An overflow retry of a step whose ``start-step`` already went out (it is not sent twice).
        self._step_opened = False
        self._on_chunk = type(agent).on_chunk is not _base_on_chunk(agent)
        #: While True, chunks reach the accumulator and the local callbacks but no WebSocket client.
        self._silent = False

    # -- emitting chunks ---------------------------------------------------------------------------

    async def emit(self, chunk: dict[str, Any]) -> None:
        result = self.acc.apply(chunk)
        if result.suppressed:
            return
        if result.cross_message:
            await self.agent._apply_cross_message(chunk)
        if not self._silent:
            self._send(chunk)
            if len(self._unflushed) >= FLUSH_EVERY or chunk.get("type") in FLUSH_NOW:
                await self.flush()
        if self.spec.callback is not None:
            await maybe_await(self.spec.callback(chunk))
        if self._on_chunk:
            await maybe_await(self.agent.on_chunk(chunk))

    def _send(self, chunk: dict[str, Any]) -> None:
        """Broadcast one chunk as a stream frame (recorded for resume replay)."""
        body = dumps(chunk)
        if not self.bodies:
            self.agent._stream_started(self)
        frame: dict[str, Any] = {
            "type": "cf_agent_use_chat_response",
            "id": self.request_id,
            "body": body,
            "done": False,
        }
        if self.spec.continuation:
            frame["continuation"] = True
        frame["seq"] = seq = len(self.bodies)
        self.bodies.append(body)
        for tap in self._taps:
            tap.put_nowait(body)
        self._unflushed.append((seq, body))
        waiting = self.agent._resume.awaiting_ack
        if waiting:
            self.agent.broadcast(frame, exclude=waiting)
        else:
            self.agent.broadcast(frame)

    def tap(self) -> asyncio.Queue[str | tuple[str, str | None]]:
        """A queue of this turn's chunk bodies: every chunk sent so far, then each new one as it is sent, then
        ``(status, error_text)`` when the turn ends. Nothing is missed: the replay and the subscription happen
        together. Call :meth:`untap` when done reading."""
        queue: asyncio.Queue[str | tuple[str, str | None]] = asyncio.Queue()
        for body in self.bodies:
            queue.put_nowait(body)
        if self._ended is not None:
            queue.put_nowait(self._ended)
        else:
            self._taps.append(queue)
        return queue

    def untap(self, queue: asyncio.Queue[Any]) -> None:
        if queue in self._taps:
            self._taps.remove(queue)

    def close_taps(self, status: str, error_text: str | None) -> None:
        """The turn ended: tell every tap (once)."""
        if self._ended is None:
            self._ended = (status, error_text)
            for tap in self._taps:
                tap.put_nowait(self._ended)
            self._taps.clear()

    async def flush(self) -> None:
        """Write the buffered chunks to the durable stream buffer."""
        rows = self.take_unflushed()
        if rows:
            try:
                await self.agent._recovery.streams.write(self.stream_id, rows)
            except BaseException:
                self.restore_unflushed(rows)
                raise

    def take_unflushed(self) -> list[tuple[int, str]]:
        """The ``(seq, body)`` rows not written yet; the caller writes them (or gives them back)."""
        rows, self._unflushed = self._unflushed, []
        return rows

    def restore_unflushed(self, rows: list[tuple[int, str]]) -> None:
        """Rows a failed write did not store: they go out with the next flush."""
        self._unflushed = rows + self._unflushed

    def reseed(self, message: dict[str, Any]) -> None:
        """The continued message was repaired before the turn streamed: continue the repaired form."""
        self._seed = message
        self.acc = MessageAccumulator(message=copy.deepcopy(message), continuation=True)

    def _next_id(self, prefix: str) -> str:
        value = f"{prefix}{self._part_counter}"
        self._part_counter += 1
        return value

    async def _close_text(self) -> None:
        if self._text_id is not None:
            text_id, self._text_id = self._text_id, None
            await self.emit({"type": "text-end", "id": text_id})

    async def _close_reasoning(self, provider_metadata: dict[str, Any] | None = None) -> None:
        if self._reasoning_id is not None:
            reasoning_id, self._reasoning_id = self._reasoning_id, None
            chunk: dict[str, Any] = {"type": "reasoning-end", "id": reasoning_id}
            if provider_metadata:
                chunk["providerMetadata"] = provider_metadata
            await self.emit(chunk)

    # -- the loop ----------------------------------------------------------------------------------

    async def run(self) -> None:
        agent = self.agent
        # Server tools win over a client tool of the same name: a browser cannot shadow them.
        tools = {
            **client_tools_from(self.spec.client_tools),
            **agent._builtin_tools(),
            **agent._context_tools(),
            **to_tools(await maybe_await(agent.get_tools())),
        }
        self.server_tool_names = {n for n, t in tools.items() if not isinstance(t, ClientTool)}
        await agent._recovery.turn_started(self)
        model = await agent._resolve_model(None)
        anchor = self.spec.continue_id or (self.spec.parent_id if self.spec.regenerate else None)
        await agent._await_compaction()
        system = await agent._system_prompt()  # after a compaction: rebuilt
        # A changed "remind" context block rides on the model input of this turn only (never stored).
        reminder = await agent._take_reminder()
        prior = await self._read_prior(anchor, reminder)
        ctx = TurnContext(
            request_id=self.request_id,
            system=system,
            messages=prior,
            tools=tools,
            model=model,
            continuation=self.spec.continuation,
            body=dict(self.spec.body),
        )
        config = await maybe_await(agent.before_turn(ctx)) or TurnConfig()
        if config.model is not None:
            model = await agent._resolve_model(config.model)
        system_override = config.system
        if system_override is not None:
            system = system_override
        if config.messages is not None:
            prior = list(config.messages)
        if config.tools:
            tools = {**tools, **to_tools(config.tools)}
        if config.active_tools is not None:
            tools = {name: t for name, t in tools.items() if name in config.active_tools}
        stall = getattr(config, "stream_stall_timeout", None)
        if stall is not None:
            self.stall_timeout = float(stall)
        max_steps = config.max_steps if config.max_steps is not None else agent.max_steps
        send_reasoning = config.send_reasoning if config.send_reasoning is not None else agent.send_reasoning
        settings = ModelSettings(
            temperature=config.temperature,
            max_tokens=config.max_tokens,
            top_p=config.top_p,
            stop_sequences=config.stop_sequences,
            seed=config.seed,
            tool_choice=config.tool_choice,
            timeout=config.timeout,
            max_retries=config.max_retries,
            extra=dict(config.extra or {}),
        )

        start: dict[str, Any] = {"type": "start"}
        if not self.spec.continuation:
            start["messageId"] = self.acc.message_id
        if self.spec.continuation:
            await self._start_continuation(start, tools)
        else:
            await self.emit(start)

        finish_reason: str | None = None
        policy = agent._overflow_policy
        compactions = retries = step = 0
        while step < max(0, max_steps):
            if policy.should_compact_proactively(agent._last_input_tokens, compactions):
                compactions += 1
                agent._last_input_tokens = None
                if await agent._compact_for_overflow(None, proactive=True):
                    prior = await self._read_prior(anchor, reminder)
                    if system_override is None:
                        system = await agent._system_prompt()
            messages = prior + ui_messages_to_model_messages([self.acc.message])
            if messages and isinstance(messages[-1], AssistantMessage):
                messages.append(UserMessage(CONTINUE_PROMPT))  # ephemeral: never stored
            if not messages:
                raise ValueError("there are no messages to send to the model")
            step_ctx = StepContext(self.request_id, step, system, messages, tools, model)
            step_config = await maybe_await(agent.before_step(step_ctx)) or StepConfig()
            step_model = await agent._resolve_model(step_config.model) if step_config.model else model
            step_system = step_config.system if step_config.system is not None else system
            visible = tools
            if step_config.active_tools is not None:
                visible = {n: t for n, t in tools.items() if n in step_config.active_tools}
            step_settings = settings
            if step_config.tool_choice is not None:
                step_settings = ModelSettings(
                    **{**_settings_dict(settings), "tool_choice": step_config.tool_choice}
                )
            request = ModelRequest(
                system=step_system or None,
                messages=messages,
                tools=[t.definition for t in visible.values()],
                settings=step_settings,
            )
            before = copy.deepcopy(self.acc.message) if policy.reactive else None
            try:
                finish_reason, calls, usage, awaiting, tool_calls = await self._step(
                    step_model, request, visible, send_reasoning
                )
            except Exception as exc:
                if before is None or not (policy.should_retry(retries) and agent.is_context_overflow(exc)):
                    raise
                # The request outgrew the context window: drop this step's partial, compact, run it again.
                retries += 1
                logger.info("%r: context overflow in %s; compacting and retrying", agent, self.request_id)
                # Usually the request failed before any output: callers saw only this step's start-step.
                self._step_opened = self.acc.message.get("parts") == [*before.get("parts", ()), _STEP_START]
                self.acc = MessageAccumulator(message=before, continuation=self.acc.continuation)
                self._text_id = self._reasoning_id = None
                await agent._compact_for_overflow(exc)
                prior = await self._read_prior(anchor, reminder)
                if system_override is None:
                    system = await agent._system_prompt()
                continue
            if usage is not None:
                agent._last_input_tokens = usage.input_tokens or None
            results = await self._execute(calls)
            if self._reclaims_seen != agent._skill_reclaims:  # unload_context rewrote a stored message
                prior = await self._read_prior(anchor, reminder)
            await self.emit({"type": "finish-step"})
            await maybe_await(
                agent.on_step_finish(
                    StepResult(
                        request_id=self.request_id,
                        step=step,
                        finish_reason=finish_reason,  # type: ignore[arg-type]
                        text=_step_text(self.acc.message),
                        tool_calls=tool_calls,
                        tool_results=results,
                        usage=usage,
                    )
                )
            )
            if not tool_calls or awaiting:
                break
            step += 1
        finish: dict[str, Any] = {"type": "finish"}
        if finish_reason is not None:
            finish["finishReason"] = finish_reason
        await self.emit(finish)

    async def _read_prior(self, anchor: str | None, reminder: str | None) -> list[Any]:
        """The stored conversation as model input (up to ``anchor``), with ``reminder`` attached."""
        self._reclaims_seen = self.agent._skill_reclaims
        prior = await self.agent.session.read_model_messages(anchor)
        if self.spec.continuation and self._seed:
            # The continued message is rebuilt from the accumulator each step: drop its stored form (the
            # last message is never truncated, so its converted entries are those of the seed).
            del prior[len(prior) - len(ui_messages_to_model_messages([self._seed])) :]
        if reminder is not None:
            prior = attach_reminder(prior, reminder)
        return prior

    async def _step(
        self, model: ModelClient, request: ModelRequest, tools: dict[str, Tool], send_reasoning: bool
    ) -> tuple[str | None, list[_Call], Usage | None, bool, list[dict[str, Any]]]:
        if self._step_opened:  # a retry after an overflow: every caller already has this step's start-step
            self._step_opened = False
            self.acc.apply(dict(_STEP_START))
        else:
            await self.emit({"type": "start-step"})
        calls: list[_Call] = []
        tool_calls: list[dict[str, Any]] = []
        awaiting = False
        usage: Usage | None = None
        finish_reason: str | None = None
        stream = model.stream(request)
        try:
            async for event in _watch(stream, self.stall_timeout):
                if isinstance(event, TextDelta):
                    if not event.text:
                        continue
                    await self._close_reasoning()
                    if self._text_id is None:
                        self._text_id = self._next_id("t")
                        await self.emit({"type": "text-start", "id": self._text_id})
                    await self.emit({"type": "text-delta", "id": self._text_id, "delta": event.text})
                elif isinstance(event, ReasoningDelta):
                    if not send_reasoning:
                        continue
                    await self._close_text()
                    if self._reasoning_id is None:
                        self._reasoning_id = self._next_id("r")
                        await self.emit({"type": "reasoning-start", "id": self._reasoning_id})
                    await self.emit(
                        {"type": "reasoning-delta", "id": self._reasoning_id, "delta": event.text}
                    )
                elif isinstance(event, ReasoningEnd):
                    if send_reasoning:
                        await self._close_reasoning(event.provider_metadata)
                elif isinstance(event, ToolCallStart):
                    await self._close_text()
                    await self._close_reasoning()
                    await self.emit(
                        {
                            "type": "tool-input-start",
                            "toolCallId": event.tool_call_id,
                            "toolName": event.tool_name,
                        }
                    )
                elif isinstance(event, ToolCallDelta):
                    await self.emit(
                        {
                            "type": "tool-input-delta",
                            "toolCallId": event.tool_call_id,
                            "inputTextDelta": event.args_delta,
                        }
                    )
                elif isinstance(event, ToolCallEnd):
                    await self._close_text()
                    await self._close_reasoning()
                    tool_calls.append(
                        {"toolCallId": event.tool_call_id, "toolName": event.tool_name, "input": event.args}
                    )
                    call = await self._tool_call_ended(event, tools)
                    if call is True:
                        awaiting = True
                    elif call is not None:
                        calls.append(call)
                elif isinstance(event, Usage):
                    usage = event
                elif isinstance(event, Finish):
                    finish_reason = event.reason
        finally:
            aclose = getattr(stream, "aclose", None)
            if aclose is not None:
                await aclose()
        await self._close_text()
        await self._close_reasoning()
        return finish_reason, calls, usage, awaiting, tool_calls

    async def _tool_call_ended(self, event: ToolCallEnd, tools: dict[str, Tool]) -> _Call | bool | None:
        """Validate a finished call: a ``_Call`` to run, ``True`` when it awaits approval or a client, else
        ``None``."""
        call_id, name = event.tool_call_id, event.tool_name
        base = {"toolCallId": call_id, "toolName": name}
        tool = tools.get(name)
        if event.invalid_args is not None:
            error = (
                f"Invalid input for tool {name}: the arguments are not a JSON object: {event.invalid_args}"
            )
            await self.emit(
                {"type": "tool-input-error", **base, "input": event.invalid_args, "errorText": error}
            )
            return None
        if tool is None:
            available = ", ".join(sorted(tools)) or "none"
            error = f"Model tried to call unavailable tool '{name}'. Available tools: {available}."
            await self.emit({"type": "tool-input-error", **base, "input": event.args, "errorText": error})
            return None
        try:
            validated = tool.validate(event.args)
        except ToolInputError as exc:
            await self.emit({"type": "tool-input-error", **base, "input": event.args, "errorText": str(exc)})
            return None
        await self.emit({"type": "tool-input-available", **base, "input": event.args})
        if isinstance(tool, ClientTool):
            return True  # the client runs it and answers with cf_agent_tool_result
        try:
            needs_approval = await tool.requires_approval(event.args)
        except Exception as exc:
            await self.emit(
                {"type": "tool-output-error", "toolCallId": call_id, "errorText": _error_text(exc)}
            )
            return None
        if needs_approval:
            await self.emit(
                {"type": "tool-approval-request", "toolCallId": call_id, "approvalId": new_message_id()}
            )
            return True
        self.server_calls.add(call_id)
        return _Call(call_id, name, tool, event.args, validated)

    async def _start_continuation(self, start: dict[str, Any], tools: dict[str, Tool]) -> None:
        """Run the approved calls, then start the continuation's stream.

        Their chunks go to the local callbacks (HTTP SSE, ``chat()``, ``on_chunk``) but not to WebSocket
        clients: a stock hook that attached through the resume handshake applies the stream to an empty
        message, and an output chunk for a call it does not hold fails there ("No tool invocation found").
        WebSocket clients get the updated message as ``cf_agent_message_updated`` instead, before the first
        stream frame.
        """
        self._silent = True
        try:
            await self.emit(start)
            ran = await self._run_approved(tools)
        finally:
            self._silent = False
        if ran:
            message = copy.deepcopy(self.acc.message)
            await self.agent._store_progress(message)
            self.agent.broadcast({"type": "cf_agent_message_updated", "message": message})
        self._send(start)

    async def _run_approved(self, tools: dict[str, Tool]) -> bool:
        """A continuation first runs the calls the user approved since the last turn; True if any ran."""
        calls: list[_Call] = []
        errors = False
        for part in self.acc.parts:
            if part.get("state") != "approval-responded":
                continue
            approval = part.get("approval")
            if isinstance(approval, dict) and approval.get("approved") is False:
                continue
            name = part.get("toolName") or str(part.get("type", ""))[len("tool-") :]
            raw_input = part.get("input") if isinstance(part.get("input"), dict) else {}
            tool = tools.get(name)
            if isinstance(tool, ClientTool):
                continue  # the client answers it with cf_agent_tool_result
            validated: dict[str, Any] = {}
            if tool is not None:
                try:
                    validated = tool.validate(raw_input)
                except ToolInputError as exc:
                    await self.emit(
                        {"type": "tool-output-error", "toolCallId": part["toolCallId"], "errorText": str(exc)}
                    )
                    errors = True
                    continue
            self.server_calls.add(part["toolCallId"])
            calls.append(_Call(part["toolCallId"], name, tool, raw_input, validated))
        await self._execute(calls)
        return bool(calls) or errors

    # -- tools -------------------------------------------------------------------------------------

    async def _execute(self, calls: list[_Call]) -> list[ToolCallResult]:
        if not calls:
            return []
        if len(calls) == 1:
            return [await self._execute_one(calls[0])]
        return list(await asyncio.gather(*(self._execute_one(call) for call in calls)))

    async def _execute_one(self, call: _Call) -> ToolCallResult:
        agent = self.agent
        result = ToolCallResult(self.request_id, call.tool_call_id, call.tool_name, call.input)
        try:
            decision = await maybe_await(
                agent.before_tool_call(
                    ToolCallContext(
                        self.request_id, call.tool_call_id, call.tool_name, dict(call.input), call.tool
                    )
                )
            )
            result.decision = decision
            if decision is not None and decision.action == "block":
                result.output = decision.reason or BLOCKED_TOOL_TEXT
            elif decision is not None and decision.action == "substitute":
                result.output = decision.output
            elif call.tool is None:
                raise LookupError(f"tool {call.tool_name!r} is not available")
            else:
                args, validate = call.validated, False
                if isinstance(decision, ToolCallDecision) and decision.input is not None:
                    args = dict(decision.input)
                    result.input = args
                ctx = ToolContext(agent, call.tool_call_id, call.tool_name, self.request_id)

                async def preliminary(value: Any) -> None:
                    await self.emit(
                        {
                            "type": "tool-output-available",
                            "toolCallId": call.tool_call_id,
                            "output": value,
                            "preliminary": True,
                        }
                    )

                ledger = not getattr(call.tool, "idempotent", False)
                if ledger:
                    await agent._recovery.streams.tool_started(
                        self.request_id, call.tool_call_id, call.tool_name
                    )
                try:
                    result.output = await call.tool.invoke(args, ctx, preliminary, validate=validate)
                except Exception as exc:
                    if ledger:
                        await agent._recovery.streams.tool_finished(call.tool_call_id, None, _error_text(exc))
                    raise
                if ledger:
                    await agent._recovery.streams.tool_finished(call.tool_call_id, dumps(result.output), None)
        except Exception as exc:
            result.error = _error_text(exc)
            logger.info("%r: tool %s failed: %s", agent, call.tool_name, result.error)
        if result.error is not None:
            await self.emit(
                {"type": "tool-output-error", "toolCallId": call.tool_call_id, "errorText": result.error}
            )
        else:
            await self.emit(
                {"type": "tool-output-available", "toolCallId": call.tool_call_id, "output": result.output}
            )
        try:
            await maybe_await(agent.after_tool_call(result))
        except Exception:
            logger.exception("%r: after_tool_call raised", agent)
        return result


async def _watch(stream: Any, timeout: float) -> Any:
    """Iterate a model stream; with ``timeout`` > 0, raise ``ChatStreamStalled`` after that many silent seconds."""
    if timeout <= 0:
        async for event in stream:
            yield event
        return
    iterator = stream.__aiter__()
    while True:
        try:
            event = await asyncio.wait_for(iterator.__anext__(), timeout)
        except StopAsyncIteration:
            return
        except TimeoutError:
            aclose = getattr(iterator, "aclose", None)
            if aclose is not None:
                try:
                    await aclose()
                except Exception:
                    pass
            raise ChatStreamStalled(f"the model stream was silent for more than {timeout:g}s") from None
        yield event


def _settings_dict(settings: ModelSettings) -> dict[str, Any]:
    return {name: getattr(settings, name) for name in settings.__dataclass_fields__}


def _step_text(message: dict[str, Any]) -> str:
    parts = message.get("parts") or []
    start = 0
    for index, part in enumerate(parts):
        if part.get("type") == "step-start":
            start = index
    return "".join(p.get("text") or "" for p in parts[start:] if p.get("type") == "text")


def _error_text(exc: BaseException) -> str:
    text = str(exc)
    return text if text else type(exc).__name__


def _base_on_chunk(agent: Think) -> Callable[..., Awaitable[None]]:
    from ._think import Think

    return Think.on_chunk  # type: ignore[return-value]


def error_text(exc: BaseException) -> str:
    """The message a client and ``on_chat_error`` see for a failed turn."""
    return _error_text(exc)
