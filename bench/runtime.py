"""Runtime benchmarks: RPC over one WebSocket, live-agent memory, wake times, store micro-benchmarks.

    .venv/bin/python bench/runtime.py            # full run (about 10 s on 2 cores)
    .venv/bin/python bench/runtime.py --quick    # smaller run, a few seconds

Prints medians, p95s and ratios against the budgets in DESIGN.md; never asserts. Everything runs on
127.0.0.1 and in temporary directories that are removed at the end. See bench/README.md for how to
read the numbers.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import math
import os
import resource
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import tracemalloc
import urllib.request
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
COUNTER_EXAMPLE = REPO / "examples" / "counter.py"

#: DESIGN.md: "Memory: ≤ 100 KB per idle live agent".
BUDGET_IDLE_AGENT_BYTES = 100 * 1024
#: DESIGN.md: "Cold wake of an agent with 10,000 stored messages: ≤ 50 ms to first streamed chunk".
#: A Think-level budget; the runtime's own cold wake is the floor underneath it.
BUDGET_COLD_WAKE_S = 0.050


# -- reporting ---------------------------------------------------------------------------------------


@dataclass
class Result:
    section: str
    metric: str
    median: str
    p95: str = "-"
    budget: str = "-"
    verdict: str = "-"


def percentile(values: Sequence[float], pct: float) -> float:
    """Nearest-rank percentile (``pct`` in 0..100)."""
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    rank = max(0, min(len(ordered) - 1, math.ceil(pct / 100 * len(ordered)) - 1))
    return ordered[rank]


def fmt_time(seconds: float) -> str:
    if seconds < 1e-3:
        return f"{seconds * 1e6:.1f} µs"
    if seconds < 1.0:
        return f"{seconds * 1e3:.2f} ms"
    return f"{seconds:.2f} s"


def fmt_bytes(n: float) -> str:
    if abs(n) < 10 * 1024:
        return f"{n:,.0f} B"
    if abs(n) < 10 * 1024 * 1024:
        return f"{n / 1024:,.1f} KiB"
    return f"{n / 1024 / 1024:,.1f} MiB"


def fmt_rate(per_second: float) -> str:
    return f"{per_second:,.0f}/s"


def verdict(measured: float, budget: float) -> str:
    ratio = measured / budget
    return f"{ratio:.2g}x budget, {'ok' if ratio <= 1.0 else 'OVER'}"


def print_table(results: list[Result]) -> None:
    headers = ("metric", "median", "p95", "budget", "ratio / verdict")
    rows = [(r.metric, r.median, r.p95, r.budget, r.verdict) for r in results]
    widths = [max(len(h), *(len(row[i]) for row in rows)) for i, h in enumerate(headers)]

    def line(cells: Sequence[str]) -> str:
        return "  ".join(
            c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(cells, widths, strict=True))
        )

    print(line(headers))
    print("  ".join("-" * w for w in widths))
    section = None
    for result, row in zip(results, rows, strict=True):
        if result.section != section:
            section = result.section
            print(f"[{section}]")
        print(line(row))


def progress(message: str) -> None:
    print(f"... {message}", file=sys.stderr, flush=True)


def rss_bytes() -> int:
    """Resident set size from /proc/self/statm (second field, in pages)."""
    with open("/proc/self/statm") as f:
        resident_pages = int(f.read().split()[1])
    return resident_pages * resource.getpagesize()


# -- a: RPC over one WebSocket against the real server -----------------------------------------------


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class Server:
    """``ponder serve examples/counter.py`` in a subprocess on a free loopback port."""

    def __init__(self, store_url: str, log_path: Path) -> None:
        self.port = free_port()
        self.store_url = store_url
        self.log_path = log_path
        self.proc: subprocess.Popen[bytes] | None = None

    def __enter__(self) -> Server:
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "ponder.cli",
                    "serve",
                    str(COUNTER_EXAMPLE),
                    "--host",
                    "127.0.0.1",
                    "--port",
                    str(self.port),
                    "--store",
                    self.store_url,
                    "--log-level",
                    "warning",
                ],
                stdout=log,
                stderr=subprocess.STDOUT,
                cwd=REPO,
                env={**os.environ, "PYTHONUNBUFFERED": "1"},
            )
        try:
            self._wait_ready(30.0)
        except BaseException:
            self._stop()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop()

    def _wait_ready(self, timeout: float) -> None:
        opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # loopback, never a proxy
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            assert self.proc is not None
            if self.proc.poll() is not None:
                raise RuntimeError(f"server exited with {self.proc.returncode}:\n{self.log()}")
            try:
                with opener.open(f"http://127.0.0.1:{self.port}/_ponder/health", timeout=1) as resp:
                    if resp.status == 200:
                        return
            except OSError:
                time.sleep(0.05)
        raise TimeoutError(f"server not ready after {timeout}s:\n{self.log()}")

    def _stop(self) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(5)

    def log(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-4000:]
        except OSError:
            return ""

    @property
    def ws_url(self) -> str:
        return f"ws://127.0.0.1:{self.port}"


async def _open_agent_socket(ws_url: str, name: str) -> Any:
    from websockets.asyncio.client import connect

    ws = await connect(f"{ws_url}/agents/counter/{name}", proxy=None, max_queue=None)
    # The greeting ends with the MCP servers frame (identity, state, mcp_servers).
    while True:
        frame = json.loads(await ws.recv())
        if frame.get("type") == "cf_agent_mcp_servers":
            return ws


def _rpc_frame(call_id: str, method: str, args: list[Any]) -> str:
    return json.dumps({"type": "rpc", "id": call_id, "method": method, "args": args}, separators=(",", ":"))


async def _sequential_round(
    ws: Any, method: str, args: list[Any], n: int, tag: str
) -> tuple[list[float], float]:
    latencies: list[float] = []
    clock = time.perf_counter
    start = clock()
    for i in range(n):
        call_id = f"{tag}-{i}"
        frame = _rpc_frame(call_id, method, args)
        t0 = clock()
        await ws.send(frame)
        while True:  # increment broadcasts a cf_agent_state frame before its reply
            reply = json.loads(await ws.recv())
            if reply.get("type") == "rpc" and reply.get("id") == call_id and reply.get("done"):
                break
        latencies.append(clock() - t0)
        if not reply.get("success"):
            raise RuntimeError(f"rpc {method} failed: {reply}")
    return latencies, clock() - start


async def _pipelined_round(ws: Any, method: str, args: list[Any], n: int, tag: str) -> float:
    async def collect() -> None:
        done = 0
        while done < n:
            reply = json.loads(await ws.recv())
            if reply.get("type") == "rpc" and reply.get("done"):
                if not reply.get("success"):
                    raise RuntimeError(f"rpc {method} failed: {reply}")
                done += 1

    frames = [_rpc_frame(f"{tag}-{i}", method, args) for i in range(n)]
    start = time.perf_counter()
    collector = asyncio.create_task(collect())
    for frame in frames:
        await ws.send(frame)
    await collector
    return time.perf_counter() - start


async def bench_rpc(ws_url: str, rounds: int, calls: int, warmup: int, pipelined: int) -> list[Result]:
    section = "rpc over one WebSocket (server subprocess)"
    results: list[Result] = []
    progress(f"websocket ping: {rounds * calls:,} round trips")
    ws = await _open_agent_socket(ws_url, "bench-ping")
    try:
        pings: list[float] = []
        for i in range(warmup + rounds * calls):
            t0 = time.perf_counter()
            await (await ws.ping())
            if i >= warmup:
                pings.append(time.perf_counter() - t0)
    finally:
        await ws.close()
    results.append(
        Result(
            section,
            "websocket ping round trip (transport floor)",
            fmt_time(statistics.median(pings)),
            fmt_time(percentile(pings, 95)),
        )
    )
    cases = [
        ("greet", ["bench"], "greet (cheap @callable)"),
        ("increment", [1], "increment (persist + broadcast)"),
    ]
    for method, args, label in cases:
        progress(f"rpc {method}: {rounds} rounds x {calls:,} sequential calls")
        ws = await _open_agent_socket(ws_url, f"bench-{method}")
        try:
            await _sequential_round(ws, method, args, warmup, "warm")
            latencies: list[float] = []
            rates: list[float] = []
            for r in range(rounds):
                lat, elapsed = await _sequential_round(ws, method, args, calls, f"seq{r}")
                latencies += lat
                rates.append(calls / elapsed)
            results.append(
                Result(
                    section,
                    f"{label}: latency per call",
                    fmt_time(statistics.median(latencies)),
                    fmt_time(percentile(latencies, 95)),
                )
            )
            results.append(
                Result(
                    section,
                    f"{label}: sequential calls/s",
                    fmt_rate(statistics.median(rates)),
                    f"min {fmt_rate(min(rates))}",
                )
            )
            progress(f"rpc {method}: {rounds} rounds x {pipelined:,} pipelined calls")
            await _pipelined_round(ws, method, args, min(pipelined, warmup), "pwarm")
            piped = [
                pipelined / await _pipelined_round(ws, method, args, pipelined, f"pipe{r}")
                for r in range(rounds)
            ]
            results.append(
                Result(
                    section,
                    f"{label}: pipelined calls/s (N={pipelined:,})",
                    fmt_rate(statistics.median(piped)),
                    f"min {fmt_rate(min(piped))}",
                )
            )
            if method == "increment":  # a sanity check, not a benchmark: no increment was lost
                expected = warmup + rounds * calls + min(pipelined, warmup) + rounds * pipelined + 1
                await ws.send(_rpc_frame("check", "increment", [1]))
                while (reply := json.loads(await ws.recv())).get("id") != "check":
                    pass
                if reply.get("result") != expected:
                    progress(f"warning: the counter is {reply.get('result')}, expected {expected}")
        finally:
            await ws.close()
    return results


# -- b: live-agent memory and wake times (in-process AgentHost) -------------------------------------


def _idle_agent_class() -> type:
    from ponder import Agent

    class IdleAgent(Agent):
        """A small agent with a small state, as most idle agents are."""

        initial_state = {"count": 0, "label": ""}

        async def on_start(self) -> None:
            self.started_at = time.time()

    return IdleAgent


def _state_for(i: int) -> dict[str, Any]:
    return {"count": i, "label": f"agent number {i}", "tags": ["bench", "idle"]}


async def _seed_agents(store_url: str, n: int) -> tuple[list[float], list[float]]:
    """Create ``n`` agents with a small stored state; return (wake-new, set_state) timings."""
    from ponder import AgentHost

    cls = _idle_agent_class()
    wake: list[float] = []
    writes: list[float] = []
    clock = time.perf_counter
    async with AgentHost(store_url, idle_timeout=3600) as host:
        for i in range(n):
            t0 = clock()
            agent = await host.get_agent(cls, f"idle-{i}")
            t1 = clock()
            await agent.set_state(_state_for(i))
            t2 = clock()
            wake.append(t1 - t0)
            writes.append(t2 - t1)
    return wake, writes


async def _tracemalloc_per_agent(store_url: str, n: int) -> float:
    """Bytes allocated (and kept) per agent woken from the store, as tracemalloc sees it."""
    from ponder import AgentHost

    cls = _idle_agent_class()
    async with AgentHost(store_url, idle_timeout=3600) as host:
        await host.get_agent(cls, "warm-up")  # one-time costs (statement cache, class setup)
        gc.collect()
        tracemalloc.start()
        try:
            before = tracemalloc.get_traced_memory()[0]
            agents = [await host.get_agent(cls, f"idle-{i}") for i in range(n)]
            gc.collect()
            after = tracemalloc.get_traced_memory()[0]
        finally:
            tracemalloc.stop()
        if len(host.live_agents) < n:
            progress("warning: agents were evicted while memory was measured; the number is too low")
        del agents
    return (after - before) / n


async def _cold_wake_after_eviction(store_url: str, cycles: int) -> list[float]:
    from ponder import AgentHost

    cls = _idle_agent_class()
    timings: list[float] = []
    clock = time.perf_counter
    async with AgentHost(store_url, idle_timeout=3600) as host:
        await host.get_agent(cls, "warm-up")
        host.idle_timeout = 0.0  # every agent counts as idle: evict_idle() drops it at once
        host.evict_idle()
        for i in range(cycles):
            t0 = clock()
            agent = await host.get_agent(cls, f"idle-{i % 10}")
            timings.append(clock() - t0)
            if agent.state["count"] != i % 10:
                progress(f"warning: {agent!r} woke with state {agent.state!r}")
            host.evict_idle()
        host.idle_timeout = 3600
    return timings


async def _rss_child(store_url: str, n: int) -> dict[str, Any]:
    """Run in a fresh interpreter: RSS before/after waking ``n`` stored agents, and wake timings."""
    from ponder import AgentHost

    cls = _idle_agent_class()
    clock = time.perf_counter
    async with AgentHost(store_url, idle_timeout=3600) as host:
        await host.get_agent(cls, "warm-up")
        gc.collect()
        before = rss_bytes()
        wake: list[float] = []
        for i in range(n):
            t0 = clock()
            await host.get_agent(cls, f"idle-{i}")
            wake.append(clock() - t0)
        gc.collect()
        after = rss_bytes()
        live = len(host.live_agents)
    return {"rss_before": before, "rss_after": after, "wake": wake, "live": live}


async def bench_memory(tmp: Path, n: int, cold_cycles: int) -> list[Result]:
    section = f"{n:,} idle live agents (in-process AgentHost, SQLite file)"
    store_url = f"sqlite:///{tmp / 'agents.sqlite3'}"
    progress(f"memory: seeding {n:,} agents with a small stored state")
    wake_new, writes = await _seed_agents(store_url, n)

    progress("memory: tracemalloc while waking them from the store")
    kept = await _tracemalloc_per_agent(store_url, n)

    progress("memory: RSS in a fresh interpreter while waking them")
    child = await asyncio.create_subprocess_exec(
        sys.executable,
        __file__,
        "--_rss-child",
        store_url,
        str(n),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=REPO,
    )
    out, err = await child.communicate()
    if child.returncode != 0:
        raise RuntimeError(f"RSS child failed:\n{err.decode(errors='replace')}")
    rss = json.loads(out)
    rss_per_agent = (rss["rss_after"] - rss["rss_before"]) / n

    progress(f"memory: cold wake after eviction x {cold_cycles:,}")
    cold = await _cold_wake_after_eviction(store_url, cold_cycles)

    budget = fmt_bytes(BUDGET_IDLE_AGENT_BYTES)
    wake_stored = rss["wake"]
    return [
        Result(section, "memory per idle agent (tracemalloc, kept)", fmt_bytes(kept), "-", budget, verdict(kept, BUDGET_IDLE_AGENT_BYTES)),
        Result(section, "memory per idle agent (RSS delta, fresh process)", fmt_bytes(rss_per_agent), "-", budget, verdict(rss_per_agent, BUDGET_IDLE_AGENT_BYTES)),
        Result(section, "wake a new agent (inserts its row)", fmt_time(statistics.median(wake_new)), fmt_time(percentile(wake_new, 95))),
        Result(section, "set_state (persist, no clients)", fmt_time(statistics.median(writes)), fmt_time(percentile(writes, 95))),
        Result(section, f"wake a stored agent ({n:,} in a row, fresh process)", fmt_time(statistics.median(wake_stored)), fmt_time(percentile(wake_stored, 95))),
        Result(section, f"wake {n:,} stored agents, total", fmt_time(sum(wake_stored))),
        Result(section, "cold wake of one agent after eviction", fmt_time(statistics.median(cold)), fmt_time(percentile(cold, 95)), f"{fmt_time(BUDGET_COLD_WAKE_S)} †", verdict(statistics.median(cold), BUDGET_COLD_WAKE_S)),
    ]  # fmt: skip


# -- c: store micro-benchmarks -----------------------------------------------------------------------


async def bench_store(tmp: Path, n: int) -> list[Result]:
    from ponder.storage import SQLiteStore, Storage

    section = "store: Storage kv on SQLite (WAL, synchronous=NORMAL)"
    progress(f"store: {n:,} kv puts and gets")
    store = SQLiteStore(tmp / "kv.sqlite3")
    await store.open()
    try:
        kv = Storage(store, "bench/kv")
        value = {"count": 1, "label": "a small JSON value", "tags": ["x", "y"]}
        clock = time.perf_counter
        for i in range(200):  # warm the statement cache
            await kv.put(f"warm-{i}", value)
            await kv.get(f"warm-{i}")

        async def timed(op: Any) -> list[float]:
            timings = []
            for i in range(n):
                t0 = clock()
                await op(i)
                timings.append(clock() - t0)
            return timings

        put_new = await timed(lambda i: kv.put(f"key-{i}", value))
        put_over = await timed(lambda i: kv.put(f"key-{i}", {**value, "count": i}))
        get_hit = await timed(lambda i: kv.get(f"key-{i}"))
        get_miss = await timed(lambda i: kv.get(f"missing-{i}"))

        async def tx_of_ten(i: int) -> None:
            async with kv.transaction():
                for j in range(10):
                    await kv.put(f"tx-{i}-{j}", value)

        tx = await timed(tx_of_ten)
    finally:
        await store.close()
    rows = [
        ("put (new key)", put_new),
        ("put (overwrite)", put_over),
        ("get (hit)", get_hit),
        ("get (miss)", get_miss),
        ("transaction of 10 puts", tx),
    ]
    return [
        Result(section, label, fmt_time(statistics.median(t)), fmt_time(percentile(t, 95)))
        for label, t in rows
    ]


# -- main --------------------------------------------------------------------------------------------


async def run(quick: bool) -> list[Result]:
    if quick:
        rounds, calls, warmup, pipelined = 2, 300, 100, 500
        agents, cold_cycles, kv_ops = 1_000, 200, 1_000
    else:
        rounds, calls, warmup, pipelined = 5, 2_000, 500, 2_000
        agents, cold_cycles, kv_ops = 1_000, 2_000, 10_000
    results: list[Result] = []
    with tempfile.TemporaryDirectory(prefix="ponder-bench-") as tmpdir:
        tmp = Path(tmpdir)
        progress("starting `ponder serve examples/counter.py` on 127.0.0.1")
        with Server(f"sqlite:///{tmp / 'server.sqlite3'}", tmp / "server.log") as server:
            results += await bench_rpc(server.ws_url, rounds, calls, warmup, pipelined)
        problems = [line for line in server.log().splitlines() if line.startswith(("WARNING", "ERROR"))]
        if problems:
            progress("the server logged warnings or errors during the run:\n" + "\n".join(problems[-20:]))
        results += await bench_memory(tmp, agents, cold_cycles)
        results += await bench_store(tmp, kv_ops)
    return results


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="a smaller run that finishes in a few seconds")
    parser.add_argument("--_rss-child", nargs=2, metavar=("STORE_URL", "N"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args._rss_child:
        store_url, n = args._rss_child
        print(json.dumps(asyncio.run(_rss_child(store_url, int(n)))))
        return

    started = time.perf_counter()
    results = asyncio.run(run(args.quick))
    sys.stderr.flush()
    elapsed = time.perf_counter() - started
    print()
    print(
        f"ponder runtime benchmark ({'quick' if args.quick else 'full'}) — Python {sys.version.split()[0]}, "
        f"{os.cpu_count()} CPU(s), {time.strftime('%Y-%m-%d')}, took {elapsed:.1f}s"
    )
    print()
    print_table(results)
    print()
    print("budget: DESIGN.md performance budgets; '-' = no budget for this metric, reported for tracking.")
    print(
        "† the 50 ms cold-wake budget is for a Think agent with 10,000 stored messages to its first streamed"
        " chunk;\n  the runtime's own cold wake measured here is the floor underneath it."
    )


if __name__ == "__main__":
    main()
