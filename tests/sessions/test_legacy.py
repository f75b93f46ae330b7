"""Migration from Think's simple table (``ponder_think_messages``), once per agent, at open."""

from __future__ import annotations

import json
import time

from ponder.sessions import LEGACY_TABLE, Session
from ponder.storage import SQLiteStore, Store, registered_migrations

from .conftest import MakeSession
from .helpers import assistant, ids, user

_LEGACY_DDL = f"""
CREATE TABLE IF NOT EXISTS {LEGACY_TABLE} (
    agent_id TEXT NOT NULL,
    id TEXT NOT NULL,
    parent_id TEXT,
    role TEXT NOT NULL,
    message TEXT NOT NULL,
    created_at REAL NOT NULL,
    seq INTEGER NOT NULL,
    PRIMARY KEY (agent_id, id)
)
"""


async def _legacy_rows(store: Store, agent_id: str, rows: list[tuple[dict, str | None]]) -> None:
    await store.execute(_LEGACY_DDL)
    for seq, (message, parent) in enumerate(rows, start=1):
        await store.execute(
            f"INSERT INTO {LEGACY_TABLE} (agent_id, id, parent_id, role, message, created_at, seq)"
            " VALUES (?, ?, ?, ?, ?, ?, ?)",
            (agent_id, message["id"], parent, message["role"], json.dumps(message), time.time(), seq),
        )


def test_the_sessions_migration_is_registered() -> None:
    assert any(m.component == "sessions" and m.version == 1 for m in registered_migrations())
    migration = next(m for m in registered_migrations() if m.component == "sessions")
    assert "fts5" in migration.sql and "porter unicode61" in migration.sql
    assert migration.postgres is not None and "tsvector" in migration.postgres and "GIN" in migration.postgres


async def test_legacy_rows_are_copied_once(make_session: MakeSession, store: Store) -> None:
    await _legacy_rows(
        store,
        "agent-1",
        [
            (user("u1", "old question"), None),
            (assistant("a1", "old answer"), "u1"),
            (assistant("a2", "regenerated"), "u1"),
        ],
    )
    await _legacy_rows(store, "someone-else", [(user("x1", "not mine"), None)])
    session = await make_session()
    assert len(session) == 3
    assert ids(session.active_messages()) == ["u1", "a2"]
    assert ids(await session.get_branches("u1")) == ["a1", "a2"]
    assert ids(await session.search("old answer")) == ["a1"]
    # The old rows stay; the copy does not repeat (even after a clear).
    assert len(await store.fetch_all(f"SELECT id FROM {LEGACY_TABLE}")) == 4
    await session.clear()
    again = await make_session()
    assert len(again) == 0
    other = await make_session("someone-else")
    assert ids(other.active_messages()) == ["x1"]


async def test_no_copy_into_a_session_that_already_has_messages(
    make_session: MakeSession, store: Store
) -> None:
    first = Session(store, "agent-1")
    await first.open()
    await first.append(user("new"))
    await store.execute("DELETE FROM ponder_session_meta")  # pretend the marker was never written
    await _legacy_rows(store, "agent-1", [(user("u1", "old"), None)])
    session = await make_session()
    assert ids(session.active_messages()) == ["new"]


async def test_open_works_without_the_legacy_table(make_session: MakeSession, store: Store) -> None:
    await store.execute(f"DROP TABLE IF EXISTS {LEGACY_TABLE}")
    session = await make_session()
    assert len(session) == 0
    await session.append(user("u1"))
    assert len(await make_session()) == 1


async def test_tables_are_created_for_a_store_opened_before_import(tmp_path: object) -> None:
    store = SQLiteStore(":memory:")
    await store.open()  # the sessions migration is registered already; open() applies it
    session = Session(store, "a")
    await session.open()
    await session.append(user("u1"))
    tables = {r["name"] for r in await store.fetch_all("SELECT name FROM sqlite_master WHERE type = 'table'")}
    assert {
        "ponder_session_messages",
        "ponder_session_message_chunks",
        "ponder_session_compactions",
    } <= tables
    assert "ponder_session_fts" in tables
    await store.close()
