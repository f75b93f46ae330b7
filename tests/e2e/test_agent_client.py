"""The stock ``AgentClient`` from the ``agents`` npm package against a real ``ponder serve``.

Each scenario starts ``ponder serve`` in a subprocess, runs ``tests/js/agent-client-scenario.mjs``
once under Node (the real client with ``ws``), and the tests below assert on the JSON lines it
printed: what the client reported (``ready``, ``onIdentity``, ``onStateUpdate``, ``call`` results)
and the raw frames it received. Needs ``npm ci --prefix tests/js``.
"""

from __future__ import annotations

import json
import urllib.request
import uuid
from pathlib import Path

import pytest

from tests.support.server import EXAMPLES, REPO, ServerProcess

from ._node import ScenarioRun, node_binary, run_scenario

pytestmark = pytest.mark.slow

SCRIPT = "agent-client-scenario.mjs"
AUTH_APP = REPO / "tests" / "e2e" / "apps" / "auth_app.py"
WATCH_MS = 3000


def _serve(target: str | Path, directory: Path) -> ServerProcess:
    store = "sqlite:////" + str((directory / "store.sqlite3").resolve()).lstrip("/")
    return ServerProcess(target, store, directory / "server.log")


def _server_log(server: ServerProcess) -> str:
    return f"--- server log ({server.log_path})\n{server.log()}"


# One server and one driver run per scenario (module scope, its own store under pytest's temp
# dir); the tests below each check one aspect of that run. The server is stopped before the asserts.


@pytest.fixture(scope="module")
def core_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[ScenarioRun, str]:
    node_binary()  # fail early, with the install hint, when the npm clients are missing
    room = f"room-{uuid.uuid4().hex[:8]}"
    with _serve(EXAMPLES / "counter.py", tmp_path_factory.mktemp("core")) as server:
        run = run_scenario(
            SCRIPT,
            "core",
            "--host",
            f"127.0.0.1:{server.port}",
            "--name",
            room,
            context=lambda: _server_log(server),
        )
    return run, room


@pytest.fixture(scope="module")
def rejected_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[ScenarioRun, str, dict]:
    node_binary()
    room = f"room-{uuid.uuid4().hex[:8]}"
    with _serve(f"{AUTH_APP}:app", tmp_path_factory.mktemp("auth")) as server:
        run = run_scenario(
            SCRIPT,
            "rejected",
            "--host",
            f"127.0.0.1:{server.port}",
            "--name",
            room,
            "--token",
            "letmein",
            "--watch-ms",
            str(WATCH_MS),
            context=lambda: _server_log(server),
        )
        with urllib.request.urlopen(f"{server.base_url}/_test/attempts", timeout=5) as resp:
            attempts = json.loads(resp.read())
    return run, room, attempts


def _completed(run: ScenarioRun) -> None:
    finished = run.returncode == 0 and bool(run.of("done")) and not run.of("error") and not run.of("timeout")
    if not finished:
        pytest.fail(f"the Node driver did not complete its scenario\n{run.report()}", pytrace=False)


# -- core: identity, state, RPC ---------------------------------------------------------------------


def test_driver_completes(core_run: tuple[ScenarioRun, str]) -> None:
    run, _ = core_run
    _completed(run)


def test_identity_and_initial_state(core_run: tuple[ScenarioRun, str]) -> None:
    run, room = core_run
    for client in ("A", "B"):
        frames = run.frames(client)
        # The connect greeting, in order: identity (announcing the state), state, MCP servers.
        assert [f["type"] for f in frames[:3]] == [
            "cf_agent_identity",
            "cf_agent_state",
            "cf_agent_mcp_servers",
        ], run.report()
        assert frames[0] == {
            "type": "cf_agent_identity",
            "name": room,
            "agent": "counter",
            "stateFollows": True,
        }
        assert frames[1] == {"type": "cf_agent_state", "state": {"count": 0}}
        assert frames[2]["mcp"] == {"prompts": [], "resources": [], "servers": {}, "tools": []}
        # What the client itself reports: onIdentity, then agent.name/agent/identified/state once ready.
        assert run.one("identity", client=client)["name"] == room
        assert run.one("identity", client=client)["agent"] == "counter"
        ready = run.one("ready", client=client)
        assert (ready["name"], ready["agent"], ready["identified"]) == (room, "counter", True), run.report()
        assert ready["state"] == {"count": 0}


def test_set_state_is_broadcast_to_the_other_client(core_run: tuple[ScenarioRun, str]) -> None:
    run, _ = core_run
    seen = run.one("broadcast_seen", client="B")
    assert seen["state"] == {"count": 10, "by": "A"}
    assert seen["source"] == "server"
    # The sender is not echoed its own update: the only state A got from the server after its
    # setState is the one the increment below caused.
    assert run.one("a_server_states_after_set")["states"] == [{"count": 15, "by": "A"}], run.report()


