"""Recovery of chat turns a crash (or a stalled model) interrupted.

Why this module exists: invariant 4. Every turn runs inside the fiber ``ponder:chat-turn:<request id>`` whose
snapshot (stashed before the first chunk) says what the turn was: its stream id, the assistant message id, the
parent it answers, whether it continues a message, its body and client tools, and how much progress the
request had made before. When the agent wakes with such a fiber row, :meth:`Recovery.recover` decides:

- **retry** — nothing persistable was streamed (no stream, or an opened-but-empty one: upstream #2105), the turn
  was not a continuation, and the user message it answered is still the leaf: the same request runs again; the
  user row is never duplicated.
- **continue** — a partial exists: it is rebuilt from the durable chunks, its interrupted tool parts repaired,
  persisted under the SAME assistant message id, and a continuation turn (``continuation: true`` frames, an
  ephemeral "continue" instruction that is never stored) streams into that same message.
- nothing — the stream had finished (the crash hit between the last chunk and the fiber's end), or the partial
  waits on a human (an approval or a client tool): a settled wait, no budget spent.

Attempts are budgeted per request (``Think.chat_recovery``): progress (more durable chunks than at the last
attempt) resets the attempt count; ``max_attempts`` attempts without progress, ``no_progress_timeout`` seconds
without progress or ``max_recovery_work`` seconds since the first interruption exhaust it, and the turn ends
with ``terminal_message`` (stored as the answer, sent as an error frame, replayed to clients that connect later).
"""

from __future__ import annotations

import copy
import json
import logging
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from ..chat import MessageAccumulator, new_message_id
from ..chat._parts import is_tool_part
from ._stream_store import KEEP_FINISHED, StreamStore

if TYPE_CHECKING:
    from ..runtime import Connection, FiberRecoveryContext
    from ._think import Think
    from ._turn import Turn

__all__ = [
    "DEFAULT_CHAT_RECOVERY",
    "INTERRUPTED_TOOL_TEXT",
    "ChatRecoveryContext",
    "ChatRecoveryDecision",
    "ChatStreamStalled",
    "Recovery",
]

logger = logging.getLogger("ponder.think")

RESPONSE = "cf_agent_use_chat_response"
TURN_FIBER_PREFIX = "ponder:chat-turn:"
#: The agent method the stream-buffer sweep schedule calls (one schedule per agent).
SWEEP_CALLBACK = "_sweep_stream_buffers"
#: The sweep schedule is never armed sooner than this many seconds ahead.
MIN_SWEEP_DELAY = 60.0
INTERRUPTED_TOOL_TEXT = "The tool call was interrupted before a result was recorded."
STARTED_TOOL_TEXT = (
    "The tool call was interrupted after it started; it was not run again because it may have side effects."
)
DEFAULT_CHAT_RECOVERY: dict[str, Any] = {
    "max_attempts": 3,
    "no_progress_timeout": 300.0,
    "max_recovery_work": 900.0,
    "terminal_message": "The assistant was interrupted and could not recover. Please try again.",
}
#: A "recovering" flag older than this is ignored.
RECOVERING_TTL = 900.0
_SETTLED = frozenset({"output-available", "output-error", "output-denied"})


class ChatStreamStalled(TimeoutError):
    """The model stream was silent for longer than the stall timeout."""


@dataclass(slots=True)
class ChatRecoveryDecision:
    """What ``on_chat_recovery`` wants: persist the partial (always, when it holds settled tool results) and
    continue (or retry) the turn."""

    persist: bool = True
    continue_: bool = True


@dataclass(slots=True)
class ChatRecoveryContext:
    request_id: str
    kind: Literal["retry", "continue", "stall"]
    attempt: int
    max_attempts: int
    stream_id: str | None
    message_id: str | None
    partial_text: str
    partial_parts: list[dict[str, Any]]
    snapshot: dict[str, Any]
    created_at: float
    reason: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)


