"""Durable fibers: work whose progress survives a crash of the process running it.

``run_fiber`` writes a row before the work starts and deletes it when the work ends. ``stash``
replaces the row's snapshot as the work progresses. A row that is still there when an agent wakes
belongs to work a dead process never finished: the agent gets it back in ``on_fiber_recovered`` with
the last snapshot, and decides whether to resume, redo or report it.
"""

from __future__ import annotations

import json
from contextvars import ContextVar
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ._json import dumps

if TYPE_CHECKING:
    from ._agent import Agent

__all__ = ["FiberContext", "FiberRecoveryContext", "current_fiber"]


class FiberContext:
    """Handle passed to a running fiber's function."""

    __slots__ = ("_agent", "created_at", "id", "name", "snapshot")

    def __init__(self, agent: Agent, id: str, name: str, created_at: float) -> None:
        self._agent = agent
        self.id = id
        self.name = name
        self.created_at = created_at
        self.snapshot: Any = None

    def __repr__(self) -> str:
        return f"<FiberContext {self.name!r} {self.id}>"

    async def stash(self, data: Any) -> None:
        """Durably replace this fiber's snapshot (JSON-serialisable) before continuing."""
        encoded = dumps(data)
        await self._agent.storage.store.execute(
            "UPDATE ponder_fibers SET snapshot = ? WHERE id = ? AND agent_id = ?",
            (encoded, self.id, self._agent.id),
        )
        self.snapshot = data


@dataclass(frozen=True, slots=True)
class FiberRecoveryContext:
    """An interrupted fiber, as handed to ``Agent.on_fiber_recovered``."""

    id: str
    name: str
    snapshot: Any
    created_at: float
    attempt: int = 1

    @classmethod
    def from_row(cls, row: dict[str, Any], attempt: int = 1) -> FiberRecoveryContext:
        snapshot = json.loads(row["snapshot"]) if row["snapshot"] is not None else None
        return cls(row["id"], row["name"], snapshot, row["created_at"], attempt)


current_fiber: ContextVar[FiberContext | None] = ContextVar("ponder_current_fiber", default=None)
