"""``ConfigStore``: one JSON config object per agent, persisted in the agent's rows.

Why this module exists: Think's ``configure(config)`` / ``get_config()`` let an app change an agent's behaviour
at run time (a model tier, a persona) and keep it across restarts. The value must round-trip through JSON
exactly, so it is validated (JSON object, string keys, no NaN/Infinity, no arbitrary objects) before anything
is written: a bad value gets a clear error and the stored config is unchanged.
"""

from __future__ import annotations

import json
import time
from typing import Any

from ..storage import Store

__all__ = ["ConfigError", "ConfigStore"]


class ConfigError(ValueError):
    """A config value cannot be stored as JSON; nothing was written."""


class ConfigStore:
    """The per-agent config row: ``await get()`` → dict (``{}`` when never set), ``await set(config)``."""

    __slots__ = ("agent_id", "store")

    def __init__(self, store: Store, agent_id: str) -> None:
        self.store = store
        self.agent_id = agent_id

    def __repr__(self) -> str:
        return f"ConfigStore(agent_id={self.agent_id!r})"

    @staticmethod
    def encode(config: Any) -> str:
        """The stored JSON text, or ``ConfigError`` saying what is wrong."""
        if not isinstance(config, dict):
            raise ConfigError(f"config must be a JSON object (a dict), got {type(config).__name__}")
        try:
            return json.dumps(config, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
        except (TypeError, ValueError) as exc:
            raise ConfigError(f"config is not JSON-serialisable: {exc}") from None

    async def get(self) -> dict[str, Any]:
        """A fresh copy of the stored config (mutating it changes nothing until ``set``)."""
        row = await self.store.fetch_one(
            "SELECT config FROM ponder_context_config WHERE agent_id = ?", (self.agent_id,)
        )
        if row is None:
            return {}
        value = json.loads(row["config"])
        return value if isinstance(value, dict) else {}

    async def set(self, config: dict[str, Any]) -> None:
        """Replace the stored config with ``config`` after checking it survives JSON unchanged."""
        encoded = self.encode(config)
        if json.loads(encoded) != config:
            raise ConfigError(
                "config does not survive a JSON round trip unchanged (use string keys, lists instead of "
                "tuples and sets, and plain str/int/float/bool/None values)"
            )
        await self.store.execute(
            "INSERT INTO ponder_context_config (agent_id, config, updated_at) VALUES (?, ?, ?) "
            "ON CONFLICT (agent_id) DO UPDATE SET config = excluded.config, updated_at = excluded.updated_at",
            (self.agent_id, encoded, time.time()),
        )

    async def clear(self) -> None:
        await self.store.execute("DELETE FROM ponder_context_config WHERE agent_id = ?", (self.agent_id,))
