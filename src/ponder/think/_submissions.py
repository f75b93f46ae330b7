"""Durable submissions: ``submit_messages`` accepts messages now and runs their turn later, exactly once.

Why this module exists: a webhook, a queue consumer or a flaky client must be able to hand an agent a message
and be told "accepted" only once it is stored (invariant 2), re-send it with the same idempotency key without
a second turn, and see its progress (``pending → running → completed | aborted | skipped | error``). Each
submission is one row of ``ponder_think_submissions``; acceptance is one ``INSERT`` (the submission id and the
idempotency key are unique keys in the store, so concurrent duplicates cannot both win); a single-flight
drainer claims the oldest pending row with one conditional ``UPDATE`` and runs its turn through the agent's
normal turn queue, applying the messages only when that turn reaches the head of the queue (so later
submissions stay invisible to the model until their own turn, and a cancelled queued one never leaves a
message behind). A durable schedule row keeps the drain alive across a crash; ``on_start`` re-queues
``running`` rows whose messages were never applied and ends the others with an error (never a replay).
"""

from __future__ import annotations

import asyncio
import copy
import json
import logging
import time
import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, Literal

from ..chat import new_message_id, sanitize_message, user_message
from ..storage import IntegrityError, Migration, register_migrations
from ._requests import check_message
from ._run_turn import _trailing_user_ids
from ._turn import TurnSpec, maybe_await
from ._types import ChatResult

if TYPE_CHECKING:
    from ._think import Think

    _Base = Think
else:
    _Base = object

__all__ = [
    "SUBMISSION_STATUSES",
    "SubmissionCancel",
    "SubmissionConflictError",
    "SubmissionInspection",
    "Submissions",
]

logger = logging.getLogger("ponder.think")

SubmissionStatus = Literal["pending", "running", "completed", "aborted", "skipped", "error"]
SUBMISSION_STATUSES: tuple[str, ...] = ("pending", "running", "completed", "aborted", "skipped", "error")
TERMINAL_STATUSES = frozenset({"completed", "aborted", "skipped", "error"})

SKIPPED_TEXT = "Submission was skipped by turn reset."
INTERRUPTED_TEXT = "Submission was interrupted after messages were applied."
CONFLICT_TEXT = "submission_id and idempotency_key refer to different submissions"
LIST_DEFAULT_LIMIT = 50
LIST_MAX_LIMIT = 100

register_migrations(
    Migration(
        component="submissions",
        version=1,
        sql="""
        CREATE TABLE IF NOT EXISTS ponder_think_submissions (
            agent_id TEXT NOT NULL,
            submission_id TEXT NOT NULL,
            idempotency_key TEXT,
            request_id TEXT NOT NULL,
            status TEXT NOT NULL,
            messages TEXT NOT NULL,
            metadata TEXT,
            error TEXT,
            message_id TEXT,
            seq INTEGER NOT NULL,
            created_at REAL NOT NULL,
            messages_applied_at REAL,
            started_at REAL,
            completed_at REAL,
            PRIMARY KEY (agent_id, submission_id)
        );
        CREATE UNIQUE INDEX IF NOT EXISTS ponder_think_submissions_key
            ON ponder_think_submissions (agent_id, idempotency_key);
        CREATE INDEX IF NOT EXISTS ponder_think_submissions_status
            ON ponder_think_submissions (agent_id, status, seq)
        """,
    )
)

_COLUMNS = (
    "submission_id, idempotency_key, request_id, status, messages, metadata, error, message_id, seq,"
    " created_at, messages_applied_at, started_at, completed_at"
)


class SubmissionConflictError(ValueError):
    """The ``submission_id`` and ``idempotency_key`` given name two different submissions."""


