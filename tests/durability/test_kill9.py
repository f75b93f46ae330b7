"""State, schedules and fibers survive a real ``kill -9`` of the server process.

The server runs ``examples/counter.py`` in a subprocess. After SIGKILL nothing in the process had a
chance to run: whatever the restarted server finds is what was durably committed before the crash.
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
import time
from pathlib import Path
from typing import Any

import pytest

from tests.support.server import EXAMPLES, ServerProcess
from tests.support.wsclient import AgentSocket

pytestmark = pytest.mark.slow


def read_rows(db: Path) -> dict[str, list[dict[str, Any]]]:
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    conn.row_factory = sqlite3.Row
    try:
        return {
            table: [dict(r) for r in conn.execute(f"SELECT * FROM {table}")]
            for table in ("ponder_agents", "ponder_kv", "ponder_schedules", "ponder_fibers")
        }
    finally:
        conn.close()


def kv(rows: dict[str, list[dict[str, Any]]], agent_id: str, key: str) -> Any:
    for row in rows["ponder_kv"]:
        if row["agent_id"] == agent_id and row["key"] == key:
            return json.loads(row["value"])
    return None


async def wait_until(condition: Any, limit: float, what: str, server: ServerProcess) -> None:
    """Poll the store of another process until ``condition()`` holds (no event crosses processes)."""
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        if condition():
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}\n{server.log()}")


async def test_state_schedule_and_fiber_survive_kill_9(tmp_path: Path) -> None:
    db = tmp_path / "crash.sqlite3"
    store = f"sqlite:///{db}"
    server = ServerProcess(EXAMPLES / "counter.py", store, tmp_path / "server.log").start()
    try:
        sock = await AgentSocket.open(server.ws_url, "counter", "crash")
        await sock.handshake()
        assert await sock.call("increment", 5) == 5
        await sock.call("remind_in", 1.0, "while down")
        await sock.call("start_job", 1000, 0.05)
        await sock.wait_for(lambda f: f.get("type") == "job_progress" and f["step"] >= 3)
        server.kill9()
    finally:
        if server.proc and server.proc.poll() is None:
            server.kill9()

    crashed = read_rows(db)
    [fiber] = crashed["ponder_fibers"]
    stashed = json.loads(fiber["snapshot"])
    assert fiber["name"] == "job" and stashed["step"] >= 3
    [schedule] = crashed["ponder_schedules"]
    assert schedule["callback"] == "remind"
    assert kv(crashed, "counter/crash", "reminders") is None

    # Let the schedule come due while the server is down (the passage of time is what is tested).
    await asyncio.sleep(max(0.0, schedule["due_at"] - time.time()) + 0.2)

    restarted = ServerProcess(EXAMPLES / "counter.py", store, tmp_path / "server2.log").start()
    try:
        # No client connects: recovery and the overdue schedule must not wait for one.
        await wait_until(
            lambda: (
                kv(read_rows(db), "counter/crash", "recovered") is not None
                and kv(read_rows(db), "counter/crash", "reminders") is not None
                and not read_rows(db)["ponder_fibers"]
                and not read_rows(db)["ponder_schedules"]
            ),
            15,
            "recovery and the overdue schedule after restart",
            restarted,
        )
        rows = read_rows(db)
        assert kv(rows, "counter/crash", "reminders") == ["while down"]  # ran exactly once
        assert kv(rows, "counter/crash", "recovered") == {"name": "job", "snapshot": stashed}

        sock = await AgentSocket.open(restarted.ws_url, "counter", "crash")
        frames = await sock.handshake()
        assert frames[0] == {
            "type": "cf_agent_identity",
            "name": "crash",
            "agent": "counter",
            "stateFollows": True,
        }
        assert frames[1] == {"type": "cf_agent_state", "state": {"count": 5}}
        assert await sock.call("reminders") == ["while down"]
        assert await sock.call("increment", 1) == 6
        await sock.close()
    finally:
        restarted.terminate()
    assert kv(read_rows(db), "counter/crash", "reminders") == ["while down"]


async def test_sigterm_lets_short_work_finish_and_checkpoints_long_work(tmp_path: Path) -> None:
    db = tmp_path / "graceful.sqlite3"
    store = f"sqlite:///{db}"
    server = ServerProcess(
        EXAMPLES / "counter.py", store, tmp_path / "server.log", extra_args=["--shutdown-timeout", "3"]
    ).start()
    sock = await AgentSocket.open(server.ws_url, "counter", "short")
    await sock.handshake()
    await sock.call("start_job", 3, 0.3)  # finishes within the shutdown grace period
    await sock.wait_for(lambda f: f.get("type") == "job_progress")
    long = await AgentSocket.open(server.ws_url, "counter", "long")
    await long.handshake()
    await long.call("start_job", 10_000, 0.05)  # cannot finish: it is checkpointed instead
    await long.wait_for(lambda f: f.get("type") == "job_progress" and f["step"] >= 2)
    # uvicorn shuts down gracefully, then re-raises SIGTERM so the exit status reports it.
    assert server.terminate() in (0, -15)
    assert "Application shutdown complete" in server.log()
    rows = read_rows(db)
    assert kv(rows, "counter/short", "job_done") == 3
    assert [(f["agent_id"], f["name"]) for f in rows["ponder_fibers"]] == [("counter/long", "job")]

    restarted = ServerProcess(EXAMPLES / "counter.py", store, tmp_path / "server2.log").start()
    try:
        await wait_until(
            lambda: kv(read_rows(db), "counter/long", "recovered") is not None, 15, "recovery", restarted
        )
        assert kv(read_rows(db), "counter/long", "recovered")["name"] == "job"
        assert kv(read_rows(db), "counter/short", "recovered") is None  # finished work is not recovered
    finally:
        restarted.terminate()
