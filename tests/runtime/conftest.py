from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from ponder import AgentHost


@pytest.fixture
def store_url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'runtime.sqlite3'}"


@pytest.fixture
async def host(store_url: str) -> AsyncIterator[AgentHost]:
    h = AgentHost(store_url, shutdown_timeout=2.0)
    await h.start()
    yield h
    await h.close()
