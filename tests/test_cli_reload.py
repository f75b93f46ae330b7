"""``ponder serve --reload``: editing the served file restarts the server with the new code on the same store."""

from __future__ import annotations

import json
import time
import urllib.request
from pathlib import Path

import pytest

from tests.support.server import ServerProcess

pytestmark = pytest.mark.slow

APP = """
from starlette.responses import JSONResponse

from ponder import Agent


class Versioned(Agent):
    async def on_request(self, request):
        hits = await self.storage.get("hits", 0) + 1
        await self.storage.put("hits", hits)
        return JSONResponse({{"version": {version}, "hits": hits}})
"""


def get(server: ServerProcess) -> dict[str, int]:
    with urllib.request.urlopen(f"{server.base_url}/agents/versioned/one", timeout=5) as resp:
        return json.loads(resp.read())


def test_editing_the_served_file_reloads_it_and_keeps_the_store(tmp_path: Path) -> None:
    app = tmp_path / "versioned_app.py"
    app.write_text(APP.format(version=1))
    server = ServerProcess(
        app, f"sqlite:///{tmp_path / 'store.sqlite3'}", tmp_path / "server.log", extra_args=["--reload"]
    )
    with server:
        assert get(server) == {"version": 1, "hits": 1}
        app.write_text(APP.format(version=2))
        # uvicorn's reloader polls the file's mtime; poll the server until the new code answers.
        deadline = time.monotonic() + 30
        answer = get(server)
        while answer["version"] == 1 and time.monotonic() < deadline:
            time.sleep(0.1)
            try:
                answer = get(server)
            except OSError:  # between the old worker stopping and the new one listening
                continue
        assert answer["version"] == 2, server.log()
        assert answer["hits"] >= 2  # the same store: the count carried over the reload
        assert "with reload" in server.log()