def waits_on_human(part: dict[str, Any], server_tools: set[str] | None = None) -> bool:
    """An approval request, or a client tool call waiting for the browser's answer."""
    state = part.get("state")
    if state == "approval-requested":
        return True
    if state == "input-available" and server_tools is not None:
        return _tool_name(part) not in server_tools
    return False


def _tool_name(part: dict[str, Any]) -> str:
    return str(part.get("toolName") or str(part.get("type", ""))[len("tool-") :])


class Recovery:
    """Durable stream bookkeeping and crash recovery for one :class:`Think` agent."""

    def __init__(self, agent: Think) -> None:
        self.agent = agent
        self.streams = StreamStore(agent.host.store, agent.id)
        #: request id → chunk bodies of a ``streaming`` buffer with no live producer (recovery pending).
        self.orphans: dict[str, list[str]] = {}
        #: request id → connection ids that replayed an orphan and wait for recovery's decision.
        self.waiters: dict[str, list[str]] = {}
        #: The last turn that ended in an error nobody saw: ``{request_id, body, bodies}``.
        self.terminal: dict[str, Any] | None = None
        #: When the armed sweep schedule is due (None: not known to be armed in this process).
        self._sweep_due: float | None = None
        #: The id of the sweep schedule running now (its row is removed when it returns).
        self._sweeping: str | None = None

    # -- configuration ------------------------------------------------------------------------------

    def budget(self) -> dict[str, Any]:
        return {**DEFAULT_CHAT_RECOVERY, **(getattr(self.agent, "chat_recovery", None) or {})}

    # -- load ---------------------------------------------------------------------------------------

    async def load(self) -> None:
        store = self.agent.host.store
        recovering: set[str] = set()
        for row in await self.streams.streaming():
            fiber = await store.fetch_one(
                "SELECT 1 AS x FROM ponder_fibers WHERE agent_id = ? AND name = ?",
                (self.agent.id, TURN_FIBER_PREFIX + row["request_id"]),
            )
            if fiber is not None:
                self.orphans[row["request_id"]] = await self.streams.chunks(row["id"])
                recovering.add(row["id"])
            else:
                await self.streams.finish(row["id"], "error")
        record = self.agent._config.get("last_terminal")
        if isinstance(record, dict):
            bodies = await self.streams.chunks(record["stream_id"]) if record.get("stream_id") else []
            self.terminal = {**record, "bodies": bodies}
        try:
            await self.streams.sweep(spare=recovering)  # recovery settles those itself
            await self.arm_sweep()
        except Exception:  # a sweep is housekeeping: never fail a wake on it
            logger.exception("%r: sweeping stream buffers failed", self.agent)

    # -- turn lifecycle -----------------------------------------------------------------------------

    async def turn_started(self, turn: Turn) -> None:
        """Before the first chunk: snapshot the turn into its fiber, open its stream, repair the transcript."""
        spec = turn.spec
        agent = self.agent
        if self.terminal is not None and not spec.recovery:
            await self._clear_terminal()
        snapshot = {
            "kind": "think-chat-turn",
            "version": 1,
            "request_id": spec.request_id,
            "stream_id": turn.stream_id,
            "message_id": turn.acc.message_id,
            "parent_id": spec.parent_id,
            "regenerate": spec.regenerate,
            "continuation": spec.continuation,
            "recovery": spec.recovery,
            "body": spec.body,
            "client_tools": spec.client_tools,
            "message_ids": spec.message_ids,
            "progress_base": spec.progress_base,
            "started_at": time.time(),
        }
        turn.recovery_snapshot = snapshot
        try:
            await agent.stash(snapshot)
        except RuntimeError:
            pass  # not inside a fiber (never the case for queued turns)
        await self.streams.open(turn.stream_id, spec.request_id, turn.acc.message_id, spec.continuation)
        await self.repair_stored(turn)

    async def close_stream(self, turn: Turn, status: str) -> None:
        """Write the turn's last chunks and give its stream row its final status, in one transaction.

        A turn calls this *before* it persists its reply (see ``docs/durability.md``, "Ending a turn"): a crash
        between the two leaves a closed stream that holds every chunk the turn sent, and recovery's
        *finished* path persists the same reply from it (idempotently, under the same id and parent).
        """
        rows = turn.take_unflushed()
        try:
            async with self.agent.host.store.transaction():
                await self.streams.write(turn.stream_id, rows)
                await self.streams.finish(turn.stream_id, status)
        except BaseException:
            turn.restore_unflushed(rows)
            raise
        turn.stream_closed = True

    async def turn_ended(self, turn: Turn, status: str) -> None:
        """After the reply is persisted: settle the stream row (unless already closed) and the bookkeeping."""
        if not turn.stream_closed:
            # A stalled stream is "interrupted", not finished: a crash before its continuation starts is
            # recovered from it (see ``stalled``).
            final = {"error": "error", "recovering": "interrupted"}.get(status, "completed")
            await self.close_stream(turn, final)
        await self.arm_sweep(time.time() + KEEP_FINISHED)
        spec = turn.spec
        if status == "error" and not self.agent.connections and not spec.recovering_after:
            await self._set_terminal(spec.request_id, turn.stream_id, turn.error_text or "error")
        if status != "recovering":
            await self._forget_incident(spec.request_id)
            if spec.recovery:
                await self._set_recovering(None, spec.request_id)

    # -- transcript repair --------------------------------------------------------------------------

    async def repair_stored(self, turn: Turn) -> None:
        """Error every stored tool part of the newest exchange that has no result and waits on nobody."""
        session = self.agent.session
        server = set(turn.server_tool_names)
        for message in reversed(session.active_messages(last=4)):
            if message.get("role") != "assistant":
                continue
            if message.get("id") == turn.spec.continue_id and turn.spec.continuation:
                continue  # a continuation runs its approved calls itself
            repaired = await self.repair(copy.deepcopy(message), server)
            if repaired != message:
                await session.upsert(repaired)
                if turn.spec.continue_id == message.get("id"):
                    turn.reseed(repaired)

    async def repair(self, message: dict[str, Any], server_tools: set[str] | None) -> dict[str, Any]:
        parts = message.get("parts") or []
        open_ids = [
            str(p.get("toolCallId"))
            for p in parts
            if is_tool_part(p)
            and p.get("state") not in _SETTLED
            and p.get("state") != "approval-responded"
            and not waits_on_human(p, server_tools)
        ]
        if not open_ids:
            return message
        ledger = await self.streams.ledger(open_ids)
        hook = self.agent.repair_interrupted_tool_part
        out: list[dict[str, Any]] = []
        for part in parts:
            if str(part.get("toolCallId")) not in open_ids or not is_tool_part(part):
                out.append(part)
                continue
            entry = ledger.get(str(part.get("toolCallId")))
            fixed = dict(part)
            if not isinstance(fixed.get("input"), dict):
                fixed["input"] = {}
            if entry is not None and entry["status"] == "finished":
                if entry.get("error") is not None:
                    fixed.update(state="output-error", errorText=entry["error"])
                else:
                    fixed.update(state="output-available", output=entry.get("output"))
                out.append(fixed)
                continue
            text = STARTED_TOOL_TEXT if entry is not None else INTERRUPTED_TOOL_TEXT
            fixed.update(state="output-error", errorText=text)
            result = hook(fixed)
            if result is not None:
                out.append(result)
        message["parts"] = out
        return message

    # -- recovery -----------------------------------------------------------------------------------

    async def recover(self, ctx: FiberRecoveryContext) -> None:
        agent = self.agent
        await agent._ensure_loaded()
        snap: dict[str, Any] = ctx.snapshot if isinstance(ctx.snapshot, dict) else {}
        request_id = str(snap.get("request_id") or ctx.name[len(TURN_FIBER_PREFIX) :])
        if snap.get("accepted") and not snap.get("stored"):
            return  # the process died before the request's messages were stored: nothing was accepted
        store = agent.host.store
        newer = await store.fetch_one(
            "SELECT 1 AS x FROM ponder_fibers WHERE agent_id = ? AND name = ? AND created_at > ? AND id != ?",
            (agent.id, ctx.name, ctx.created_at, ctx.id),
        )
        if newer is not None or any(s.request_id == request_id for s in agent._inflight):
            return  # a later attempt of the same request owns it
        stream = await self.streams.get(snap["stream_id"]) if snap.get("stream_id") else None
        if stream is None and not snap:
            stream = await self.streams.latest_for(request_id)
        bodies = await self.streams.chunks(stream["id"]) if stream is not None else []
        chunks = [json.loads(b) for b in bodies]
        stream_id = stream["id"] if stream is not None else None
        session = agent.session
        continuation = bool(snap.get("continuation"))
        message_id = snap.get("message_id") or (stream["message_id"] if stream is not None else None)
        seed = session.get(message_id) if continuation and message_id else None
        acc = (
            MessageAccumulator(message=copy.deepcopy(seed), continuation=True)
            if seed
            else MessageAccumulator()
        )
        for chunk in chunks:
            acc.apply(chunk)
        partial = _finalize(acc.snapshot())
        if seed is None and message_id:
            partial["id"] = message_id
        persistable = any(p.get("type") != "step-start" for p in partial.get("parts") or ())
        new_parts = (not continuation and persistable) or (bool(chunks) and continuation)
        finished = stream is not None and (
            stream["status"] not in ("streaming", "interrupted")
            or any(c.get("type") == "finish" for c in chunks)
        )
        parent = snap.get("parent_id")
        server = await server_tool_names(agent)
        if finished:
            if new_parts:
                await self._persist(partial, parent, snap)
            open_stream = (
                stream_id if stream is not None and stream["status"] in ("streaming", "interrupted") else None
            )
            await self._settle(request_id, open_stream, "completed")  # a closed stream keeps its status
            await self._forget_incident(request_id)
            await self._set_recovering(None, request_id)  # set by an earlier attempt the process died in
            return
        if persistable:
            partial = await self.repair(partial, server)
        if not continuation and not persistable:
            leaf = session.active_leaf_id
            if snap and not (
                (snap.get("regenerate") and parent in session)
                or (not snap.get("regenerate") and leaf == parent)
            ):
                logger.info(
                    "%r: interrupted turn %s: the conversation moved on; not retried", agent, request_id
                )
                await self._settle(request_id, stream_id, "error")
                await self._set_recovering(None, request_id)
                return
            kind: Literal["retry", "continue"] = "retry"
        else:
            kind = "continue"
        if new_parts:
            await self._persist(partial, parent, snap)
        if any(waits_on_human(p, server) for p in partial.get("parts") or ()):
            await self._settle(request_id, stream_id, "completed")  # a settled wait: nothing to recover
            await self._set_recovering(None, request_id)
            return
        progress = int(snap.get("progress_base") or 0) + _progress(chunks)
        reason, attempt = await self._charge(request_id, progress)
        budget = self.budget()
        rctx = ChatRecoveryContext(
            request_id=request_id,
            kind=kind,
            attempt=attempt,
            max_attempts=int(budget["max_attempts"]),
            stream_id=stream_id,
            message_id=message_id,
            partial_text=_text(partial),
            partial_parts=copy.deepcopy(partial.get("parts") or []),
            snapshot=snap,
            created_at=ctx.created_at,
            reason=reason,
        )
        if reason is not None:
            await self._exhaust(rctx, partial if (persistable or continuation) else None, parent)
            return
        decision = await _call(agent.on_chat_recovery, rctx)
        if decision == "persist" or (isinstance(decision, ChatRecoveryDecision) and not decision.continue_):
            await self._settle(request_id, stream_id, "completed")
            await self._forget_incident(request_id)
            await self._set_recovering(None, request_id)
            return
        await self._settle(request_id, stream_id, "completed")
        await self._set_recovering(request_id, request_id)
        self.schedule(rctx, snap, progress, continue_id=partial["id"] if kind == "continue" else None)

    def schedule(
        self,
        rctx: ChatRecoveryContext,
        snap: dict[str, Any],
        progress: int,
        *,
        continue_id: str | None,
        accepted_fiber: str | None = None,
    ) -> None:
        from ._turn import TurnSpec

        spec = TurnSpec(
            request_id=rctx.request_id,
            parent_id=snap.get("parent_id"),
            regenerate=bool(snap.get("regenerate")) and continue_id is None,
            continue_id=continue_id,
            body=dict(snap.get("body") or {}),
            message_ids=list(snap.get("message_ids") or []),
            client_tools=snap.get("client_tools"),
            message_id=snap.get("message_id") if continue_id is None else None,
        )
        spec.recovery = True
        spec.progress_base = progress
        spec.accepted_fiber = accepted_fiber
        logger.info(
            "%r: recovering turn %s (%s, attempt %d)", self.agent, rctx.request_id, rctx.kind, rctx.attempt
        )
        self.agent._admit(spec)

    async def stalled(
        self, turn: Turn, message: dict[str, Any] | None
    ) -> Literal["recovering", "exhausted", "declined"]:
        """A stalled turn ended (its partial persisted): schedule a bounded continuation (``"recovering"``).

        ``"exhausted"``: the budget was spent and the terminal message already went out; ``"declined"``:
        ``on_chat_recovery`` chose to keep the partial and stop.
        """
        spec = turn.spec
        await turn.flush()
        progress = spec.progress_base + _progress([json.loads(b) for b in turn.bodies])
        reason, attempt = await self._charge(spec.request_id, progress)
        budget = self.budget()
        snap = {
            "request_id": spec.request_id,
            "parent_id": spec.parent_id,
            "regenerate": spec.regenerate,
            "body": spec.body,
            "client_tools": spec.client_tools,
            "message_ids": spec.message_ids,
        }
        rctx = ChatRecoveryContext(
            request_id=spec.request_id,
            kind="stall",
            attempt=attempt,
            max_attempts=int(budget["max_attempts"]),
            stream_id=turn.stream_id,
            message_id=message["id"] if message else None,
            partial_text=_text(message or {}),
            partial_parts=copy.deepcopy((message or {}).get("parts") or []),
            snapshot=snap,
            created_at=time.time(),
            reason=reason,
        )
        if reason is not None:
            await self._exhaust(rctx, message, spec.parent_id, stored=True)
            spec.recovering_after = True
            return "exhausted"
        decision = await _call(self.agent.on_chat_recovery, rctx)
        if decision == "persist" or (isinstance(decision, ChatRecoveryDecision) and not decision.continue_):
            return "declined"
        spec.recovering_after = True
        await self._set_recovering(spec.request_id, spec.request_id)
        # The continuation lives in memory from the moment this turn's fiber ends until its own fiber starts:
        # a durable record of it (this turn's snapshot, whose stream stays open) covers a crash in between —
        # the next wake continues from the stored chunks. The continuation's fiber replaces the record.
        accepted = None
        if turn.recovery_snapshot is not None:
            record = {**turn.recovery_snapshot, "progress_base": spec.progress_base}
            accepted = await self.agent.record_fiber(f"{TURN_FIBER_PREFIX}{spec.request_id}", record)
        continue_id = message["id"] if message else None
        if continue_id is None:
            self.schedule(rctx, snap, progress, continue_id=None, accepted_fiber=accepted)
        else:
            self.agent.create_task(self._schedule_later(rctx, snap, progress, continue_id, accepted))
        return "recovering"

    async def _schedule_later(
        self,
        rctx: ChatRecoveryContext,
        snap: dict[str, Any],
        progress: int,
        continue_id: str,
        accepted_fiber: str | None,
    ) -> None:
        self.schedule(rctx, snap, progress, continue_id=continue_id, accepted_fiber=accepted_fiber)

    # -- budget -------------------------------------------------------------------------------------

    async def _charge(self, request_id: str, progress: int) -> tuple[str | None, int]:
        """Record one more attempt; return the exhaustion reason (or None) and the attempt number."""
        budget = self.budget()
        now = time.time()
        incidents = dict(self.agent._config.get("recovery_incidents") or {})
        incident = incidents.get(request_id) or {
            "attempt": 0,
            "progress": -1,
            "first_seen": now,
            "last_progress_at": now,
        }
        if progress > incident["progress"]:
            incident["attempt"] = 1
            incident["last_progress_at"] = now
        else:
            incident["attempt"] += 1
        incident["progress"] = progress
        incidents[request_id] = incident
        await self.agent._config.set("recovery_incidents", incidents)
        reason = None
        if now - incident["first_seen"] > float(budget["max_recovery_work"]):
            reason = "work_budget_exceeded"
        elif now - incident["last_progress_at"] > float(budget["no_progress_timeout"]):
            reason = "no_progress_timeout"
        elif incident["attempt"] > int(budget["max_attempts"]):
            reason = "max_attempts_exceeded"
        return reason, incident["attempt"]

    async def _forget_incident(self, request_id: str) -> None:
        incidents = self.agent._config.get("recovery_incidents") or {}
        if request_id in incidents:
            incidents = dict(incidents)
            del incidents[request_id]
            await self.agent._config.set("recovery_incidents", incidents or None)

    async def _exhaust(
        self,
        rctx: ChatRecoveryContext,
        partial: dict[str, Any] | None,
        parent: str | None,
        *,
        stored: bool = False,
    ) -> None:
        agent = self.agent
        text = str(self.budget()["terminal_message"])
        try:
            await _call(agent.on_exhausted, rctx)
        except Exception:
            logger.exception("%r: on_exhausted raised", agent)
        logger.warning("%r: giving up on turn %s (%s)", agent, rctx.request_id, rctx.reason)
        frame: dict[str, Any] = {"type": RESPONSE, "id": rctx.request_id, "body": text, "done": True}
        frame["error"] = True
        frame["outcome"] = "error"
        self._release_waiters(rctx.request_id, frame)
        agent.broadcast(frame)
        session = agent.session
        if partial is not None and partial.get("id") in session:
            message = copy.deepcopy(session.get(partial["id"]))
            message["parts"] = [
                *(message.get("parts") or []),
                {"type": "text", "text": text, "state": "done"},
            ]
            message.setdefault("metadata", {})
            await session.upsert(message)
        else:
            message = {
                "id": new_message_id(),
                "role": "assistant",
                "parts": [{"type": "text", "text": text, "state": "done"}],
                "metadata": {"ponder": {"terminal": True}},
            }
            anchor = parent if parent in session else session.active_leaf_id
            await session.upsert(message, anchor)
        if not stored:
            await self._settle(rctx.request_id, rctx.stream_id, "error", release=False)
        await self._set_terminal(rctx.request_id, rctx.stream_id, text)
        await self._set_recovering(None, rctx.request_id)
        await self._forget_incident(rctx.request_id)
        agent._broadcast_messages()

    # -- stored state -------------------------------------------------------------------------------

    async def _persist(self, partial: dict[str, Any], parent: str | None, snap: dict[str, Any]) -> None:
        session = self.agent.session
        existing = session.get(partial["id"])
        if existing is not None:
            await session.upsert(_merge(existing, partial))
        else:
            anchor = parent if parent is not None and parent in session else session.active_leaf_id
            await session.upsert(partial, anchor)
        self.agent._broadcast_messages()

    async def _settle(
        self, request_id: str, stream_id: str | None, status: str, *, release: bool = True
    ) -> None:
        if stream_id is not None:
            await self.streams.finish(stream_id, status)
            await self.arm_sweep(time.time() + KEEP_FINISHED)
        if release:
            self._release_waiters(
                request_id, {"type": RESPONSE, "id": request_id, "body": "", "done": True, "replay": True}
            )

    def _release_waiters(self, request_id: str, frame: dict[str, Any]) -> None:
        self.orphans.pop(request_id, None)
        for connection_id in self.waiters.pop(request_id, []):
            self.agent._resume.awaiting_ack.discard(connection_id)
            connection = self.agent.get_connection(connection_id)
            if connection is not None and not frame.get("error"):
                connection.send(dict(frame))

    async def _set_terminal(self, request_id: str, stream_id: str | None, body: str) -> None:
        record = {"request_id": request_id, "stream_id": stream_id, "body": body}
        await self.agent._config.set("last_terminal", record)
        bodies = await self.streams.chunks(stream_id) if stream_id else []
        self.terminal = {**record, "bodies": bodies}

    async def _clear_terminal(self) -> None:
        self.terminal = None
        await self.agent._config.set("last_terminal", None)

    async def _set_recovering(self, value: str | None, request_id: str) -> None:
        current = self.agent._config.get("recovering")
        if value is None and current is None:
            return
        await self.agent._config.set("recovering", {"id": value, "at": time.time()} if value else None)
        frame = {"type": "cf_agent_chat_recovering", "recovering": value is not None, "id": request_id}
        self.agent.broadcast(frame)

    def recovering_frame(self) -> dict[str, Any] | None:
        current = self.agent._config.get("recovering")
        if isinstance(current, dict) and time.time() - float(current.get("at", 0)) < RECOVERING_TTL:
            return {"type": "cf_agent_chat_recovering", "recovering": True, "id": current.get("id")}
        return None

    async def clear(self) -> None:
        self.orphans.clear()
        self.waiters.clear()
        self.terminal = None
        await self.streams.clear()

    # -- stream-buffer sweep ------------------------------------------------------------------------

    async def arm_sweep(self, due: float | None = None) -> None:
        """Make sure the agent's one sweep schedule is due by ``due`` (default: when the oldest stored buffer
        becomes reclaimable; nothing when there is none). Idempotent: an earlier schedule already covers a
        later ``due`` (it re-arms itself while buffers remain); a later one is moved forward. Housekeeping:
        a failure is logged, never raised into a turn."""
        try:
            await self._arm_sweep(due)
        except Exception:
            logger.exception("%r: arming the stream-buffer sweep failed", self.agent)

    async def _arm_sweep(self, due: float | None) -> None:
        if due is None:
            due = await self.streams.next_reclaim(spare=self._spared())
            if due is None:
                return
        due = max(due, time.time() + MIN_SWEEP_DELAY)  # a spared (live) buffer never makes it spin
        if self._sweep_due is not None and self._sweep_due <= due:
            return  # armed in this process (one read-free check per turn)
        agent = self.agent
        rows = await agent.host.store.fetch_all(
            "SELECT id, due_at FROM ponder_schedules WHERE agent_id = ? AND callback = ? ORDER BY due_at",
            (agent.id, SWEEP_CALLBACK),
        )
        rows = [row for row in rows if row["id"] != self._sweeping]  # that row goes when it returns
        keep = rows[0] if rows and float(rows[0]["due_at"]) <= due else None
        for row in rows:
            if row is not keep:
                await agent.cancel_schedule(row["id"])  # a later or duplicate one: at most one per agent
        if keep is not None:
            self._sweep_due = float(keep["due_at"])
            return
        await agent.schedule(max(0.0, due - time.time()), SWEEP_CALLBACK)
        self._sweep_due = due

    async def scheduled_sweep(self, schedule_id: str | None) -> int:
        """The sweep schedule came due: delete reclaimable buffers, then re-arm while buffers remain."""
        self._sweeping = schedule_id
        try:
            self._sweep_due = None
            removed = await self.streams.sweep(spare=self._spared())
            await self.arm_sweep()
        finally:
            self._sweeping = None
        return removed

    def _spared(self) -> set[str]:
        """Buffers a sweep must leave alone: those of running turns."""
        return {turn.stream_id for turn in self.agent._turns.values()}

    # -- the resume handshake after a restart -------------------------------------------------------

    def offer(self) -> str | None:
        """The request id a connecting client should be offered when no turn is live."""
        if self.orphans:
            return next(iter(self.orphans))
        if self.terminal is not None:
            return str(self.terminal["request_id"])
        return None

    def replay(self, connection: Connection, request_id: str) -> bool:
        """Replay a stored stream to ``connection``; False if ``request_id`` is not one we hold."""
        if request_id in self.orphans:
            _send_replay(connection, request_id, self.orphans[request_id])
            self.waiters.setdefault(request_id, []).append(connection.id)  # done once recovery decides
            return True
        terminal = self.terminal
        if terminal is not None and terminal["request_id"] == request_id:
            _send_replay(connection, request_id, terminal["bodies"])
            connection.send(
                {"type": RESPONSE, "id": request_id, "body": terminal["body"], "done": True, "error": True}
            )
            self.agent._resume.awaiting_ack.discard(connection.id)
            return True
        return False


