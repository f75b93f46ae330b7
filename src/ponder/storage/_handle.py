"""``Storage``: one agent's view of the shared store.

An agent never sees another agent's rows because every method here binds its own ``agent_id``:
the key-value API filters by it, and ``sql()`` binds ``:agent_id`` for the agent's own tables.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from ._store import Row, Store

__all__ = ["Storage"]

_MISSING: Any = object()


class Storage:
    """Durable storage scoped to one agent: a key-value API, SQL and transactions."""

    __slots__ = ("agent_id", "store")

    def __init__(self, store: Store, agent_id: str) -> None:
        self.store = store
        self.agent_id = agent_id

    def __repr__(self) -> str:
        return f"Storage(agent_id={self.agent_id!r})"

    # -- key-value -------------------------------------------------------------------------------

    async def get(self, key: str, default: Any = None) -> Any:
        """The JSON value stored under ``key``, or ``default``."""
        row = await self.store.fetch_one(
            "SELECT value FROM ponder_kv WHERE agent_id = ? AND key = ?", (self.agent_id, key)
        )
        return default if row is None else json.loads(row["value"])

    async def put(self, key: str, value: Any) -> None:
        """Store a JSON-serialisable value under ``key`` (replacing any previous value)."""
        encoded = json.dumps(value, separators=(",", ":"), ensure_ascii=False)
        await self.store.execute(
            "INSERT INTO ponder_kv (agent_id, key, value) VALUES (?, ?, ?) "
            "ON CONFLICT (agent_id, key) DO UPDATE SET value = excluded.value",
            (self.agent_id, key, encoded),
        )

    async def delete(self, key: str) -> bool:
        """Remove ``key``; return whether it existed."""
        changed = await self.store.execute(
            "DELETE FROM ponder_kv WHERE agent_id = ? AND key = ?", (self.agent_id, key)
        )
        return changed > 0

    async def list(self, prefix: str = "") -> dict[str, Any]:
        """Every key starting with ``prefix`` and its value, ordered by key."""
        rows = await self.store.fetch_all(
            "SELECT key, value FROM ponder_kv WHERE agent_id = ? AND substr(key, 1, ?) = ? ORDER BY key",
            (self.agent_id, len(prefix), prefix),
        )
        return {row["key"]: json.loads(row["value"]) for row in rows}

    # -- SQL -------------------------------------------------------------------------------------

    async def sql(self, query: str, *params: Any, **named: Any) -> list[Row]:
        """Run SQL against the shared store and return the rows as dicts.

        Use ``?`` positional parameters, or ``:name`` named ones; with named parameters ``:agent_id``
        is bound to this agent automatically. Keep an ``agent_id`` column in your own tables and
        filter by it — that is what keeps one agent's rows away from another's.
        """
        if params and named:
            raise TypeError("sql() takes positional or named parameters, not both")
        if named or (not params and ":agent_id" in query):
            bound: Any = {"agent_id": self.agent_id, **named}
        else:
            bound = params
        return await self.store.fetch_all(query, bound)

    @asynccontextmanager
    async def transaction(self) -> AsyncIterator[Storage]:
        """Commit every statement inside the block together, or none of them."""
        async with self.store.transaction():
            yield self
