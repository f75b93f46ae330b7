"""Durable stream buffers and the tool side-effect ledger.

Why this module exists: invariant 4 (crash anywhere, lose nothing, duplicate nothing) needs the chunks a turn
streamed to outlive the process that streamed them. Every turn opens a *stream* row before its first chunk and
appends its chunks with per-stream sequence numbers (the ``seq`` the wire frames carry), in batches of
:data:`FLUSH_EVERY` and at once after a settled tool result, an approval request or the end of the stream. After
a restart, a ``streaming`` row with no live producer is what recovery (``_recovery.py``) rebuilds the partial
answer from and what the resume handshake replays to a reconnecting client. Finished buffers are swept
:data:`KEEP_FINISHED` seconds after completion, by one durable schedule per agent (``Recovery.arm_sweep``) and at
each wake.

The ledger records server calls of tools declared ``idempotent=False`` (the default of ``Tool``): a ``started``
row before the call, ``finished`` with the result after it. Recovery never re-runs a call; a started-unfinished
one is reported to the model as interrupted, a finished one whose result never reached the stream gets its
result back.
"""

from __future__ import annotations

import json
import time
from collections.abc import Collection
from typing import Any

from ..storage import Migration, Store, register_migrations

__all__ = ["FLUSH_EVERY", "KEEP_FINISHED", "StreamStore"]

register_migrations(
    Migration(
        component="think",
        version=3,
        sql="""
        CREATE TABLE IF NOT EXISTS ponder_think_streams (
            agent_id TEXT NOT NULL,
            id TEXT NOT NULL,
            request_id TEXT NOT NULL,
            status TEXT NOT NULL,
            message_id TEXT,
            continuation INTEGER NOT NULL DEFAULT 0,
            created_at REAL NOT NULL,
            completed_at REAL,
            PRIMARY KEY (agent_id, id)
        );
        CREATE INDEX IF NOT EXISTS ponder_think_streams_request
            ON ponder_think_streams (agent_id, request_id, created_at);
        CREATE TABLE IF NOT EXISTS ponder_think_stream_chunks (
            agent_id TEXT NOT NULL,
            stream_id TEXT NOT NULL,
            seq INTEGER NOT NULL,
            body TEXT NOT NULL,
            PRIMARY KEY (agent_id, stream_id, seq)
        );
        CREATE TABLE IF NOT EXISTS ponder_think_tool_ledger (
            agent_id TEXT NOT NULL,
            tool_call_id TEXT NOT NULL,
            request_id TEXT NOT NULL,
            tool_name TEXT NOT NULL,
            status TEXT NOT NULL,
            output TEXT,
            error TEXT,
            started_at REAL NOT NULL,
            finished_at REAL,
            PRIMARY KEY (agent_id, tool_call_id)
        )
        """,
    )
)

#: Chunks buffered in memory before a batch is written.
FLUSH_EVERY = 10
#: Seconds a completed (or errored) stream buffer is kept for late resumes.
KEEP_FINISHED = 600.0
#: Seconds after which a ``streaming`` buffer nobody recovered is reclaimed.
KEEP_ABANDONED = 3600.0
#: Chunk types after which the buffer is written at once (settled work is never lost).
FLUSH_NOW = frozenset(
    {
        "start",
        "text-start",
        "reasoning-start",
        "tool-input-available",
        "tool-input-error",
        "tool-output-available",
        "tool-output-error",
        "tool-output-denied",
        "tool-approval-request",
        "finish",
        "error",
    }
)