@dataclass(slots=True)
class SubmissionInspection:
    """What a submission looks like from outside (``inspect_submission``, ``list_submissions``, hooks).

    ``accepted`` is only set on the answer of ``submit_messages``: ``True`` for a new submission, ``False``
    when the id or idempotency key named one that already existed (nothing was stored again).
    """

    submission_id: str
    status: SubmissionStatus
    request_id: str
    idempotency_key: str | None = None
    error: str | None = None
    metadata: Any = None
    message_id: str | None = None
    messages_applied: bool = False
    created_at: float = 0.0
    started_at: float | None = None
    completed_at: float | None = None
    accepted: bool | None = None

    @property
    def terminal(self) -> bool:
        return self.status in TERMINAL_STATUSES

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict (what the HTTP API answers); ``accepted`` only when set."""
        out: dict[str, Any] = {
            "submission_id": self.submission_id,
            "status": self.status,
            "request_id": self.request_id,
            "idempotency_key": self.idempotency_key,
            "error": self.error,
            "metadata": self.metadata,
            "message_id": self.message_id,
            "messages_applied": self.messages_applied,
            "created_at": self.created_at,
            "started_at": self.started_at,
            "completed_at": self.completed_at,
        }
        if self.accepted is not None:
            out["accepted"] = self.accepted
        return out

    @classmethod
    def from_row(cls, row: dict[str, Any], accepted: bool | None = None) -> SubmissionInspection:
        return cls(
            submission_id=row["submission_id"],
            status=row["status"],
            request_id=row["request_id"],
            idempotency_key=row["idempotency_key"],
            error=row["error"],
            metadata=json.loads(row["metadata"]) if row["metadata"] is not None else None,
            message_id=row["message_id"],
            messages_applied=row["messages_applied_at"] is not None,
            created_at=row["created_at"],
            started_at=row["started_at"],
            completed_at=row["completed_at"],
            accepted=accepted,
        )


@dataclass(slots=True)
class SubmissionCancel:
    """``cancel_submission``'s answer: ``outcome`` is ``not_found``, ``already_terminal`` or ``cancelled``."""

    outcome: Literal["not_found", "already_terminal", "cancelled"]
    submission: SubmissionInspection | None = None
    previous_status: str | None = None
    messages_applied: bool = False


@dataclass(slots=True)
class _SubmissionSpec(TurnSpec):
    """A turn spec whose messages are applied at the head of the queue (``prepare`` raises to skip)."""

    submission_id: str = ""
    messages: list[dict[str, Any]] = field(default_factory=list)


class _NotRunning(Exception):
    """The submission was cancelled before its messages were applied."""


