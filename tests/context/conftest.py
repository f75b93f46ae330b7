"""Fixtures for the context tests: a SQLite store on a temporary file, so a "cold wake" is a new Context."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

import ponder.context  # noqa: F401  (registers the context tables before the store opens)
from ponder.storage import SQLiteStore, Store


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[Store]:
    s = SQLiteStore(tmp_path / "context.sqlite3")
    await s.open()
    yield s
    await s.close()
