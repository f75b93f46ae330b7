"""``ponder.App`` in process: routing, auth hooks, the connect handshake, state frames, RPC and limits.

Every test drives the real ASGI app through Starlette's ``TestClient`` (which runs the lifespan, so
the host, its store and its background loops are the real ones) on its own SQLite file. What the
agent saw is read back through RPC calls on the same socket: frames of one connection are processed
in order, so the reply to a later call proves every earlier frame was handled. What was stored is
read straight from the SQLite file with the stdlib driver.
"""

from __future__ import annotations

import contextlib
import json
import logging
import sqlite3
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import pytest
from pydantic import BaseModel
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.testclient import TestClient, WebSocketDenialResponse
from starlette.websockets import WebSocket, WebSocketDisconnect

from ponder import Agent, App, Connection, ConnectionInfo, StateUpdateRejected, callable

MCP_FRAME = {
    "type": "cf_agent_mcp_servers",
    "mcp": {"prompts": [], "resources": [], "servers": {}, "tools": []},
}

# -- test agents -----------------------------------------------------------------------------------


@dataclass
class Point:
    x: int
    y: int


class Profile(BaseModel):
    name: str
    tags: list[str]


class Keeper(Agent):
    """State, hooks that record what they saw, and a callable for every RPC shape."""

    initial_state = {"count": 0}

    async def on_start(self) -> None:
        self.updates: list[dict[str, Any]] = []
        self.inbox: list[list[Any]] = []

    async def on_connect(self, connection: Connection, info: ConnectionInfo) -> None:
        if info.query.get("readonly") == "1":
            connection.readonly = True
        if info.query.get("reject") == "1":
            connection.close(4003, "go away")

    def validate_state(self, state: Any, source: Connection | str) -> None:
        if isinstance(state, dict) and state.get("forbidden"):
            raise StateUpdateRejected("forbidden is not allowed")
        if isinstance(state, dict) and state.get("bogus"):
            raise ValueError("any exception rejects the update")

    async def on_state_update(self, state: Any, source: Connection | str) -> None:
        self.updates.append(
            {
                "source": source.id if isinstance(source, Connection) else source,
                "is_live_connection": isinstance(source, Connection)
                and self.get_connection(source.id) is source,
                "state": state,
            }
        )

    async def on_message(self, connection: Connection, message: Any) -> None:
        if isinstance(message, bytes):
            self.inbox.append(["bytes", message.hex()])
        elif isinstance(message, str):
            self.inbox.append(["str", message])
        else:
            self.inbox.append(["json", message])
        if message == "explode":
            raise RuntimeError("on_message exploded")

    async def on_request(self, request: Request) -> Response | None:
        path = request.url.path
        if path.endswith("/teapot"):
            return PlainTextResponse("short and stout", status_code=418, headers={"x-agent": self.name})
        if path.endswith("/boom"):
            raise RuntimeError("on_request exploded")
        if path.endswith("/whoami"):
            return JSONResponse({"user": request.headers.get("x-user"), "name": self.name})
        if path.endswith("/state"):
            return JSONResponse(self.state)
        return None

    @callable
    async def get_state(self) -> Any:
        return self.state

    @callable
    async def add(self, a: int, b: int) -> int:
        return a + b

    @callable
    def mul(self, a: int, b: int) -> int:
        return a * b

    @callable
    def echo(self, *args: Any) -> list[Any]:
        return list(args)

    @callable
    def no_args(self) -> str:
        return "ok"

    @callable
    def profile(self) -> Profile:
        return Profile(name="ada", tags=["x", "y"])

    @callable
    def point(self) -> Point:
        return Point(1, 2)

    @callable
    def opaque(self) -> object:
        return object()

    @callable(streaming=True)
    async def count(self, n: int):
        for i in range(1, n + 1):
            yield i

    @callable
    async def boom(self) -> None:
        raise ValueError("kaboom")

    @callable
    def get_updates(self) -> list[dict[str, Any]]:
        return self.updates

    @callable
    def get_inbox(self) -> list[list[Any]]:
        return self.inbox

    @callable
    def connection_ids(self) -> list[str]:
        return sorted(c.id for c in self.connections)

    @callable
    def lookup(self, pk: str) -> dict[str, Any] | None:
        connection = self.get_connection(pk)
        if connection is None:
            return None
        return {"id": connection.id, "tag": connection.info.query.get("tag")}

    @callable
    def _hidden(self) -> str:  # marked, but private names are never callable
        return "secret"

    def helper(self) -> str:  # public but not marked
        return "helper"


