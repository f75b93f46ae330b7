"""Think benchmarks: framework overhead per turn, and chunks per second relayed to a WebSocket client.

    .venv/bin/python bench/turn.py            # full run
    .venv/bin/python bench/turn.py --quick    # smaller run, a few seconds

* Overhead per turn: ``save_messages`` on an in-process agent whose model answers instantly
  (``ScriptedModel.echo()``), so what is timed is ponder itself — admission, persistence of the user
  and assistant messages, the step loop, chunk accumulation and the turn fiber. Measured with 10 and
  with 1,000 messages already stored: the budget is ≤ 2 ms median, flat in history length (≤ 1.5×).
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
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests.support.server import ServerProcess  # noqa: E402

from ponder import AgentHost, Think  # noqa: E402
from ponder.testing import ScriptedModel  # noqa: E402

BUDGET_TURN_S = 0.002
BUDGET_FLATNESS = 1.5
BUDGET_CHUNKS_PER_S = 20_000


class EchoBench(Think):
    def get_model(self) -> ScriptedModel:
        return ScriptedModel.echo()


def pct(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(p / 100 * len(ordered)) - 1))]


async def turn_overhead(history: int, turns: int, store_dir: Path) -> list[float]:
    async with AgentHost(f"sqlite:///{store_dir / f'turn-{history}.sqlite3'}") as host:
        agent = await host.get_agent(EchoBench, f"h{history}")
        pairs = [
            [
                {"id": f"u{i}", "role": "user", "parts": [{"type": "text", "text": f"question {i} " * 20}]},
                {
                    "id": f"a{i}",
                    "role": "assistant",
                    "parts": [{"type": "text", "text": f"answer {i} " * 40}],
                },
            ]
            for i in range(history // 2)
        ]
        await agent.add_messages([m for pair in pairs for m in pair], broadcast=False)
        for _ in range(5):  # warm-up
            await agent.save_messages("warm up")
        samples = []
        for i in range(turns):
            start = time.perf_counter()
            result = await agent.save_messages(f"hello {i}")
            samples.append(time.perf_counter() - start)
            assert result.status == "completed", result
        return samples


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

    with tempfile.TemporaryDirectory(prefix="ponder-bench-") as tmp:
        store_dir = Path(tmp)
        small = asyncio.run(turn_overhead(10, turns, store_dir))
        large = asyncio.run(turn_overhead(1_000, turns, store_dir))
        stream = asyncio.run(stream_rate(words, rounds, store_dir))

    med_small, med_large = statistics.median(small), statistics.median(large)
    rates = [chunks / seconds for chunks, seconds in stream]
    rows = [
        (
            "turn overhead, 10 messages",
            f"{med_small * 1e3:.3f} ms",
            f"{pct(small, 95) * 1e3:.3f} ms",
            f"≤ {BUDGET_TURN_S * 1e3:.0f} ms",
            f"{med_small / BUDGET_TURN_S:.2f}× budget",
        ),
        (
            "turn overhead, 1,000 messages",
            f"{med_large * 1e3:.3f} ms",
            f"{pct(large, 95) * 1e3:.3f} ms",
            f"≤ {BUDGET_TURN_S * 1e3:.0f} ms",
            f"{med_large / BUDGET_TURN_S:.2f}× budget",
        ),
        (
            "flatness (1,000 vs 10)",
            f"{med_large / med_small:.2f}×",
            "-",
            f"≤ {BUDGET_FLATNESS}×",
            "ok" if med_large / med_small <= BUDGET_FLATNESS else "over",
        ),
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
