"""Recovery after a crash: time from process start to the first resumed chunk of an interrupted turn.

    .venv/bin/python bench/recovery.py              # 5 runs of each measurement
    .venv/bin/python bench/recovery.py --runs 9

DESIGN.md budget: an interrupted turn resumes ≤ 1 s after the process restarts.

* **Real process restart** (the budgeted number). ``ponder serve bench/apps/recovery_app.py`` runs in a
  subprocess on a temporary SQLite store. A WebSocket client starts a turn (a 2,000-word reply, one chunk per
  word, 5 ms apart); after ``KILL_AFTER`` text deltas the server gets ``kill -9``. The clock starts just
  before a new ``ponder serve`` process is spawned on the same store; the new process's start-up wakes the
  agent and recovery continues the turn. A client polls the port, opens a WebSocket, ACKs the
  ``cf_agent_stream_resuming`` offer and the clock stops at the first chunk of the interrupted request it
  receives: replayed (``replay: true``) or streamed live by the continuation, whichever comes first. The
  continuation must then finish (``outcome: "completed"``) or the run counts as failed. Broken down into
  process start → port listening (interpreter, imports, store, recovery), listening → WebSocket open, and
  WebSocket open → first resumed chunk (handshake, ACK, replay).
* **In-process** (the floor under it, without interpreter start-up and imports): a host is closed without
  grace mid-turn, a new ``AgentHost`` starts on the same store, and the clock stops at the recovered
  continuation's first text chunk.

Prints medians, minima and maxima and the ratio to the budget; never asserts.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import date
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests.support.server import ServerProcess, free_port  # noqa: E402
from tests.support.wsclient import AgentSocket  # noqa: E402

from ponder import AgentHost  # noqa: E402
from ponder.testing import ScriptedModel  # noqa: E402
from ponder.think import Think  # noqa: E402

APP = REPO / "bench" / "apps" / "recovery_app.py"
AGENT = "recovery-bench"
RESPONSE = "cf_agent_use_chat_response"
BUDGET_S = 1.0
KILL_AFTER = 100  # text deltas streamed before the kill (flushed to the buffer in batches of 10)
LONG = " ".join(f"w{i}" for i in range(200))


# -- real process restart -------------------------------------------------------------------------------------


class SpawnedServer(ServerProcess):
    """``ponder serve`` whose start() returns right after spawning: the benchmark times readiness itself."""

    def wait_ready(self, timeout: float) -> None:
        return None


async def wait_listening(port: int, proc: ServerProcess, limit: float = 30.0) -> None:
    """Poll the port every millisecond until it accepts a connection (nothing else signals across processes)."""
    deadline = time.perf_counter() + limit
    while time.perf_counter() < deadline:
        if proc.proc is not None and proc.proc.poll() is not None:
            raise RuntimeError(f"server exited with {proc.proc.returncode}:\n{proc.log()}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.05):
                return
        except OSError:
            await asyncio.sleep(0.001)
    raise TimeoutError(f"server did not listen within {limit}s:\n{proc.log()}")


def chat_request(request_id: str, text: str) -> str:
    message = {"id": f"u-{request_id}", "role": "user", "parts": [{"type": "text", "text": text}]}
    body = {"messages": [message], "trigger": "submit-message"}
    return json.dumps(
        {
            "type": "cf_agent_use_chat_request",
            "id": request_id,
            "init": {"method": "POST", "body": json.dumps(body)},
        }
    )


def is_delta(request_id: str) -> Any:
    def pred(frame: dict[str, Any]) -> bool:
        return frame.get("id") == request_id and '"text-delta"' in (frame.get("body") or "")

    return pred


async def process_run(tmp: Path, run: int) -> dict[str, Any]:
    store = f"sqlite:///{tmp / f'process-{run}.sqlite3'}"
    name, request_id = f"run{run}", f"bench-{run}"
    first = ServerProcess(APP, store, tmp / f"first-{run}.log").start()
    try:
        sock = await AgentSocket.open(first.ws_url, AGENT, name)
        await sock.wait_for(lambda f: f.get("type") == "cf_agent_chat_messages")
        await sock.ws.send(chat_request(request_id, "tell me everything"))
        deltas = is_delta(request_id)
        await sock.wait_for(lambda f: deltas(f) and sum(map(deltas, sock.frames)) >= KILL_AFTER, 30)
        first.kill9()
        await sock.close()
    finally:
        if first.proc is not None and first.proc.poll() is None:
            first.kill9()

    port = free_port()
    second = SpawnedServer(APP, store, tmp / f"second-{run}.log", port=port)
    started = time.perf_counter()
    second.start()
    try:
        await wait_listening(port, second)
        listening = time.perf_counter()
        sock = await AgentSocket.open(second.ws_url, AGENT, name)
        opened = time.perf_counter()
        offer = await sock.wait_for(lambda f: f.get("type") == "cf_agent_stream_resuming", 10)
        await sock.ws.send(json.dumps({"type": "cf_agent_stream_resume_ack", "id": offer["id"]}))
        chunk = await sock.wait_for(
            lambda f: f.get("type") == RESPONSE and f.get("id") == request_id and bool(f.get("body")), 10
        )
        resumed = time.perf_counter()
        done = await sock.wait_for(
            lambda f: (
                f.get("type") == RESPONSE
                and f.get("id") == request_id
                and f.get("done") is True
                and not f.get("replay")
            ),
            30,
        )
        await sock.close()
    finally:
        second.terminate()
    return {
        "listening": listening - started,
        "open": opened - listening,
        "first_chunk": resumed - opened,
        "total": resumed - started,
        "source": (
            "live" if not chunk.get("replay") else "continuation" if chunk.get("continuation") else "buffer"
        ),
        "ok": done.get("outcome") == "completed" and offer["id"] == request_id,
    }


def import_time() -> float:
    """A fresh interpreter that imports the CLI and exits: the start-up floor of any ``ponder serve``."""
    started = time.perf_counter()
    subprocess.run([sys.executable, "-c", "import ponder.cli"], check=True, cwd=REPO)
    return time.perf_counter() - started


# -- in-process -----------------------------------------------------------------------------------------------


def in_process_agent(model: ScriptedModel, first: asyncio.Event | None) -> type[Think]:
    class Bench(Think):
        def get_model(self) -> Any:
            return model

        async def on_chunk(self, chunk: dict[str, Any]) -> None:
            if first is not None and chunk.get("type") == "text-delta":
                first.set()

    return Bench


async def in_process_run(db: Path) -> float:
    streamed = asyncio.Event()
    host = AgentHost(f"sqlite:///{db}", shutdown_timeout=0.0)
    await host.start()
    agent = await host.get_agent(in_process_agent(ScriptedModel([LONG], chunk_delay=0.002), streamed), "b")
    task = asyncio.create_task(agent.save_messages("hello"))
    for _ in range(30):
        streamed.clear()
        await streamed.wait()
    await host.close()
    task.cancel()
    resumed = asyncio.Event()
    started = time.perf_counter()
    host = AgentHost(f"sqlite:///{db}", shutdown_timeout=2.0)
    await host.start()
    await host.get_agent(in_process_agent(ScriptedModel(["done."]), resumed), "b")
    await asyncio.wait_for(resumed.wait(), 10)
    elapsed = time.perf_counter() - started
    await host.close()
    return elapsed


# -- report ---------------------------------------------------------------------------------------------------


def ms(seconds: float) -> str:
    return f"{seconds * 1000:,.1f} ms"


def row(label: str, values: list[float], budget: float | None = None) -> str:
    median = statistics.median(values)
    verdict = "-"
    if budget is not None:
        ratio = median / budget
        shown = f"{ratio:.2f}" if ratio >= 0.1 else f"{ratio:.4f}"
        verdict = f"{shown}x budget, {'ok' if ratio <= 1 else 'OVER'}"
    return (
        f"{label:<46}  {ms(median):>11}  {ms(min(values)):>11}  {ms(max(values)):>11}"
        f"  {ms(budget) if budget else '-':>11}  {verdict}"
    )


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    began = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        runs: list[dict[str, Any]] = []
        for run in range(args.runs):
            print(f"process restart run {run + 1}/{args.runs}", file=sys.stderr)
            runs.append(await process_run(Path(tmp), run))
        imports = [import_time() for _ in range(args.runs)]
        inproc: list[float] = []
        for run in range(args.runs):
            print(f"in-process run {run + 1}/{args.runs}", file=sys.stderr)
            inproc.append(await in_process_run(Path(tmp) / f"inproc-{run}.sqlite3"))
    took = time.perf_counter() - began
    cpus = os.cpu_count()
    print(
        f"ponder recovery benchmark — Python {platform.python_version()}, {cpus} CPU(s), {date.today()},"
        f" {args.runs} runs each, took {took:.1f}s\n"
    )
    print(f"{'metric':<46}  {'median':>11}  {'min':>11}  {'max':>11}  {'budget':>11}  ratio / verdict")
    print(f"{'-' * 46}  {'-' * 11}  {'-' * 11}  {'-' * 11}  {'-' * 11}  {'-' * 19}")
    print("[real process restart: ponder serve, kill -9 mid-turn, new process]")
    print(row("process start → port listening", [r["listening"] for r in runs]))
    print(row("  (fresh python -c 'import ponder.cli' alone)", imports))
    print(row("listening → WebSocket open", [r["open"] for r in runs]))
    print(row("WebSocket open → first resumed chunk", [r["first_chunk"] for r in runs]))
    print(row("process start → first resumed chunk", [r["total"] for r in runs], BUDGET_S))
    print("[in-process: new AgentHost on the same store]")
    print(row("host start → first resumed chunk", inproc, BUDGET_S))
    sources = {key: sum(r["source"] == key for r in runs) for key in ("buffer", "continuation", "live")}
    failed = sum(not r["ok"] for r in runs)
    print(
        f"\nfirst resumed chunk: {sources['buffer']} replayed from the dead process's buffer,"
        f" {sources['continuation']} replayed from the running continuation, {sources['live']} live;"
        f" {failed} run(s) did not end with the continuation completed"
    )


if __name__ == "__main__":
    asyncio.run(main())