class Blank(Agent):
    """An agent whose state is ``None``: no state frame on connect."""

    @callable
    def connection_ids(self) -> list[str]:
        return sorted(c.id for c in self.connections)


class Parent(Agent):
    initial_state = {"role": "parent"}

    @callable
    def get_state(self) -> Any:
        return self.state


class Child(Agent):
    initial_state = {"role": "child"}

    @callable
    def get_state(self) -> Any:
        return self.state


class Fragile(Agent):
    """Fails on purpose: to start (name ``broken``), while attaching a socket (``?fail=1``), in on_request."""

    initial_state = {"fragile": True}

    async def on_start(self) -> None:
        if self.name == "broken":
            raise RuntimeError("cannot start")

    async def _on_connected(self, connection: Connection) -> None:
        # The extension point protocol layers (Think's chat frames) use; a failure there must not
        # leave a half-attached connection behind.
        if connection.info.query.get("fail") == "1":
            raise RuntimeError("protocol greeting failed")

    async def on_request(self, request: Request) -> Any:
        return {"not": "a response"}

    @callable
    def connection_ids(self) -> list[str]:
        return sorted(c.id for c in self.connections)


AGENTS = [Keeper, Blank, Parent, Child, Fragile]

# -- helpers ---------------------------------------------------------------------------------------


@pytest.fixture
def store_url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'x.db'}"


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    return tmp_path / "x.db"


@pytest.fixture
def client(store_url: str) -> Iterator[TestClient]:
    with TestClient(App(agents=AGENTS, store=store_url)) as test_client:
        yield test_client


