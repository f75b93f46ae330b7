"""Lift the conversation Think kept in ``ponder_think_messages`` into the sessions tables, once per agent.

Why this module exists: before sessions existed, Think stored one row per message in its own simple table.
An agent that wakes on a version with sessions must find its conversation there. The copy runs in Python at
``Session.open()`` rather than in migration SQL because the old table may not exist at all (a new install,
or a store Think never touched), and a migration script cannot say "copy if the table is there". A marker
row in ``ponder_session_meta`` makes it happen once; the copy and the marker commit together. The old rows
are left in place (nothing is deleted outside an explicit clear); a later release may drop the table.
"""

from __future__ import annotations

import json
import logging
from typing import TYPE_CHECKING

from ._io import NewRow, now
from ._rows import encode_message

if TYPE_CHECKING:
    from ..storage import Store
    from ._session import Session

__all__ = ["LEGACY_TABLE", "import_legacy_messages"]

logger = logging.getLogger("ponder.sessions")

LEGACY_TABLE = "ponder_think_messages"
_MARKER = "legacy_imported"


async def _table_exists(store: Store, name: str) -> bool:
    if store.dialect == "postgres":
        row = await store.fetch_one("SELECT to_regclass(?) IS NOT NULL AS present", (name,))
        return bool(row and row["present"])
    row = await store.fetch_one(
        "SELECT 1 AS present FROM sqlite_master WHERE type = 'table' AND name = ?", (name,)
    )
    return row is not None


async def import_legacy_messages(session: Session) -> int:
    """Copy this agent's rows from the legacy table when the session is empty; returns how many were copied."""
    store, agent = session.store, session.agent_id
    io = session._io
    copied: list[NewRow] = []
    if await _table_exists(store, LEGACY_TABLE):
        present = await store.fetch_one(
            "SELECT 1 AS present FROM ponder_session_messages WHERE agent_id = ? LIMIT 1", (agent,)
        )
        if present is None:
            rows = await store.fetch_all(
                f"SELECT id, parent_id, role, message, created_at, seq FROM {LEGACY_TABLE}"
                " WHERE agent_id = ? ORDER BY seq",
                (agent,),
            )
            known: set[str] = set()
            for row in rows:
                parent = row["parent_id"] if row["parent_id"] in known else None
                encoded = encode_message(json.loads(row["message"]), row_budget=session.row_budget)
                copied.append(
                    NewRow(row["id"], parent, int(row["seq"]), row["role"], encoded, row["created_at"])
                )
                known.add(row["id"])
    async with store.transaction():
        if copied:
            await io.insert(copied)
        await io.put_meta(_MARKER, {"rows": len(copied), "at": now()})
    if copied:
        logger.info("%r: imported %d messages from %s", session, len(copied), LEGACY_TABLE)
    return len(copied)
