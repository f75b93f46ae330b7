"""Think benchmarks: framework overhead per turn, and chunks per second relayed to a WebSocket client.

    .venv/bin/python bench/turn.py            # full run
    .venv/bin/python bench/turn.py --quick    # smaller run, a few seconds

* Overhead per turn: ``save_messages`` on an in-process agent whose model answers instantly
  (``InstantModel``, below), so what is timed is ponder itself — admission, persistence of the user
  and assistant messages, the step loop, chunk accumulation and the turn fiber. Measured with 10 and
  with 1,000 and 10,000 messages already stored: the budget is ≤ 2 ms median, flat in history length (≤ 1.5×).
* Cold wake: an agent with 10,000 stored messages, from waking it to the first text chunk of a ``chat()``
  reply — evicted from a running host and woken again (what a server does), and in a new ``AgentHost``
  (new store connection) on the same file. Budget ≤ 50 ms (DESIGN.md).
* Streaming: the real server (``ponder serve bench/apps/stream_app.py``) streams a 20,000-word reply
  (one chunk per word) to one WebSocket client; chunks per second from request to ``done``.
  Budget ≥ 20,000 chunks/s.

Prints medians, p95s and ratios; never asserts.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests.support.server import ServerProcess  # noqa: E402

from ponder import AgentHost, Think  # noqa: E402
from ponder.models import Finish, ModelEvent, ModelRequest, TextDelta, Usage  # noqa: E402

BUDGET_TURN_S = 0.002
BUDGET_FLATNESS = 1.5
BUDGET_CHUNKS_PER_S = 20_000
BUDGET_COLD_WAKE_S = 0.050


class InstantModel:
    """Answers "ok" at once and does no work per message of the request, so the time measured is ponder's
    own. (``ScriptedModel`` counts the words of every request for its usage numbers: a cost of the mock,
    linear in history length, that a provider's adapter does not have.)"""

    name = "bench:instant"

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        yield TextDelta("ok")
        yield Usage(input_tokens=0, output_tokens=1)
        yield Finish("stop")


class EchoBench(Think):
    def get_model(self) -> InstantModel:
        return InstantModel()


def pct(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(p / 100 * len(ordered)) - 1))]