def rows(db_path: Path, sql: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Read the store file directly (read-only; WAL lets this run beside the app's connection)."""
    conn = sqlite3.connect(f"file:{db_path}?mode=ro", uri=True)
    try:
        return conn.execute(sql, params).fetchall()
    finally:
        conn.close()


def agent_rows(db_path: Path) -> list[tuple[Any, ...]]:
    return rows(db_path, "SELECT agent_id, class_name, name, parent_id, state FROM ponder_agents")


def recv_message(ws: Any, timeout: float = 5.0) -> dict[str, Any]:
    """The next raw ASGI message the app sent, failing (not hanging) after ``timeout`` seconds."""

    async def receive() -> dict[str, Any]:
        with anyio.fail_after(timeout):
            return await ws._send_rx.receive()

    return ws.portal.call(receive)


def recv(ws: Any, timeout: float = 5.0) -> dict[str, Any]:
    """The next JSON frame; a close raises ``WebSocketDisconnect`` with its code and reason."""
    message = recv_message(ws, timeout)
    ws._raise_on_close(message)
    assert message.get("text") is not None, f"expected a text frame, got {message!r}"
    return json.loads(message["text"])


def handshake(ws: Any) -> list[dict[str, Any]]:
    frames = [recv(ws)]
    while frames[-1]["type"] != "cf_agent_mcp_servers":
        frames.append(recv(ws))
    return frames


def send_rpc(ws: Any, call_id: Any, method: Any, args: Any = None, *, omit_args: bool = False) -> None:
    frame: dict[str, Any] = {"type": "rpc", "id": call_id, "method": method}
    if not omit_args:
        frame["args"] = [] if args is None else args
    ws.send_text(json.dumps(frame))


def call(ws: Any, method: str, *args: Any, call_id: str = "c") -> dict[str, Any]:
    """Call and return the reply, which must be the very next frame on this socket."""
    send_rpc(ws, call_id, method, list(args))
    reply = recv(ws)
    assert reply["type"] == "rpc" and reply["id"] == call_id, f"expected the reply to {call_id}, got {reply}"
    return reply


def result(ws: Any, method: str, *args: Any) -> Any:
    reply = call(ws, method, *args)
    assert reply["success"] is True, reply
    return reply["result"]


def state_frame(state: Any) -> str:
    return json.dumps({"type": "cf_agent_state", "state": state}, ensure_ascii=False)


# -- connect handshake -----------------------------------------------------------------------------


def test_handshake_without_state_sends_identity_then_mcp(client: TestClient) -> None:
    with client.websocket_connect("/agents/blank/b1?_pk=p1") as ws:
        frames = handshake(ws)
        assert frames == [{"type": "cf_agent_identity", "name": "b1", "agent": "blank"}, MCP_FRAME]
        assert "stateFollows" not in frames[0]
        # Nothing else was queued after the handshake: the next frame is the reply to this call.
        assert result(ws, "connection_ids") == ["p1"]


def test_handshake_with_state_sends_identity_state_mcp_in_order(client: TestClient) -> None:
    with client.websocket_connect("/agents/keeper/k1?_pk=p1") as ws:
        assert handshake(ws) == [
            {"type": "cf_agent_identity", "name": "k1", "agent": "keeper", "stateFollows": True},
            {"type": "cf_agent_state", "state": {"count": 0}},
            MCP_FRAME,
        ]
        assert result(ws, "get_state") == {"count": 0}


# -- connection ids ----------------------------------------------------------------------------------


def test_pk_becomes_the_connection_id(client: TestClient) -> None:
    with client.websocket_connect("/agents/keeper/k1?_pk=my-pk&tag=one") as ws:
        handshake(ws)
        assert result(ws, "connection_ids") == ["my-pk"]
        assert result(ws, "lookup", "my-pk") == {"id": "my-pk", "tag": "one"}
        assert result(ws, "lookup", "other") is None


def test_connections_without_pk_get_distinct_ids(client: TestClient) -> None:
    with (
        client.websocket_connect("/agents/blank/b1") as a,
        client.websocket_connect("/agents/blank/b1") as b,
    ):
        handshake(a)
        handshake(b)
        ids = result(a, "connection_ids")
        assert len(ids) == 2 and len(set(ids)) == 2 and all(ids)


def test_same_pk_replaces_the_previous_socket(client: TestClient) -> None:
    with contextlib.ExitStack() as stack:
        with client.websocket_connect("/agents/keeper/k1?_pk=same&tag=first") as first:
            handshake(first)
            second = stack.enter_context(client.websocket_connect("/agents/keeper/k1?_pk=same&tag=second"))
            handshake(second)
            with pytest.raises(WebSocketDisconnect) as closed:
                recv(first)
            assert closed.value.code == 1000
            assert "replaced" in closed.value.reason
            assert result(second, "connection_ids") == ["same"]
            assert result(second, "lookup", "same") == {"id": "same", "tag": "second"}
        # The old socket has now gone away on the client side too; that must not drop the new one.
        assert result(second, "connection_ids") == ["same"]
        assert result(second, "lookup", "same") == {"id": "same", "tag": "second"}


def test_on_connect_can_reject_by_closing(client: TestClient) -> None:
    with client.websocket_connect("/agents/keeper/k1?_pk=r&reject=1") as ws:
        handshake(ws)
        with pytest.raises(WebSocketDisconnect) as closed:
            recv(ws)
        assert (closed.value.code, closed.value.reason) == (4003, "go away")


# -- client state frames -----------------------------------------------------------------------------


def test_client_state_is_persisted_and_survives_a_new_app(store_url: str, db_path: Path) -> None:
    with TestClient(App(agents=AGENTS, store=store_url)) as client:
        with client.websocket_connect("/agents/keeper/k1?_pk=a") as ws:
            handshake(ws)
            ws.send_text(state_frame({"count": 7, "note": "été"}))
            assert result(ws, "get_state") == {"count": 7, "note": "été"}
        assert rows(db_path, "SELECT state FROM ponder_agents WHERE agent_id = 'keeper/k1'") == [
            ('{"count":7,"note":"été"}',)
        ]
    # A fresh app (new host, store reopened) sees the stored state on connect.
    with (
        TestClient(App(agents=AGENTS, store=store_url)) as client,
        client.websocket_connect("/agents/keeper/k1?_pk=b") as ws,
    ):
        frames = handshake(ws)
        assert frames[0]["stateFollows"] is True
        assert frames[1] == {"type": "cf_agent_state", "state": {"count": 7, "note": "été"}}


def test_client_state_is_broadcast_to_others_not_echoed_and_hook_sees_the_connection(
    client: TestClient,
) -> None:
    with (
        client.websocket_connect("/agents/keeper/k1?_pk=a") as a,
        client.websocket_connect("/agents/keeper/k1?_pk=b") as b,
    ):
        handshake(a)
        handshake(b)
        a.send_text(state_frame({"count": 3}))
        assert recv(b) == {"type": "cf_agent_state", "state": {"count": 3}}
        # Not echoed: the next frame the sender gets is the reply to its next call.
        assert result(a, "get_updates") == [
            {"source": "a", "is_live_connection": True, "state": {"count": 3}}
        ]
        assert result(b, "get_state") == {"count": 3}


@pytest.mark.parametrize(
    ("frame", "error"),
    [
        pytest.param(state_frame({"count": 99}), "Connection is readonly", id="readonly"),
        pytest.param(state_frame({"count": 99, "forbidden": True}), "State update rejected", id="rejected"),
        pytest.param(state_frame({"count": 99, "bogus": True}), "State update rejected", id="any-error"),
        pytest.param(json.dumps({"type": "cf_agent_state"}), "State update rejected", id="missing-state"),
        pytest.param(
            json.dumps({"type": "cf_agent_state", "State": {"count": 99}}),
            "State update rejected",
            id="misspelled-state",
        ),
    ],
)
def test_refused_state_update_is_answered_and_changes_nothing(
    client: TestClient, db_path: Path, frame: str, error: str
) -> None:
    readonly = "&readonly=1" if error == "Connection is readonly" else ""
    with (
        client.websocket_connect(f"/agents/keeper/k1?_pk=a{readonly}") as a,
        client.websocket_connect("/agents/keeper/k1?_pk=b") as b,
    ):
        handshake(a)
        handshake(b)
        before = agent_rows(db_path)
        a.send_text(frame)
        assert recv(a) == {"type": "cf_agent_state_error", "error": error}
        assert result(a, "get_state") == {"count": 0}
        assert result(a, "get_updates") == []
        # The other client was sent nothing: its next frame is its own reply.
        assert result(b, "get_state") == {"count": 0}
        assert agent_rows(db_path) == before


def test_readonly_connection_can_still_call_and_receive_broadcasts(client: TestClient) -> None:
    with (
        client.websocket_connect("/agents/keeper/k1?_pk=ro&readonly=1") as ro,
        client.websocket_connect("/agents/keeper/k1?_pk=rw") as rw,
    ):
        handshake(ro)
        handshake(rw)
        rw.send_text(state_frame({"count": 1}))
        assert recv(ro) == {"type": "cf_agent_state", "state": {"count": 1}}
        assert result(ro, "add", 1, 2) == 3


# -- RPC ---------------------------------------------------------------------------------------------


@pytest.fixture
def ws(client: TestClient) -> Iterator[Any]:
    with client.websocket_connect("/agents/keeper/k1?_pk=caller") as socket:
        handshake(socket)
        yield socket


def test_rpc_async_and_sync_methods(ws: Any) -> None:
    assert call(ws, "add", 2, 3, call_id="r1") == {
        "type": "rpc",
        "id": "r1",
        "success": True,
        "done": True,
        "result": 5,
    }
    assert result(ws, "mul", 4, 5) == 20


def test_rpc_args_are_positional_and_keep_their_json_types(ws: Any) -> None:
    args = ["a", 1, 2.5, True, None, [2, "x"], {"k": None}]
    assert result(ws, "echo", *args) == args
    assert result(ws, "echo") == []


def test_rpc_without_args_key_calls_with_no_arguments(ws: Any) -> None:
    send_rpc(ws, "n1", "no_args", omit_args=True)
    assert recv(ws) == {"type": "rpc", "id": "n1", "success": True, "done": True, "result": "ok"}


def test_rpc_serialises_pydantic_models_and_dataclasses(ws: Any) -> None:
    assert result(ws, "profile") == {"name": "ada", "tags": ["x", "y"]}
    assert result(ws, "point") == {"x": 1, "y": 2}


def test_rpc_unserialisable_result_is_an_error(ws: Any) -> None:
    reply = call(ws, "opaque")
    assert reply["success"] is False
    assert "not JSON serialisable" in reply["error"]
    assert result(ws, "add", 1, 1) == 2


def test_streaming_rpc_sends_chunks_then_done(ws: Any) -> None:
    send_rpc(ws, "s1", "count", [3])
    frames = [recv(ws) for _ in range(4)]
    assert frames == [
        {"type": "rpc", "id": "s1", "success": True, "done": False, "result": 1},
        {"type": "rpc", "id": "s1", "success": True, "done": False, "result": 2},
        {"type": "rpc", "id": "s1", "success": True, "done": False, "result": 3},
        {"type": "rpc", "id": "s1", "success": True, "done": True},
    ]
    send_rpc(ws, "s2", "count", [0])
    assert recv(ws) == {"type": "rpc", "id": "s2", "success": True, "done": True}


@pytest.mark.parametrize(
    "method",
    [
        "nope",
        "_hidden",  # marked @callable but private
        "helper",  # public but not marked
        "__init__",
        "__class__",
        "set_state",  # a public Agent method: must not bypass readonly / validate_state
        "on_request",
        "on_message",
        "broadcast",
        "schedule",
        "",
    ],
)
def test_rpc_to_a_method_that_is_not_callable_is_refused(ws: Any, method: str) -> None:
    reply = call(ws, method, {"count": 666})
    assert reply == {
        "type": "rpc",
        "id": "c",
        "success": False,
        "error": f"Method {method} is not callable",
    }
    assert result(ws, "get_state") == {"count": 0}


@pytest.mark.parametrize(
    ("method", "args", "error"),
    [
        ("add", {"a": 1, "b": 2}, "rpc args for add must be an array"),
        ("add", "1,2", "rpc args for add must be an array"),
        ("add", 12, "rpc args for add must be an array"),
        ("add", None, "rpc args for add must be an array"),
        (5, [], "rpc method must be a string"),
        (None, [], "rpc method must be a string"),
        (["add"], [1, 2], "rpc method must be a string"),
    ],
)
def test_rpc_with_a_wrong_shape_is_refused(ws: Any, method: Any, args: Any, error: str) -> None:
    ws.send_text(json.dumps({"type": "rpc", "id": "w", "method": method, "args": args}))
    assert recv(ws) == {"type": "rpc", "id": "w", "success": False, "error": error}
    assert result(ws, "add", 1, 2) == 3


def test_rpc_without_method_key_is_refused(ws: Any) -> None:
    ws.send_text(json.dumps({"type": "rpc", "id": "m", "args": []}))
    assert recv(ws) == {"type": "rpc", "id": "m", "success": False, "error": "rpc method must be a string"}


def test_rpc_method_raising_reports_its_message_and_the_socket_keeps_working(ws: Any) -> None:
    assert call(ws, "boom") == {"type": "rpc", "id": "c", "success": False, "error": "kaboom"}
    assert result(ws, "add", 2, 2) == 4


@pytest.mark.parametrize("args", [[1], [1, 2, 3], []])
def test_rpc_with_the_wrong_number_of_arguments_is_an_error(ws: Any, args: list[int]) -> None:
    reply = call(ws, "add", *args)
    assert reply["success"] is False
    assert reply["error"].startswith("add: ") and "argument" in reply["error"]
    assert result(ws, "add", 2, 2) == 4


def test_rpc_frames_without_a_usable_id_get_no_reply(ws: Any) -> None:
    ws.send_text(json.dumps({"type": "rpc", "method": "add", "args": [1, 2]}))
    for bad_id in ["", 5, None, ["x"], {"id": "x"}]:
        send_rpc(ws, bad_id, "add", [1, 2])
    # No reply to any of them: the next frame is the reply to this call.
    assert call(ws, "add", 2, 3, call_id="after")["result"] == 5
    assert result(ws, "get_inbox") == []  # and none of them fell through to on_message


# -- routing -----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("path", "status", "body"),
    [
        ("/agents/nope/x", 400, "Invalid request"),
        ("/agents/parent/p/sub/nope/c", 400, "Invalid request"),
        ("/agents/x", 404, "Not found"),
        ("/agents/keeper", 404, "Not found"),
    ],
)
def test_http_route_errors(client: TestClient, db_path: Path, path: str, status: int, body: str) -> None:
    response = client.get(path)
    assert (response.status_code, response.text) == (status, body)
    assert agent_rows(db_path) == []


@pytest.mark.parametrize(
    ("path", "status"),
    [("/agents/nope/x", 400), ("/agents/parent/p/sub/nope/c", 400), ("/agents/keeper", 404)],
)
def test_websocket_route_errors_are_denied(client: TestClient, db_path: Path, path: str, status: int) -> None:
    with pytest.raises(WebSocketDenialResponse) as denied, client.websocket_connect(path):
        pass
    assert denied.value.status_code == status
    assert agent_rows(db_path) == []


def test_sub_agent_route_reaches_the_child_with_its_own_state(client: TestClient, db_path: Path) -> None:
    with client.websocket_connect("/agents/parent/p/sub/child/c?_pk=x") as child:
        assert handshake(child) == [
            {"type": "cf_agent_identity", "name": "c", "agent": "child", "stateFollows": True},
            {"type": "cf_agent_state", "state": {"role": "child"}},
            MCP_FRAME,
        ]
        child.send_text(state_frame({"role": "child", "n": 1}))
        assert result(child, "get_state") == {"role": "child", "n": 1}
    with client.websocket_connect("/agents/parent/p?_pk=y") as parent:
        frames = handshake(parent)
        assert frames[0] == {
            "type": "cf_agent_identity",
            "name": "p",
            "agent": "parent",
            "stateFollows": True,
        }
        assert frames[1] == {"type": "cf_agent_state", "state": {"role": "parent"}}
    assert sorted(agent_rows(db_path)) == [
        ("parent/p", "parent", "p", None, None),
        ("parent/p/sub/child/c", "child", "c", "parent/p", '{"role":"child","n":1}'),
    ]


@pytest.mark.parametrize(
    ("segment", "name", "agent_id"),
    [
        ("a%20b", "a b", "keeper/a%20b"),
        ("a%2Fb", "a/b", "keeper/a%2Fb"),
        ("%C3%A9t%C3%A9", "été", "keeper/%C3%A9t%C3%A9"),
        ("100%25", "100%", "keeper/100%25"),
    ],
)
def test_names_are_percent_decoded(
    client: TestClient, db_path: Path, segment: str, name: str, agent_id: str
) -> None:
    with client.websocket_connect(f"/agents/keeper/{segment}?_pk=x") as ws:
        assert handshake(ws)[0]["name"] == name
    assert client.get(f"/agents/keeper/{segment}/whoami").json() == {"user": None, "name": name}
    assert [r[:3] for r in agent_rows(db_path)] == [(agent_id, "keeper", name)]


def test_health(client: TestClient) -> None:
    response = client.get("/_ponder/health")
    assert response.status_code == 200
    assert response.json() == {"ok": True, "agents": ["blank", "child", "fragile", "keeper", "parent"]}


# -- on_request --------------------------------------------------------------------------------------


def test_on_request_returns_the_agents_response(client: TestClient) -> None:
    response = client.get("/agents/keeper/k1/teapot")
    assert (response.status_code, response.text, response.headers["x-agent"]) == (
        418,
        "short and stout",
        "k1",
    )


def test_on_request_none_is_404_json(client: TestClient) -> None:
    response = client.post("/agents/keeper/k1/anything", content=b"x")
    assert response.status_code == 404
    assert response.json() == {"error": "not found"}


def test_on_request_raising_is_500_and_the_app_keeps_serving(
    client: TestClient, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.ERROR, logger="ponder.server"):
        response = client.get("/agents/keeper/k1/boom")
    assert response.status_code == 500
    assert response.json() == {"error": "internal error"}
    assert "on_request exploded" not in response.text  # no internals leak to the client
    assert any("/agents/keeper/k1/boom" in r.getMessage() for r in caplog.records)
    assert client.get("/agents/keeper/k1/teapot").status_code == 418
    with client.websocket_connect("/agents/keeper/k1?_pk=z") as ws:
        handshake(ws)
        assert result(ws, "add", 1, 1) == 2


def test_on_request_returning_a_non_response_is_a_clear_500(
    client: TestClient, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.ERROR, logger="ponder.server"):
        response = client.get("/agents/fragile/f1/anything")
    assert response.status_code == 500
    assert response.json() == {"error": "internal error"}
    assert any("on_request returned dict, not a Response" in r.getMessage() for r in caplog.records)


# -- agents that fail --------------------------------------------------------------------------------


def test_agent_failing_to_start_is_refused_and_others_keep_working(
    client: TestClient, db_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.ERROR, logger="ponder.server"):
        with client.websocket_connect("/agents/fragile/broken?_pk=a") as ws:
            with pytest.raises(WebSocketDisconnect) as closed:
                recv(ws)
        assert (closed.value.code, closed.value.reason) == (1011, "agent failed to start")
        response = client.get("/agents/fragile/broken/x")
        assert (response.status_code, response.json()) == (500, {"error": "internal error"})
    assert "broken" not in {agent.name for agent in client.app.host.live_agents}
    with client.websocket_connect("/agents/fragile/fine?_pk=b") as ws:
        assert handshake(ws)[0] == {
            "type": "cf_agent_identity",
            "name": "fine",
            "agent": "fragile",
            "stateFollows": True,
        }


def test_failure_while_attaching_closes_1011_and_leaves_no_ghost_connection(
    client: TestClient, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.ERROR, logger="ponder.server"):
        with client.websocket_connect("/agents/fragile/f1?_pk=ghost&fail=1") as ws:
            with pytest.raises(WebSocketDisconnect) as closed:
                while True:  # the greeting frames may or may not have gone out before the close
                    recv(ws)
        assert closed.value.code == 1011
    assert any("connection ghost" in r.getMessage() and "failed" in r.getMessage() for r in caplog.records)
    with client.websocket_connect("/agents/fragile/f1?_pk=live") as ws:
        handshake(ws)
        assert result(ws, "connection_ids") == ["live"]


# -- auth hooks --------------------------------------------------------------------------------------


def _request_gate(seen: list[tuple[str, str]]) -> Any:
    def gate(request: Request, class_name: str, name: str) -> Response | Request | None:
        seen.append((class_name, name))
        token = request.headers.get("authorization")
        if token is None:
            return PlainTextResponse("unauthorized", status_code=401)
        if token == "Bearer rewrite":
            headers = [*request.scope["headers"], (b"x-user", b"alice")]
            return Request({**request.scope, "headers": headers}, request.receive)
        return None

    return gate


@pytest.mark.parametrize("style", ["sync", "async"])
def test_on_before_request(store_url: str, db_path: Path, style: str) -> None:
    seen: list[tuple[str, str]] = []
    gate = _request_gate(seen)
    if style == "async":
        sync_gate = gate

        async def gate(request: Request, class_name: str, name: str) -> Response | Request | None:
            return sync_gate(request, class_name, name)

    with TestClient(App(agents=AGENTS, store=store_url, on_before_request=gate)) as client:
        rejected = client.get("/agents/keeper/k1/whoami")
        assert (rejected.status_code, rejected.text) == (401, "unauthorized")
        assert agent_rows(db_path) == []  # the agent was never woken
        assert client.app.host.live_agents == []

        passed = client.get("/agents/keeper/k1/whoami", headers={"authorization": "Bearer ok"})
        assert passed.json() == {"user": None, "name": "k1"}

        rewritten = client.get("/agents/keeper/k1/whoami", headers={"authorization": "Bearer rewrite"})
        assert rewritten.json() == {"user": "alice", "name": "k1"}

        sub = client.get("/agents/parent/p/sub/child/c/whoami")
        assert sub.status_code == 401
        assert [r[0] for r in agent_rows(db_path)] == ["keeper/k1"]
    assert seen == [("Keeper", "k1")] * 3 + [("Child", "c")]


def test_on_before_request_raising_rejects_without_waking(store_url: str, db_path: Path) -> None:
    def gate(request: Request, class_name: str, name: str) -> None:
        raise RuntimeError("auth backend down")

    with TestClient(App(agents=AGENTS, store=store_url, on_before_request=gate)) as client:
        response = client.get("/agents/keeper/k1/whoami")
        assert response.status_code == 500
        assert "auth backend down" not in response.text
        assert agent_rows(db_path) == []


def _connect_gate(seen: list[tuple[str, str]], *, raises: bool = False) -> Any:
    def gate(websocket: WebSocket, class_name: str, name: str) -> Response | None:
        seen.append((class_name, name))
        if raises:
            raise RuntimeError("auth backend down")
        if websocket.query_params.get("token") != "ok":
            return PlainTextResponse("invalid token", status_code=401)
        return None

    return gate


def _assert_rejected(client: TestClient, path: str, reason: str) -> None:
    with client.websocket_connect(path) as ws:
        with pytest.raises(WebSocketDisconnect) as closed:
            recv(ws)
    assert (closed.value.code, closed.value.reason) == (1008, reason)


@pytest.mark.parametrize("style", ["sync", "async"])
def test_on_before_connect(store_url: str, db_path: Path, style: str) -> None:
    seen: list[tuple[str, str]] = []
    gate = _connect_gate(seen)
    if style == "async":
        sync_gate = gate

        async def gate(websocket: WebSocket, class_name: str, name: str) -> Response | None:
            return sync_gate(websocket, class_name, name)

    with TestClient(App(agents=AGENTS, store=store_url, on_before_connect=gate)) as client:
        _assert_rejected(client, "/agents/keeper/k1?_pk=a", "401 invalid token")
        _assert_rejected(client, "/agents/keeper/k1?_pk=a&token=bad", "401 invalid token")
        _assert_rejected(client, "/agents/parent/p/sub/child/c?_pk=a", "401 invalid token")
        assert agent_rows(db_path) == []  # never woken
        assert client.app.host.live_agents == []

        with client.websocket_connect("/agents/keeper/k1?_pk=a&token=ok") as ws:
            assert handshake(ws)[0]["name"] == "k1"
            assert result(ws, "add", 1, 2) == 3
    assert seen == [("Keeper", "k1"), ("Keeper", "k1"), ("Child", "c"), ("Keeper", "k1")]


def test_on_before_connect_raising_rejects(
    store_url: str, db_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    seen: list[tuple[str, str]] = []
    app = App(agents=AGENTS, store=store_url, on_before_connect=_connect_gate(seen, raises=True))
    with TestClient(app) as client, caplog.at_level(logging.ERROR, logger="ponder.server"):
        _assert_rejected(client, "/agents/keeper/k1?_pk=a&token=ok", "500 Internal error")
        assert agent_rows(db_path) == []
    assert seen == [("Keeper", "k1")]
    assert any("on_before_connect raised" in r.getMessage() for r in caplog.records)


# -- frames the protocols do not handle --------------------------------------------------------------


def test_unhandled_frames_reach_on_message(ws: Any, caplog: pytest.LogCaptureFixture) -> None:
    ws.send_text("hello")
    ws.send_bytes(b"\x00\xffraw")
    ws.send_bytes(b'{"type":"rpc","id":"bin","method":"add","args":[1,2]}')  # binary is never parsed
    ws.send_text('{"type":"custom","n":1}')
    ws.send_text("[1,2]")
    ws.send_text('{"type":5}')
    ws.send_text('{"no":"type"}')
    ws.send_text("")
    with caplog.at_level(logging.ERROR, logger="ponder.runtime"):
        ws.send_text("explode")
        assert result(ws, "get_inbox") == [
            ["str", "hello"],
            ["bytes", "00ff726177"],
            ["bytes", b'{"type":"rpc","id":"bin","method":"add","args":[1,2]}'.hex()],
            ["json", {"type": "custom", "n": 1}],
            ["json", [1, 2]],
            ["json", {"type": 5}],
            ["json", {"no": "type"}],
            ["str", ""],
            ["str", "explode"],
        ]
    assert any("on_message raised" in r.getMessage() for r in caplog.records)
    assert result(ws, "add", 2, 2) == 4


# -- frame size limit --------------------------------------------------------------------------------


def _padded_state_frame(size: int) -> str:
    head, tail = '{"type":"cf_agent_state","state":{"count":5,"pad":"', '"}}'
    return head + "x" * (size - len(head) - len(tail)) + tail


def test_oversized_frames_are_refused_and_not_processed(store_url: str, db_path: Path) -> None:
    with (
        TestClient(App(agents=AGENTS, store=store_url, max_frame_bytes=1024)) as client,
        client.websocket_connect("/agents/keeper/k1?_pk=a") as ws,
    ):
        handshake(ws)
        before = agent_rows(db_path)
        text = _padded_state_frame(1025)
        multibyte = state_frame({"count": 5, "pad": "é" * 500})  # fewer than 1024 characters
        assert len(multibyte) < 1024 < len(multibyte.encode("utf-8"))
        for frame, size in [
            (text, 1025),
            (b"\x00" * 5000, 5000),
            (multibyte, len(multibyte.encode("utf-8"))),
        ]:
            if isinstance(frame, bytes):
                ws.send_bytes(frame)
            else:
                ws.send_text(frame)
            reply = recv(ws)
            assert reply["type"] == "cf_agent_error"
            assert f"{size} bytes" in reply["error"] and "1024-byte limit" in reply["error"]
        assert result(ws, "get_state") == {"count": 0}
        assert result(ws, "get_inbox") == []
        assert agent_rows(db_path) == before

        ws.send_text(_padded_state_frame(1024))  # exactly at the limit is allowed
        assert result(ws, "get_state")["count"] == 5


# -- isolation ---------------------------------------------------------------------------------------


def test_agents_with_different_names_never_see_each_others_state(client: TestClient, db_path: Path) -> None:
    with (
        client.websocket_connect("/agents/keeper/alice?_pk=a") as alice,
        client.websocket_connect("/agents/keeper/bob?_pk=b") as bob,
    ):
        handshake(alice)
        handshake(bob)
        alice.send_text(state_frame({"count": 42, "secret": "alice's"}))
        assert result(alice, "get_state") == {"count": 42, "secret": "alice's"}
        # Bob was sent no state frame (the next frame is his reply) and his state is his own.
        assert result(bob, "get_state") == {"count": 0}
        assert result(bob, "get_updates") == []
        assert result(bob, "connection_ids") == ["b"]
        assert result(bob, "lookup", "a") is None
    with client.websocket_connect("/agents/keeper/bob?_pk=b2") as bob:
        assert handshake(bob)[1] == {"type": "cf_agent_state", "state": {"count": 0}}
    with client.websocket_connect("/agents/keeper/alice?_pk=a2") as alice:
        assert handshake(alice)[1] == {"type": "cf_agent_state", "state": {"count": 42, "secret": "alice's"}}
    assert client.get("/agents/keeper/bob/state").json() == {"count": 0}
    # A sub-agent named like a top-level agent is another agent too.
    with client.websocket_connect("/agents/parent/alice/sub/child/bob?_pk=c") as child:
        assert handshake(child)[1] == {"type": "cf_agent_state", "state": {"role": "child"}}
    states = dict(rows(db_path, "SELECT agent_id, state FROM ponder_agents"))
    assert states["keeper/alice"] == '{"count":42,"secret":"alice\'s"}'
    assert states["keeper/bob"] is None