def test_callable_and_state_broadcast(core_run: tuple[ScenarioRun, str]) -> None:
    run, _ = core_run
    result = run.one("rpc_result", method="increment")
    assert result["ok"] is True and result["value"] == 15, run.report()
    for client in ("A", "B"):
        assert run.one("increment_broadcast", client=client)["state"] == {"count": 15, "by": "A"}
    greet = run.one("rpc_result", method="greet")
    assert greet["ok"] is True, run.report()
    assert greet["value"] == f"Hello, Ada! I am {run.one('ready', client='A')['name']}."
    rpc_frames = [f for f in run.frames("A") if f["type"] == "rpc"]
    assert (
        rpc_frames[0]["success"] is True and rpc_frames[0]["done"] is True and rpc_frames[0]["result"] == 15
    )


def test_streaming_callable(core_run: tuple[ScenarioRun, str]) -> None:
    run, _ = core_run
    stream = run.one("stream_result", method="count_to")
    assert stream["ok"] is True, run.report()
    assert stream["chunks"] == [1, 2, 3, 4, 5]
    assert stream["error"] is None
    assert stream["done"] is None  # onDone was called (the generator returns no final value)
    frames = [f for f in run.frames("B") if f["type"] == "rpc"]
    assert [(f["done"], f.get("result")) for f in frames] == [
        (False, 1),
        (False, 2),
        (False, 3),
        (False, 4),
        (False, 5),
        (True, None),
    ], run.report()
    assert len({f["id"] for f in frames}) == 1 and all(f["success"] is True for f in frames)


def test_unknown_method_is_a_clear_error(core_run: tuple[ScenarioRun, str]) -> None:
    run, _ = core_run
    result = run.one("rpc_result", method="nope")
    assert result["ok"] is False, run.report()
    assert "nope" in result["error"] and "not callable" in result["error"]
    frame = [f for f in run.frames("A") if f["type"] == "rpc"][-1]
    assert frame == {
        "type": "rpc",
        "id": frame["id"],
        "success": False,
        "error": "Method nope is not callable",
    }


def test_state_is_persisted_for_a_new_client(core_run: tuple[ScenarioRun, str]) -> None:
    run, room = core_run
    ready = run.one("ready", client="C")
    assert (ready["name"], ready["agent"], ready["identified"]) == (room, "counter", True), run.report()
    assert ready["state"] == {"count": 15, "by": "A"}
    # Nothing closed or reconnected during the scenario: one socket per client.
    assert run.one("ws_attempts")["count"] == 3
    assert not run.of("connection_error") and not run.of("state_error")


# -- on_before_connect rejection --------------------------------------------------------------------


def test_rejected_connection_closes_with_1008(rejected_run: tuple[ScenarioRun, str, dict]) -> None:
    run, _, _ = rejected_run
    _completed(run)
    closed = run.one("rejected_close")
    assert closed["code"] == 1008, run.report()
    assert "401" in closed["reason"]
    assert closed["identified"] is False
    assert closed["should_reconnect"] is False
    assert closed["connection_error"] and "401" in closed["connection_error"]
    error = run.one("connection_error", client="R")
    assert error["code"] == 1008
    assert not run.frames("R"), "a rejected client must get no frames (no identity, no state)"


def test_rejected_connection_does_not_reconnect(rejected_run: tuple[ScenarioRun, str, dict]) -> None:
    run, room, attempts = rejected_run
    _completed(run)
    window = run.one("no_reconnect_window")
    assert window["watch_ms"] == WATCH_MS
    assert window["attempts_during"] == 0, run.report()
    assert window["opens_during"] == 0
    assert window["ready_state"] == 3  # CLOSED
    assert window["connection_errors"] == 1
    # A call on the terminally closed client fails at once instead of waiting for a reconnect.
    assert run.one("rpc_after_reject")["ok"] is False
    assert run.one("rpc_after_reject")["error"] == "Connection closed"
    # Control: with the same options the client reconnects quickly after a non-terminal close, so
    # the window above was long enough to catch a reconnect had there been one.
    control = run.one("control_reconnect")
    assert control["close_code"] == 1001
    assert control["reconnect_after_ms"] < WATCH_MS / 2, run.report()
    assert control["connection_errors"] == 0
    # Server side: the hook saw exactly one rejected attempt, and the accepted client's two sockets
    # (first connect + the control reconnect).
    assert attempts == {room: {"accepted": 2, "rejected": 1}}, run.report()
    # The control reconnect kept the connection id (_pk); the rejected client never tried again.
    urls = [e["url"] for e in run.of("ws_attempt")]
    assert len(urls) == 3 and "token=wrong" in urls[0], urls
    assert urls[1] == urls[2] and "token=letmein" in urls[1]


def test_authorized_connection_works(rejected_run: tuple[ScenarioRun, str, dict]) -> None:
    run, room, _ = rejected_run
    ok = run.one("authorized")
    assert (ok["name"], ok["agent"], ok["state"]) == (room, "counter", {"count": 0}), run.report()
    assert ok["greet"] == {"ok": True, "value": f"Hello, Ada! I am {room}."}
