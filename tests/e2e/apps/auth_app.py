"""The example ``Counter`` behind an ``on_before_connect`` hook that wants ``?token=letmein``.

    ponder serve tests/e2e/apps/auth_app.py:app

Every WebSocket attempt the hook sees is counted per agent name and verdict, and served as JSON at
``GET /_test/attempts`` so a test can confirm from the server side that a rejected client did not
try again. ``POST /_test/kick?name=N`` closes every connection of agent ``N`` with the non-terminal
code 1001, the control case: a stock client does reconnect after that.
"""

from __future__ import annotations

import importlib.util
import sys
from collections import Counter as Tally
from pathlib import Path

from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import Route
from starlette.websockets import WebSocket

from ponder import App

TOKEN = "letmein"
EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "counter.py"


def _load_counter() -> type:
    module = sys.modules.get("counter")
    if module is None:
        spec = importlib.util.spec_from_file_location("counter", EXAMPLE)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules["counter"] = module
        spec.loader.exec_module(module)
    return module.Counter


Counter = _load_counter()

#: (agent name, "accepted" | "rejected") -> number of WebSocket attempts the hook saw.
attempts: Tally[tuple[str, str]] = Tally()


def check_token(websocket: WebSocket, class_name: str, name: str) -> Response | None:
    if websocket.query_params.get("token") == TOKEN:
        attempts[(name, "accepted")] += 1
        return None
    attempts[(name, "rejected")] += 1
    return PlainTextResponse("invalid or missing token", status_code=401)


async def attempt_counts(request: Request) -> Response:
    counts: dict[str, dict[str, int]] = {}
    for (name, verdict), n in attempts.items():
        counts.setdefault(name, {"accepted": 0, "rejected": 0})[verdict] = n
    return JSONResponse(counts)


async def kick(request: Request) -> Response:
    agent = await app.host.get_agent(Counter, request.query_params["name"])
    connections = agent.connections
    for connection in connections:
        connection.close(1001, "kicked by the test")
    return JSONResponse({"kicked": len(connections)})


app = App(
    agents=[Counter],
    on_before_connect=check_token,
    routes=[
        Route("/_test/attempts", attempt_counts, methods=["GET"]),
        Route("/_test/kick", kick, methods=["POST"]),
    ],
)
