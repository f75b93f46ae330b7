"""The message tree: every chat message of an agent, linked to its parent.

Why this module exists: history is append-only (DESIGN.md invariant 1). A message is upserted by id, never
rewritten as part of a snapshot; regenerating an answer adds a sibling under the same parent, and the
conversation shown is the path from the root to the newest leaf. One row per message, keyed by
``(agent_id, id)``; an in-memory index mirrors the rows so reading the active path costs no query.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import Any

from ..storage import Migration, Store, register_migrations

__all__ = ["MessageTree"]

register_migrations(
    Migration(
        component="think",
        version=1,
        sql="""
        CREATE TABLE IF NOT EXISTS ponder_think_messages (
            agent_id TEXT NOT NULL,
            id TEXT NOT NULL,
            parent_id TEXT,
            role TEXT NOT NULL,
            message TEXT NOT NULL,
            created_at REAL NOT NULL,
            seq INTEGER NOT NULL,
            PRIMARY KEY (agent_id, id)
        );
        CREATE INDEX IF NOT EXISTS ponder_think_messages_seq ON ponder_think_messages (agent_id, seq)
        """,
    )
)


def _dumps(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


@dataclass(slots=True)
class _Node:
    id: str
    parent_id: str | None
    seq: int
    message: dict[str, Any]


class MessageTree:
    """One agent's messages: a parent-linked tree with an in-memory index (one writer per agent)."""

    def __init__(self, store: Store, agent_id: str) -> None:
        self.store = store
        self.agent_id = agent_id
        self._nodes: dict[str, _Node] = {}
        self._children: dict[str | None, list[str]] = {}
        self._path: list[_Node] | None = None
        self._leaf: _Node | None = None
        self._next_seq = 1
        self.loaded = False

    async def load(self) -> None:
        rows = await self.store.fetch_all(
            "SELECT id, parent_id, message, seq FROM ponder_think_messages WHERE agent_id = ? ORDER BY seq",
            (self.agent_id,),
        )
        self._reset()
        for row in rows:
            node = _Node(row["id"], row["parent_id"], row["seq"], json.loads(row["message"]))
            self._index(node)
        self.loaded = True

    def _reset(self) -> None:
        self._nodes = {}
        self._children = {}
        self._path = None
        self._leaf = None
        self._next_seq = 1

    def _index(self, node: _Node) -> None:
        self._nodes[node.id] = node
        self._children.setdefault(node.parent_id, []).append(node.id)
        self._next_seq = max(self._next_seq, node.seq + 1)
        if self._leaf is None or node.seq >= self._leaf.seq:
            if self._path is not None:
                if self._leaf is not None and node.parent_id == self._leaf.id:
                    self._path.append(node)
                elif self._leaf is None and node.parent_id is None:
                    self._path = [node]
                else:
                    self._path = None
            self._leaf = node

    # -- reading ---------------------------------------------------------------------------------

    @property
    def leaf_id(self) -> str | None:
        return self._leaf.id if self._leaf else None

    def __contains__(self, message_id: object) -> bool:
        return message_id in self._nodes

    def __len__(self) -> int:
        return len(self._nodes)

    def get(self, message_id: str) -> dict[str, Any] | None:
        node = self._nodes.get(message_id)
        return node.message if node else None

    def parent_of(self, message_id: str) -> str | None:
        node = self._nodes.get(message_id)
        return node.parent_id if node else None

    def path(self) -> list[dict[str, Any]]:
        """The active conversation: root → newest leaf (the live dicts; copy before handing out)."""
        if self._path is None:
            self._path = self._walk(self._leaf.id) if self._leaf else []
        return [node.message for node in self._path]

    def path_to(self, message_id: str | None) -> list[dict[str, Any]]:
        """The conversation ending at ``message_id`` (the active path when it is ``None``)."""
        if message_id is None or (self._leaf is not None and message_id == self._leaf.id):
            return self.path()
        return [node.message for node in self._walk(message_id)]

    def _walk(self, message_id: str) -> list[_Node]:
        chain: list[_Node] = []
        seen: set[str] = set()
        node = self._nodes.get(message_id)
        while node is not None and node.id not in seen:
            seen.add(node.id)
            chain.append(node)
            node = self._nodes.get(node.parent_id) if node.parent_id else None
        chain.reverse()
        return chain

    def children(self, message_id: str | None) -> list[dict[str, Any]]:
        """Direct children of a message (siblings of a regenerated answer), oldest first."""
        return [self._nodes[i].message for i in self._children.get(message_id, [])]

    # -- writing ---------------------------------------------------------------------------------

    async def upsert(self, message: dict[str, Any], parent_id: str | None = None) -> bool:
        """Store a message: update it in place when its id exists, else append it under ``parent_id``.

        Returns True when the message was new.
        """
        message_id = message["id"]
        existing = self._nodes.get(message_id)
        encoded = _dumps(message)
        if existing is not None:
            await self.store.execute(
                "UPDATE ponder_think_messages SET message = ?, role = ? WHERE agent_id = ? AND id = ?",
                (encoded, str(message.get("role", "")), self.agent_id, message_id),
            )
            existing.message = json.loads(encoded)  # a cached path holds the node, so it sees this too
            return False
        if parent_id is not None and parent_id not in self._nodes:
            raise KeyError(f"unknown parent message id {parent_id!r}")
        seq = self._next_seq
        await self.store.execute(
            "INSERT INTO ponder_think_messages (agent_id, id, parent_id, role, message, created_at, seq)"
            " VALUES (?, ?, ?, ?, ?, ?, ?)"
            " ON CONFLICT (agent_id, id) DO UPDATE SET message = excluded.message",
            (self.agent_id, message_id, parent_id, str(message.get("role", "")), encoded, time.time(), seq),
        )
        self._index(_Node(message_id, parent_id, seq, json.loads(encoded)))
        return True

    async def clear(self) -> None:
        await self.store.execute("DELETE FROM ponder_think_messages WHERE agent_id = ?", (self.agent_id,))
        self._reset()