class StreamStore:
    """The stream and ledger rows of one agent (one writer per agent: no read-await-write races)."""

    __slots__ = ("agent_id", "store")

    def __init__(self, store: Store, agent_id: str) -> None:
        self.store = store
        self.agent_id = agent_id

    # -- streams ------------------------------------------------------------------------------------

    async def open(self, stream_id: str, request_id: str, message_id: str | None, continuation: bool) -> None:
        await self.store.execute(
            "INSERT INTO ponder_think_streams (agent_id, id, request_id, status, message_id, continuation,"
            " created_at) VALUES (?, ?, ?, 'streaming', ?, ?, ?)",
            (self.agent_id, stream_id, request_id, message_id, 1 if continuation else 0, time.time()),
        )

    async def write(self, stream_id: str, rows: list[tuple[int, str]]) -> None:
        if rows:
            await self.store.execute_many(
                "INSERT INTO ponder_think_stream_chunks (agent_id, stream_id, seq, body) VALUES (?, ?, ?, ?)"
                " ON CONFLICT (agent_id, stream_id, seq) DO NOTHING",
                [(self.agent_id, stream_id, seq, body) for seq, body in rows],
            )

    async def finish(self, stream_id: str, status: str) -> None:
        await self.store.execute(
            "UPDATE ponder_think_streams SET status = ?, completed_at = ? WHERE agent_id = ? AND id = ?",
            (status, time.time(), self.agent_id, stream_id),
        )

    async def get(self, stream_id: str) -> dict[str, Any] | None:
        return await self.store.fetch_one(
            "SELECT * FROM ponder_think_streams WHERE agent_id = ? AND id = ?", (self.agent_id, stream_id)
        )

    async def latest_for(self, request_id: str) -> dict[str, Any] | None:
        return await self.store.fetch_one(
            "SELECT * FROM ponder_think_streams WHERE agent_id = ? AND request_id = ?"
            " ORDER BY created_at DESC LIMIT 1",
            (self.agent_id, request_id),
        )

    async def streaming(self) -> list[dict[str, Any]]:
        return await self.store.fetch_all(
            "SELECT * FROM ponder_think_streams WHERE agent_id = ? AND status = 'streaming' ORDER BY created_at",
            (self.agent_id,),
        )

    async def chunks(self, stream_id: str) -> list[str]:
        rows = await self.store.fetch_all(
            "SELECT body FROM ponder_think_stream_chunks WHERE agent_id = ? AND stream_id = ? ORDER BY seq",
            (self.agent_id, stream_id),
        )
        return [row["body"] for row in rows]

    async def sweep(
        self,
        keep: float = KEEP_FINISHED,
        abandoned: float = KEEP_ABANDONED,
        *,
        spare: Collection[str] = (),
    ) -> int:
        """Delete finished buffers older than ``keep`` seconds and ``streaming`` ones older than ``abandoned``
        (except the stream ids in ``spare``); return how many."""
        now = time.time()
        rows = await self.store.fetch_all(
            "SELECT id FROM ponder_think_streams WHERE agent_id = ? AND ((status != 'streaming' AND"
            " completed_at < ?) OR (status = 'streaming' AND created_at < ?))",
            (self.agent_id, now - keep, now - abandoned),
        )
        rows = [row for row in rows if row["id"] not in spare]
        for row in rows:
            async with self.store.transaction():
                await self.store.execute(
                    "DELETE FROM ponder_think_stream_chunks WHERE agent_id = ? AND stream_id = ?",
                    (self.agent_id, row["id"]),
                )
                await self.store.execute(
                    "DELETE FROM ponder_think_streams WHERE agent_id = ? AND id = ?",
                    (self.agent_id, row["id"]),
                )
        await self.store.execute(
            "DELETE FROM ponder_think_tool_ledger WHERE agent_id = ? AND started_at < ?",
            (self.agent_id, now - abandoned),
        )
        return len(rows)

    async def next_reclaim(
        self, keep: float = KEEP_FINISHED, abandoned: float = KEEP_ABANDONED, *, spare: Collection[str] = ()
    ) -> float | None:
        """When the first stored buffer (not in ``spare``) becomes reclaimable; None when there is none."""
        rows = await self.store.fetch_all(
            "SELECT id, CASE WHEN status = 'streaming' THEN created_at + ? ELSE COALESCE(completed_at,"
            " created_at) + ? END AS due FROM ponder_think_streams WHERE agent_id = ? ORDER BY due LIMIT ?",
            (abandoned, keep, self.agent_id, len(spare) + 1),
        )
        for row in rows:
            if row["id"] not in spare:
                return float(row["due"])
        return None

    async def clear(self) -> None:
        for table in ("ponder_think_stream_chunks", "ponder_think_streams", "ponder_think_tool_ledger"):
            await self.store.execute(f"DELETE FROM {table} WHERE agent_id = ?", (self.agent_id,))

    # -- tool ledger --------------------------------------------------------------------------------

    async def tool_started(self, request_id: str, tool_call_id: str, tool_name: str) -> None:
        await self.store.execute(
            "INSERT INTO ponder_think_tool_ledger (agent_id, tool_call_id, request_id, tool_name, status,"
            " started_at) VALUES (?, ?, ?, ?, 'started', ?) ON CONFLICT (agent_id, tool_call_id) DO NOTHING",
            (self.agent_id, tool_call_id, request_id, tool_name, time.time()),
        )

    async def tool_finished(self, tool_call_id: str, output: str | None, error: str | None) -> None:
        await self.store.execute(
            "UPDATE ponder_think_tool_ledger SET status = 'finished', output = ?, error = ?, finished_at = ?"
            " WHERE agent_id = ? AND tool_call_id = ?",
            (output, error, time.time(), self.agent_id, tool_call_id),
        )

    async def ledger(self, tool_call_ids: list[str]) -> dict[str, dict[str, Any]]:
        if not tool_call_ids:
            return {}
        marks = ", ".join("?" for _ in tool_call_ids)
        rows = await self.store.fetch_all(
            f"SELECT * FROM ponder_think_tool_ledger WHERE agent_id = ? AND tool_call_id IN ({marks})",
            (self.agent_id, *tool_call_ids),
        )
        out: dict[str, dict[str, Any]] = {}
        for row in rows:
            item = dict(row)
            if item.get("output") is not None:
                item["output"] = json.loads(item["output"])
            out[item["tool_call_id"]] = item
        return out