def history_messages(count: int) -> list[dict[str, object]]:
    """``count`` stored messages: alternating questions (~280 bytes) and answers (~430 bytes)."""
    out: list[dict[str, object]] = []
    for i in range(count // 2):
        out.append(
            {"id": f"u{i}", "role": "user", "parts": [{"type": "text", "text": f"question {i} " * 20}]}
        )
        out.append(
            {
                "id": f"a{i}",
                "role": "assistant",
                "parts": [{"type": "step-start"}, {"type": "text", "text": f"answer {i} " * 40}],
            }
        )
    return out


async def turn_overhead(history: int, turns: int, store_dir: Path) -> list[float]:
    async with AgentHost(f"sqlite:///{store_dir / f'turn-{history}.sqlite3'}") as host:
        agent = await host.get_agent(EchoBench, f"h{history}")
        await agent.add_messages(history_messages(history), broadcast=False)
        for _ in range(5):  # warm-up
            await agent.save_messages("warm up")
        samples = []
        for i in range(turns):
            start = time.perf_counter()
            result = await agent.save_messages(f"hello {i}")
            samples.append(time.perf_counter() - start)
            assert result.status == "completed", result
        return samples


async def cold_wake(history: int, rounds: int, store_dir: Path) -> dict[str, list[float]]:
    """Seconds from waking a stored agent to the first text chunk of its next reply, two ways: evicted from
    a running host and woken again (what a server does), and in a new host on the same store file."""
    url = f"sqlite:///{store_dir / 'wake.sqlite3'}"
    out: dict[str, list[float]] = {"evicted": [], "new host": []}
    async with AgentHost(url) as host:
        agent = await host.get_agent(EchoBench, "wake")
        await agent.add_messages(history_messages(history), broadcast=False)
        for i in range(rounds + 2):  # the first two warm the OS page cache and the interpreter
            host.idle_timeout = 0.0
            assert host.evict_idle() == 1
            host.idle_timeout = 3600.0
            first = await _first_chunk(host, f"hello after eviction {i}", time.perf_counter())
            if i >= 2:
                out["evicted"].append(first)
    for i in range(rounds + 2):
        start = time.perf_counter()
        async with AgentHost(url) as host:
            first = await _first_chunk(host, f"hello after a new host {i}", start)
        if i >= 2:
            out["new host"].append(first)
    return out


async def _first_chunk(host: AgentHost, text: str, start: float) -> float:
    first: list[float] = []

    def on_chunk(chunk: dict[str, object]) -> None:
        if not first and chunk.get("type") == "text-delta":
            first.append(time.perf_counter() - start)

    agent = await host.get_agent(EchoBench, "wake")
    result = await agent.chat(text, on_chunk)
    assert result.status == "completed" and first, result
    return first[0]


async def stream_rate(words: int, rounds: int, store_dir: Path) -> list[tuple[int, float]]:
    from websockets.asyncio.client import connect

    log = store_dir / "stream-server.log"
    server = ServerProcess(
        REPO / "bench" / "apps" / "stream_app.py",
        f"sqlite:///{store_dir / 'stream.sqlite3'}",
        log,
        env={"PONDER_BENCH_WORDS": str(words)},
    ).start()
    results = []
    try:
        async with connect(
            f"{server.ws_url}/agents/stream-bench/b?_pk={uuid.uuid4()}", max_size=None, proxy=None
        ) as ws:
            for round_ in range(rounds):
                request_id = f"r{round_}"
                body = {
                    "messages": [
                        {"id": f"m{round_}", "role": "user", "parts": [{"type": "text", "text": "go"}]}
                    ],
                    "trigger": "submit-message",
                }
                frame = {
                    "type": "cf_agent_use_chat_request",
                    "id": request_id,
                    "init": {"method": "POST", "body": json.dumps(body)},
                }
                start = time.perf_counter()
                await ws.send(json.dumps(frame))
                chunks = 0
                while True:
                    data = json.loads(await ws.recv())
                    if data.get("type") == "cf_agent_use_chat_response" and data.get("id") == request_id:
                        if data.get("done"):
                            break
                        chunks += 1
                results.append((chunks, time.perf_counter() - start))
    finally:
        server.terminate()
    return results


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="fewer turns and a shorter stream")
    args = parser.parse_args()
    turns = 100 if args.quick else 500
    words = 5_000 if args.quick else 20_000
    rounds = 2 if args.quick else 5
    wake_rounds = 5 if args.quick else 21

    with tempfile.TemporaryDirectory(prefix="ponder-bench-") as tmp:
        store_dir = Path(tmp)
        overhead = {n: asyncio.run(turn_overhead(n, turns, store_dir)) for n in (10, 1_000, 10_000)}
        wake = asyncio.run(cold_wake(10_000, wake_rounds, store_dir))
        stream = asyncio.run(stream_rate(words, rounds, store_dir))

    med = {n: statistics.median(samples) for n, samples in overhead.items()}
    rates = [chunks / seconds for chunks, seconds in stream]
    rows = [
        (
            f"turn overhead, {n:,} messages",
            f"{med[n] * 1e3:.3f} ms",
            f"{pct(samples, 95) * 1e3:.3f} ms",
            f"≤ {BUDGET_TURN_S * 1e3:.0f} ms",
            f"{med[n] / BUDGET_TURN_S:.2f}× budget",
        )
        for n, samples in overhead.items()
    ]
    for n in (1_000, 10_000):
        ratio = med[n] / med[10]
        rows.append(
            (
                f"flatness ({n:,} vs 10)",
                f"{ratio:.2f}×",
                "-",
                f"≤ {BUDGET_FLATNESS}×",
                "ok" if ratio <= BUDGET_FLATNESS else "over",
            )
        )
    rows += [
        (
            f"cold wake, 10,000 messages, {how}, to first chunk",
            f"{statistics.median(samples) * 1e3:.1f} ms",
            f"{pct(samples, 95) * 1e3:.1f} ms",
            f"≤ {BUDGET_COLD_WAKE_S * 1e3:.0f} ms",
            f"{statistics.median(samples) / BUDGET_COLD_WAKE_S:.2f}× budget",
        )
        for how, samples in wake.items()
    ]
    rows += [
        (
            f"chunks/s to one WebSocket ({stream[0][0]:,} chunks)",
            f"{statistics.median(rates):,.0f}/s",
            f"min {min(rates):,.0f}/s",
            f"≥ {BUDGET_CHUNKS_PER_S:,}/s",
            f"{statistics.median(rates) / BUDGET_CHUNKS_PER_S:.2f}× budget",
        ),
    ]
    headers = ("metric", "median", "p95", "budget", "ratio")
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(headers)]
    print("  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True)))
    print("  ".join("-" * w for w in widths))
    for row in rows:
        print("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)))


if __name__ == "__main__":
    main()
