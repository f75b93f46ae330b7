"""``/agents/<class>/<name>/submissions``: accept (202/200), inspect, list, cancel, bad bodies, auth, 404s."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from starlette.responses import JSONResponse

from ponder import Agent
from ponder.server import App
from ponder.testing import ScriptedModel
from ponder.think import Think


class Desk(Think):
    model: Any = None

    def get_model(self) -> Any:
        return type(self).model


class Plain(Agent):
    pass


class Reply:
    def __init__(self, status: int, headers: dict[str, str], body: bytes) -> None:
        self.status = status
        self.headers = headers
        self.body = body

    def json(self) -> Any:
        return json.loads(self.body)


async def call(
    app: App, method: str, path: str, body: Any = None, headers: dict[str, str] | None = None
) -> Reply:
    raw = body if isinstance(body, bytes) else b"" if body is None else json.dumps(body).encode()
    status = 0
    out_headers: dict[str, str] = {}
    chunks: list[bytes] = []
    sent = False
    path, _, query = path.partition("?")

    async def receive() -> dict[str, Any]:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": raw, "more_body": False}
        await asyncio.sleep(3600)
        return {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        nonlocal status, out_headers
        if message["type"] == "http.response.start":
            status = message["status"]
            out_headers = {k.decode(): v.decode() for k, v in message["headers"]}
        elif message["type"] == "http.response.body":
            chunks.append(message.get("body", b""))

    scope = {
        "type": "http",
        "asgi": {"version": "3.0", "spec_version": "2.3"},
        "http_version": "1.1",
        "method": method,
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "query_string": query.encode(),
        "root_path": "",
        "headers": [
            (b"host", b"test"),
            (b"content-type", b"application/json"),
            *((k.lower().encode(), v.encode()) for k, v in (headers or {}).items()),
        ],
        "client": ("127.0.0.1", 5000),
        "server": ("test", 80),
    }
    await app(scope, receive, send)
    return Reply(status, out_headers, b"".join(chunks))


@pytest.fixture
async def app(tmp_path: Path) -> AsyncIterator[App]:
    cls = type("Desk", (Desk,), {"model": ScriptedModel(default="ok")})

    def gate(request: Any, class_name: str, name: str) -> Any:
        if name == "locked":
            return JSONResponse({"error": "forbidden"}, status_code=403)
        return None

    application = App(
        agents=[cls, Plain], store=f"sqlite:///{tmp_path / 's.sqlite3'}", on_before_request=gate
    )
    await application.host.start()
    yield application
    await application.host.close()


BASE = "/agents/desk/room/submissions"


async def wait_terminal(app: App, submission_id: str) -> dict[str, Any]:
    for _ in range(200):
        reply = await call(app, "GET", f"{BASE}/{submission_id}")
        if reply.json()["status"] not in ("pending", "running"):
            return reply.json()
        await asyncio.sleep(0.01)
    raise AssertionError("the submission never finished")


async def test_accept_inspect_and_list(app: App) -> None:
    first = await call(app, "POST", BASE, {"input": "hello"}, {"Idempotency-Key": "abc"})
    assert first.status == 202
    data = first.json()
    assert data["accepted"] is True and data["status"] == "pending" and data["submission_id"]
    again = await call(app, "POST", BASE, {"input": "hello"}, {"Idempotency-Key": "abc"})
    assert again.status == 200 and again.json()["accepted"] is False
    assert again.json()["submission_id"] == data["submission_id"]
    done = await wait_terminal(app, data["submission_id"])
    assert done["status"] == "completed" and done["error"] is None
    assert done["created_at"] and done["started_at"] and done["completed_at"]
    listed = (await call(app, "GET", BASE)).json()["submissions"]
    assert [s["submission_id"] for s in listed] == [data["submission_id"]]
    assert (await call(app, "GET", BASE + "?status=pending")).json()["submissions"] == []
    messages = (await call(app, "GET", "/agents/desk/room/get-messages")).json()
    assert [m["role"] for m in messages] == ["user", "assistant"]


async def test_messages_body_with_submission_id_and_metadata(app: App) -> None:
    message = {"id": "u1", "role": "user", "parts": [{"type": "text", "text": "hi"}]}
    reply = await call(
        app, "POST", BASE, {"messages": [message], "submission_id": "s-1", "metadata": {"k": 1}}
    )
    assert reply.status == 202 and reply.json()["submission_id"] == "s-1"
    assert reply.json()["metadata"] == {"k": 1}
    await wait_terminal(app, "s-1")
    repeat = await call(app, "POST", BASE, {"messages": [message], "submission_id": "s-1"})
    assert repeat.status == 200 and repeat.json()["accepted"] is False


async def test_conflict_is_409(app: App) -> None:
    await call(app, "POST", BASE, {"input": "a", "submission_id": "s1"}, {"Idempotency-Key": "k1"})
    await call(app, "POST", BASE, {"input": "b", "submission_id": "s2"}, {"Idempotency-Key": "k2"})
    reply = await call(app, "POST", BASE, {"input": "c", "submission_id": "s2"}, {"Idempotency-Key": "k1"})
    assert reply.status == 409 and "different submissions" in reply.json()["error"]


@pytest.mark.parametrize(
    "body",
    [
        b"not json",
        b"[1, 2]",
        {},
        {"input": ""},
        {"input": 5},
        {"messages": []},
        {"messages": "hi"},
        {"messages": [1]},
        {"messages": [{"id": "x", "role": "robot", "parts": []}]},
        {"input": "a", "messages": []},
        {"input": "a", "submission_id": ""},
        {"input": "a", "extra": True},
    ],
)
async def test_bad_bodies_are_400_and_store_nothing(app: App, body: Any) -> None:
    reply = await call(app, "POST", BASE, body)
    assert reply.status == 400, reply.body
    assert reply.json()["error"]
    assert (await call(app, "GET", BASE)).json()["submissions"] == []


async def test_unknown_ids_and_methods(app: App) -> None:
    assert (await call(app, "GET", f"{BASE}/nope")).status == 404
    assert (await call(app, "DELETE", f"{BASE}/nope")).status == 404
    assert (await call(app, "PUT", BASE)).status == 405
    assert (await call(app, "POST", f"{BASE}/x")).status == 405
    assert (await call(app, "GET", f"{BASE}/a/b")).status == 404
    assert (await call(app, "GET", BASE + "?status=bogus")).status == 400
    assert (await call(app, "GET", BASE + "?limit=zero")).status == 400


async def test_cancel_over_http(app: App) -> None:
    await app.host.start()
    cls = app.host.agent_class("desk")
    assert cls is not None
    agent = await app.host.get_agent(cls, "room")
    gate = asyncio.Event()

    async def slow(request: Any) -> str:
        await gate.wait()
        return "slow"

    cls.model = ScriptedModel([slow], default="later")  # type: ignore[attr-defined]
    agent._models.clear()
    first = (await call(app, "POST", BASE, {"input": "first"})).json()
    queued = (await call(app, "POST", BASE, {"input": "queued"})).json()
    cancelled = await call(app, "DELETE", f"{BASE}/{queued['submission_id']}")
    assert cancelled.status == 200
    data = cancelled.json()
    assert data["outcome"] == "cancelled" and data["previous_status"] == "pending"
    assert data["submission"]["status"] == "aborted" and data["messages_applied"] is False
    gate.set()
    await wait_terminal(app, first["submission_id"])
    messages = (await call(app, "GET", "/agents/desk/room/get-messages")).json()
    assert [m["parts"][0]["text"] for m in messages if m["role"] == "user"] == ["first"]
    again = await call(app, "DELETE", f"{BASE}/{queued['submission_id']}")
    assert again.json()["outcome"] == "already_terminal"


async def test_auth_hook_runs_first_and_non_think_agents_404(app: App) -> None:
    locked = await call(app, "POST", "/agents/desk/locked/submissions", {"input": "hi"})
    assert locked.status == 403
    cls = app.host.agent_class("desk")
    agent = await app.host.get_agent(cls, "locked")  # type: ignore[arg-type]
    assert await agent.list_submissions() == []  # type: ignore[attr-defined]
    plain = await call(app, "POST", "/agents/plain/x/submissions", {"input": "hi"})
    assert plain.status == 404


async def test_oversized_body_is_413(tmp_path: Path) -> None:
    cls = type("Desk", (Desk,), {"model": ScriptedModel(default="ok")})
    small = App(agents=[cls], store=f"sqlite:///{tmp_path / 'x.sqlite3'}", max_frame_bytes=100)
    try:
        reply = await call(small, "POST", BASE, {"input": "x" * 500})
        assert reply.status == 413
    finally:
        await small.host.close()