def _dumps(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


class Submissions(_Base):
    """The submission part of :class:`Think` (mixed into it; not useful on its own)."""

    #: Seconds after which a ``running`` submission found at start, whose messages were applied and whose
    #: turn left recoverable evidence (a chat-turn fiber row), is ended as an error rather than left to
    #: chat recovery.
    submission_recovery_stale: ClassVar[float] = 15 * 60.0

    _sub_drainer: asyncio.Task[None] | None
    _sub_drain_again: bool
    _sub_drain_armed: bool
    _sub_last_seq: int
    _sub_waiters: dict[str, list[asyncio.Future[SubmissionInspection]]]
    _sub_recovering: dict[str, str]

    def _init_submissions(self) -> None:
        self._sub_drainer = None
        self._sub_drain_again = False
        self._sub_drain_armed = False
        self._sub_last_seq = 0
        self._sub_waiters = {}
        #: request id → submission id of running submissions left to chat recovery at start.
        self._sub_recovering = {}

    # -- hook (override) ------------------------------------------------------------------------------

    async def on_submission_status(self, submission: SubmissionInspection) -> None:
        """Called (and awaited) whenever a submission is created or changes status."""

    # -- accept ---------------------------------------------------------------------------------------

    async def submit_messages(
        self,
        messages: dict[str, Any] | str | Iterable[dict[str, Any] | str],
        *,
        submission_id: str | None = None,
        idempotency_key: str | None = None,
        metadata: Any = None,
    ) -> SubmissionInspection:
        """Durably accept messages for a turn that runs later (FIFO); return the submission.

        The answer comes only after the row is stored. Re-submitting a known ``submission_id`` or
        ``idempotency_key`` returns the existing submission with ``accepted=False`` and stores nothing;
        an id and a key that name different submissions raise :class:`SubmissionConflictError`.
        """
        items = _submission_messages(messages)
        if submission_id is not None and (not isinstance(submission_id, str) or not submission_id):
            raise ValueError("submission_id must be a non-empty string")
        if idempotency_key is not None and (not isinstance(idempotency_key, str) or not idempotency_key):
            raise ValueError("idempotency_key must be a non-empty string")
        try:
            encoded_metadata = _dumps(metadata) if metadata is not None else None
        except (TypeError, ValueError) as exc:
            raise ValueError(f"metadata must be JSON-serialisable: {exc}") from None
        await self._ensure_loaded()
        new_id = submission_id or uuid.uuid4().hex
        now = time.time()
        try:
            await self.host.store.execute(
                "INSERT INTO ponder_think_submissions (agent_id, submission_id, idempotency_key, request_id,"
                " status, messages, metadata, seq, created_at) VALUES (?, ?, ?, ?, 'pending', ?, ?, ?, ?)",
                (
                    self.id,
                    new_id,
                    idempotency_key,
                    new_id,
                    _dumps(items),
                    encoded_metadata,
                    self._next_seq(),
                    now,
                ),
            )
        except IntegrityError:
            existing = await self._existing_submission(submission_id, idempotency_key)
            if existing is None:
                raise
            if existing.status == "pending":
                self._kick_drain()
            return existing
        inspection = SubmissionInspection(
            submission_id=new_id,
            status="pending",
            request_id=new_id,
            idempotency_key=idempotency_key,
            metadata=json.loads(encoded_metadata) if encoded_metadata is not None else None,
            created_at=now,
        )
        await self._arm_drain()
        await self._submission_status(inspection)
        self._kick_drain()
        inspection.accepted = True
        return inspection

    async def _existing_submission(
        self, submission_id: str | None, idempotency_key: str | None
    ) -> SubmissionInspection | None:
        by_id = await self._submission_row(submission_id) if submission_id is not None else None
        by_key = (
            await self.host.store.fetch_one(
                f"SELECT {_COLUMNS} FROM ponder_think_submissions WHERE agent_id = ? AND idempotency_key = ?",
                (self.id, idempotency_key),
            )
            if idempotency_key is not None
            else None
        )
        if by_key is not None and submission_id is not None and by_key["submission_id"] != submission_id:
            raise SubmissionConflictError(CONFLICT_TEXT)
        if (
            by_id is not None
            and idempotency_key is not None
            and by_id["idempotency_key"] is not None
            and by_id["idempotency_key"] != idempotency_key
        ):
            raise SubmissionConflictError(CONFLICT_TEXT)
        row = by_id or by_key
        return SubmissionInspection.from_row(row, accepted=False) if row is not None else None

    def _next_seq(self) -> int:
        """A strictly increasing FIFO position (nanosecond clock, bumped past the last one issued)."""
        seq = max(time.time_ns(), self._sub_last_seq + 1)
        self._sub_last_seq = seq
        return seq

    # -- reading --------------------------------------------------------------------------------------

    async def _submission_row(self, submission_id: str) -> dict[str, Any] | None:
        return await self.host.store.fetch_one(
            f"SELECT {_COLUMNS} FROM ponder_think_submissions WHERE agent_id = ? AND submission_id = ?",
            (self.id, submission_id),
        )

    async def inspect_submission(self, submission_id: str) -> SubmissionInspection | None:
        """The submission with this id, or ``None``."""
        row = await self._submission_row(submission_id)
        return SubmissionInspection.from_row(row) if row is not None else None

    async def list_submissions(
        self, *, status: str | Iterable[str] | None = None, limit: int = LIST_DEFAULT_LIMIT
    ) -> list[SubmissionInspection]:
        """Submissions, oldest first, optionally only those with ``status`` (one or several); at most
        ``limit`` (≤ 100)."""
        limit = max(1, min(int(limit), LIST_MAX_LIMIT))
        statuses = [status] if isinstance(status, str) else list(status) if status is not None else []
        unknown = [s for s in statuses if s not in SUBMISSION_STATUSES]
        if unknown:
            raise ValueError(f"unknown submission status {unknown[0]!r}")
        sql = f"SELECT {_COLUMNS} FROM ponder_think_submissions WHERE agent_id = ?"
        params: list[Any] = [self.id]
        if statuses:
            sql += f" AND status IN ({', '.join('?' for _ in statuses)})"
            params.extend(statuses)
        sql += " ORDER BY seq LIMIT ?"
        params.append(limit)
        rows = await self.host.store.fetch_all(sql, params)
        return [SubmissionInspection.from_row(row) for row in rows]

    async def wait_for_submission(
        self, submission_id: str, *, timeout: float | None = None
    ) -> SubmissionInspection | None:
        """Wait until the submission is terminal (after ``on_submission_status`` ran); ``None`` if unknown.

        On timeout, the current (unfinished) record is returned. In memory only.
        """
        row = await self._submission_row(submission_id)
        if row is None:
            return None
        current = SubmissionInspection.from_row(row)
        if current.terminal:
            return current
        future: asyncio.Future[SubmissionInspection] = asyncio.get_running_loop().create_future()
        self._sub_waiters.setdefault(submission_id, []).append(future)
        try:
            return await asyncio.wait_for(asyncio.shield(future), timeout)
        except TimeoutError:
            return await self.inspect_submission(submission_id)
        finally:
            waiters = self._sub_waiters.get(submission_id)
            if waiters is not None and future in waiters:
                waiters.remove(future)
                if not waiters:
                    del self._sub_waiters[submission_id]

    # -- cancel / delete ------------------------------------------------------------------------------

    async def cancel_submission(self, submission_id: str, reason: str | None = None) -> SubmissionCancel:
        """Cancel a pending or running submission: a pending one never applies its messages, a running one
        has its turn aborted. Terminal and unknown submissions are left alone."""
        row = await self._submission_row(submission_id)
        if row is None:
            return SubmissionCancel("not_found")
        text = reason or "Submission was cancelled."
        now = time.time()
        for previous in ("pending", "running"):
            # One statement decides: a claim, an application or a completion racing with us cannot interleave.
            changed = await self.host.store.execute(
                "UPDATE ponder_think_submissions SET status = 'aborted', error = ?, completed_at = ?"
                " WHERE agent_id = ? AND submission_id = ? AND status = ?",
                (text, now, self.id, submission_id, previous),
            )
            if changed:
                break
        else:
            current = await self.inspect_submission(submission_id)
            return SubmissionCancel("already_terminal", current, current.status if current else None)
        if previous == "running":
            request_id = row["request_id"]
            if not self._abort(request_id):
                self._cancelled.add(request_id)  # claimed but still queued behind another turn
        inspection = await self.inspect_submission(submission_id)
        assert inspection is not None
        await self._submission_status(inspection)
        return SubmissionCancel("cancelled", inspection, previous, inspection.messages_applied)

    async def delete_submission(self, submission_id: str) -> bool:
        """Forget a terminal submission; ``False`` if it is unknown or still pending/running."""
        changed = await self.host.store.execute(
            "DELETE FROM ponder_think_submissions WHERE agent_id = ? AND submission_id = ?"
            " AND status IN ('completed', 'aborted', 'skipped', 'error')",
            (self.id, submission_id),
        )
        return changed > 0

    async def delete_submissions(
        self,
        *,
        status: str | Iterable[str] | None = None,
        completed_before: float | None = None,
        limit: int = 100,
    ) -> int:
        """Forget terminal submissions (never pending/running ones), oldest first; return how many."""
        limit = max(1, min(int(limit), 500))
        statuses = [status] if isinstance(status, str) else list(status) if status is not None else []
        terminal = [s for s in statuses if s in TERMINAL_STATUSES] if statuses else sorted(TERMINAL_STATUSES)
        if not terminal:
            return 0
        marks = ", ".join("?" for _ in terminal)
        sql = f"SELECT submission_id FROM ponder_think_submissions WHERE agent_id = ? AND status IN ({marks})"
        params: list[Any] = [self.id, *terminal]
        if completed_before is not None:
            sql += " AND completed_at < ?"
            params.append(completed_before)
        rows = await self.host.store.fetch_all(sql + " ORDER BY seq LIMIT ?", [*params, limit])
        deleted = 0
        for row in rows:
            deleted += await self.delete_submission(row["submission_id"])
        return deleted

    # -- status ---------------------------------------------------------------------------------------

    async def _submission_status(self, inspection: SubmissionInspection) -> None:
        try:
            await maybe_await(self.on_submission_status(copy.copy(inspection)))
        except Exception:
            logger.exception("%r: on_submission_status raised", self)
        if inspection.terminal:
            for future in self._sub_waiters.pop(inspection.submission_id, ()):
                if not future.done():
                    future.set_result(inspection)

    # -- drain ----------------------------------------------------------------------------------------

    async def _arm_drain(self) -> None:
        """Make sure a durable schedule row will (re)start the drain, even after a crash."""
        if self._sub_drain_armed:
            return
        self._sub_drain_armed = True
        try:
            await self.schedule(0, "_drain_submissions")
        except Exception:
            self._sub_drain_armed = False
            raise

    async def _drain_submissions(self) -> None:
        """The scheduled entry point: run the drainer to completion (the schedule row lives until then)."""
        self._sub_drain_armed = False
        task = self._kick_drain()
        if task is not None:
            await asyncio.shield(task)

    def _kick_drain(self) -> asyncio.Task[None] | None:
        """Start the single-flight drainer, or tell the running one to look again."""
        if self.host.closing:
            return None
        if self._sub_drainer is None:
            self._sub_drain_again = False
            self._sub_drainer = self.create_task(self._drain_loop(), name=f"submissions:{self.id}")
        else:
            self._sub_drain_again = True
        return self._sub_drainer

    async def _drain_loop(self) -> None:
        try:
            while True:
                self._sub_drain_again = False
                row = await self.host.store.fetch_one(
                    f"SELECT {_COLUMNS} FROM ponder_think_submissions WHERE agent_id = ? AND status = 'pending'"
                    " ORDER BY seq LIMIT 1",
                    (self.id,),
                )
                if row is None:
                    if self._sub_drain_again:
                        continue
                    return  # no await between the check and the finally: a later kick starts a new drainer
                now = time.time()
                claimed = await self.host.store.execute(
                    "UPDATE ponder_think_submissions SET status = 'running', started_at = ?"
                    " WHERE agent_id = ? AND submission_id = ? AND status = 'pending'",
                    (now, self.id, row["submission_id"]),
                )
                if not claimed:
                    continue
                row = {**row, "status": "running", "started_at": now}
                await self._submission_status(SubmissionInspection.from_row(row))
                try:
                    await self._run_submission(row)
                except asyncio.CancelledError:
                    raise  # shutdown: the row stays running; the next start sorts it out
                except Exception as exc:
                    logger.exception("%r: running submission %s failed", self, row["submission_id"])
                    await self._finish_submission(
                        row["submission_id"], "error", str(exc) or type(exc).__name__
                    )
        finally:
            self._sub_drainer = None

    async def _run_submission(self, row: dict[str, Any]) -> None:
        try:
            messages = json.loads(row["messages"])
            items = _submission_messages(messages)
        except (ValueError, TypeError) as exc:
            await self._finish_submission(row["submission_id"], "error", f"malformed stored messages: {exc}")
            return
        await self._ensure_loaded()
        spec = _SubmissionSpec(
            request_id=row["request_id"],
            client_tools=self._config.get("client_tools"),
            body=self._config.get("body") or {},
            submission_id=row["submission_id"],
            messages=items,
        )
        result = await self._enqueue(spec)
        await self._finish_from_result(row["submission_id"], result)

    async def _prepare_submission(self, spec: _SubmissionSpec) -> None:
        """At the head of the turn queue: apply the submission's messages, unless it was cancelled."""
        applied = await self.host.store.execute(
            "UPDATE ponder_think_submissions SET messages_applied_at = ?"
            " WHERE agent_id = ? AND submission_id = ? AND status = 'running' AND messages_applied_at IS NULL",
            (time.time(), self.id, spec.submission_id),
        )
        if not applied:
            raise _NotRunning
        last = await self._store_incoming(spec.messages)
        spec.parent_id = last if last is not None else self.session.active_leaf_id
        spec.message_ids = _trailing_user_ids(spec.messages)
        self._broadcast_messages()

    async def _finish_from_result(self, submission_id: str, result: ChatResult) -> None:
        status: str = result.status
        if status == "recovering":
            return  # the recovery continuation ends it (see _settle_recovered_submission)
        error = result.error
        if status == "skipped":
            error = SKIPPED_TEXT
        elif status == "completed" and error:
            status = "error"
        elif status == "aborted":
            error = error or "Submission turn was aborted."
        message_id = result.message.get("id") if result.message else None
        await self._finish_submission(submission_id, status, error, message_id)

    async def _finish_submission(
        self, submission_id: str, status: str, error: str | None, message_id: str | None = None
    ) -> None:
        # Only a running row is finished: a cancellation that got there first is never overwritten.
        changed = await self.host.store.execute(
            "UPDATE ponder_think_submissions SET status = ?, error = ?, message_id = ?, completed_at = ?"
            " WHERE agent_id = ? AND submission_id = ? AND status = 'running'",
            (status, error, message_id, time.time(), self.id, submission_id),
        )
        if changed:
            inspection = await self.inspect_submission(submission_id)
            if inspection is not None:
                await self._submission_status(inspection)

    # -- start-up -------------------------------------------------------------------------------------

    async def _recover_submissions(self) -> None:
        """At wake: re-queue running submissions whose messages never landed, end the others, drain."""
        rows = await self.host.store.fetch_all(
            f"SELECT {_COLUMNS} FROM ponder_think_submissions WHERE agent_id = ? AND status = 'running'"
            " ORDER BY seq",
            (self.id,),
        )
        now = time.time()
        recheck: float | None = None
        for row in rows:
            submission_id = row["submission_id"]
            try:
                ids = [m["id"] for m in _submission_messages(json.loads(row["messages"]))]
            except (ValueError, TypeError, KeyError):
                await self._finish_submission(submission_id, "error", "malformed stored messages")
                continue
            present = [i for i in ids if i in self.session]
            if not present:
                await self.host.store.execute(
                    "UPDATE ponder_think_submissions SET status = 'pending', started_at = NULL,"
                    " messages_applied_at = NULL WHERE agent_id = ? AND submission_id = ? AND status = 'running'",
                    (self.id, submission_id),
                )
                logger.info("%r: re-queued interrupted submission %s", self, submission_id)
                continue
            age = now - float(row["started_at"] or row["created_at"])
            stale = float(self.submission_recovery_stale)
            if age < stale and await self._turn_evidence(row["request_id"]):
                recheck = min(recheck if recheck is not None else stale, stale - age)
                self._sub_recovering[row["request_id"]] = submission_id
                continue  # chat recovery may still finish it; look again when the window has passed
            text = (
                INTERRUPTED_TEXT
                if len(present) == len(ids)
                else ("Submission was interrupted after messages were partially applied.")
            )
            self._sub_recovering.pop(row["request_id"], None)
            await self._finish_submission(submission_id, "error", text)
        if recheck is not None:
            await self.schedule(max(0.0, recheck) + 0.01, "_recheck_submissions")
        pending = await self.host.store.fetch_one(
            "SELECT 1 AS one FROM ponder_think_submissions WHERE agent_id = ? AND status = 'pending' LIMIT 1",
            (self.id,),
        )
        if pending is not None:
            self._kick_drain()

    async def _settle_recovered_submission(self, result: ChatResult, spec: TurnSpec | None = None) -> None:
        """A turn ended: if chat recovery re-ran a submission's turn, the submission ends with it.

        A submission's turn that stalled and was handed to recovery (``"recovering"``) stays running: the
        continuation, which has the same request id, ends it. It is registered here, before any await, so
        the continuation cannot finish first.
        """
        if result.status == "recovering":
            if isinstance(spec, _SubmissionSpec) and spec.submission_id:
                self._sub_recovering[result.request_id] = spec.submission_id
            return
        submission_id = self._sub_recovering.pop(result.request_id, None)
        if submission_id is not None:
            await self._finish_from_result(submission_id, result)

    async def _recheck_submissions(self) -> None:
        if self._sub_drainer is None:  # a live drainer owns its running row
            await self._recover_submissions()

    async def _turn_evidence(self, request_id: str) -> bool:
        from ._think import CHAT_TURN_FIBER_PREFIX

        row = await self.host.store.fetch_one(
            "SELECT 1 AS one FROM ponder_fibers WHERE agent_id = ? AND name = ?",
            (self.id, f"{CHAT_TURN_FIBER_PREFIX}{request_id}"),
        )
        return row is not None


def _submission_messages(value: Any) -> list[dict[str, Any]]:
    """Validate a submission's messages (text, a message, or a non-empty list); give each an id."""
    if isinstance(value, str):
        if not value.strip():
            raise ValueError("a submission needs at least one message")
        return [user_message(value)]
    if isinstance(value, dict):
        value = [value]
    if not isinstance(value, list | tuple) and not (
        isinstance(value, Iterable) and not isinstance(value, bytes | bytearray)
    ):
        raise ValueError("messages must be a text, a UIMessage or a list of UIMessages")
    items: list[dict[str, Any]] = []
    for item in value:
        if isinstance(item, str):
            item = user_message(item)
        elif isinstance(item, dict) and item.get("id") is None:
            item = {**item, "id": new_message_id()}
        check_message(item)
        items.append(sanitize_message(item))
    if not items:
        raise ValueError("a submission needs at least one message")
    return items
