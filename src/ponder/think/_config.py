"""Per-agent chat settings that outlive a process: the last client tools and the last custom body.

Why this module exists: a continuation after a client tool result, or a later turn started without a body
(a programmatic ``save_messages``, a turn after a restart), must still expose the tools the browser declared
and see the custom body (``useAgentChat({body})``) of the last request. Cloudflare keeps both in a
``think_config`` table; so does ponder, one row per key, rewritten only when a request changes it.
"""

from __future__ import annotations

import json
from typing import Any

from ..storage import Migration, Store, register_migrations

__all__ = ["ThinkConfig"]

register_migrations(
    Migration(
        component="think",
        version=2,
        sql="""
        CREATE TABLE IF NOT EXISTS ponder_think_config (
            agent_id TEXT NOT NULL,
            key TEXT NOT NULL,
            value TEXT NOT NULL,
            PRIMARY KEY (agent_id, key)
        )
        """,
    )
)


class ThinkConfig:
    """A tiny JSON key-value table for one agent, mirrored in memory (one writer per agent)."""

    def __init__(self, store: Store, agent_id: str) -> None:
        self.store = store
        self.agent_id = agent_id
        self._values: dict[str, Any] = {}

    async def load(self) -> None:
        rows = await self.store.fetch_all(
            "SELECT key, value FROM ponder_think_config WHERE agent_id = ?", (self.agent_id,)
        )
        self._values = {row["key"]: json.loads(row["value"]) for row in rows}

    def get(self, key: str, default: Any = None) -> Any:
        return self._values.get(key, default)

    async def set(self, key: str, value: Any) -> None:
        """Store ``value`` (``None`` deletes the key). Writes nothing when the value is unchanged."""
        if value is None:
            if key in self._values:
                await self.store.execute(
                    "DELETE FROM ponder_think_config WHERE agent_id = ? AND key = ?", (self.agent_id, key)
                )
                del self._values[key]
            return
        if key in self._values and _canonical(self._values[key]) == _canonical(value):
            return
        encoded = json.dumps(value, separators=(",", ":"), ensure_ascii=False)
        await self.store.execute(
            "INSERT INTO ponder_think_config (agent_id, key, value) VALUES (?, ?, ?)"
            " ON CONFLICT (agent_id, key) DO UPDATE SET value = excluded.value",
            (self.agent_id, key, encoded),
        )
        self._values[key] = json.loads(encoded)

    async def clear(self) -> None:
        await self.store.execute("DELETE FROM ponder_think_config WHERE agent_id = ?", (self.agent_id,))
        self._values = {}


def _canonical(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False, sort_keys=True)
