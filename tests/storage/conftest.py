"""The store conformance suite runs against every backend listed here.

A new backend (PostgreSQL) plugs in by adding a parameter to ``BACKENDS`` and a branch in
``make_store``; every test in ``tests/storage`` then runs against it unchanged.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest

from ponder.storage import SQLiteStore, Store

BACKENDS = ["sqlite-file", "sqlite-memory"]
#: Backends whose data outlives closing the store (an in-memory database does not).
PERSISTENT_BACKENDS = ["sqlite-file"]


def _factory(backend: str, tmp_path: Path) -> Callable[[], Store]:
    if backend == "sqlite-file":
        return lambda: SQLiteStore(tmp_path / "conformance.sqlite3")
    if backend == "sqlite-memory":
        return lambda: SQLiteStore(":memory:")
    raise AssertionError(backend)


@pytest.fixture(params=BACKENDS)
def make_store(request: pytest.FixtureRequest, tmp_path: Path) -> Callable[[], Store]:
    """A factory of (unopened) stores of one backend."""
    return _factory(request.param, tmp_path)


@pytest.fixture(params=PERSISTENT_BACKENDS)
def make_persistent_store(request: pytest.FixtureRequest, tmp_path: Path) -> Callable[[], Store]:
    """A factory of stores that all open the same database, for close-and-reopen tests."""
    return _factory(request.param, tmp_path)


@pytest.fixture
async def store(make_store: Callable[[], Store]) -> AsyncIterator[Store]:
    s = make_store()
    await s.open()
    yield s
    await s.close()
