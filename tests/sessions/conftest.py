"""Fixtures for the sessions tests: a SQLite store on a temporary file (so sessions can be reopened)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from ponder.sessions import Session
from ponder.storage import SQLiteStore, Store

MakeSession = Callable[..., Awaitable[Session]]


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[Store]:
    s = SQLiteStore(tmp_path / "sessions.sqlite3")
    await s.open()
    yield s
    await s.close()


@pytest.fixture
async def make_session(store: Store) -> AsyncIterator[MakeSession]:
    """``await make_session(agent_id="a", **options)``: an opened session on the shared store."""
    opened: list[Session] = []

    async def make(agent_id: str = "agent-1", **options: Any) -> Session:
        session = Session(store, agent_id, **options)
        await session.open()
        opened.append(session)
        return session

    yield make
    for session in opened:
        await session.close()


@pytest.fixture
async def session(make_session: MakeSession) -> Session:
    return await make_session()