# -- helpers ------------------------------------------------------------------------------------------


async def server_tool_names(agent: Think) -> set[str]:
    from ..tools import to_tools

    tools = to_tools(await _call(lambda _: agent.get_tools(), None))
    return {*tools, *agent._builtin_tools()}


async def _call(hook: Any, ctx: Any) -> Any:
    import inspect

    value = hook(ctx)
    if inspect.isawaitable(value):
        value = await value
    return value


_NO_PROGRESS = frozenset({"start", "start-step", "finish-step", "finish"})


def _progress(chunks: list[dict[str, Any]]) -> int:
    """Chunks that carry content (a stream that only opened made no progress)."""
    return sum(1 for chunk in chunks if chunk.get("type") not in _NO_PROGRESS)


def _text(message: dict[str, Any]) -> str:
    return "".join(p.get("text") or "" for p in message.get("parts") or () if p.get("type") == "text")


def _finalize(message: dict[str, Any]) -> dict[str, Any]:
    for part in message.get("parts") or ():
        if part.get("type") in ("text", "reasoning") and part.get("state") == "streaming":
            part["state"] = "done"
    return message


def _merge(existing: dict[str, Any], partial: dict[str, Any]) -> dict[str, Any]:
    """The partial over a stored row of the same id: stored settled tool results win (idempotent re-persist)."""
    settled = {
        p.get("toolCallId"): p
        for p in existing.get("parts") or ()
        if is_tool_part(p) and p.get("state") in _SETTLED
    }
    parts = []
    for part in partial.get("parts") or ():
        if is_tool_part(part) and part.get("toolCallId") in settled and part.get("state") not in _SETTLED:
            part = settled[part.get("toolCallId")]
        parts.append(part)
    if len(parts) < len(existing.get("parts") or ()):
        return existing  # the stored row already holds more than the stream (never shrink it)
    return {**existing, **partial, "parts": parts}


def _send_replay(connection: Connection, request_id: str, bodies: list[str]) -> None:
    """A stored stream's chunks, as the replay frames of the resume handshake."""
    for seq, body in enumerate(bodies):
        connection.send(
            {"type": RESPONSE, "id": request_id, "body": body, "done": False, "replay": True, "seq": seq}
        )
