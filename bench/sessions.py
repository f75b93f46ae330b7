"""Sessions benchmarks: append cost vs history length, full-text search, cold wake.

    .venv/bin/python bench/sessions.py            # full run (builds a 100,000-message store; ~1 min)
    .venv/bin/python bench/sessions.py --quick    # smaller run, a few seconds

* Append: one ``Session.append`` of a ~200-byte user message (row + FTS entry + index update, one
  transaction) on a session already holding 10 and 10,000 messages. Must stay flat (DESIGN.md: the
  per-turn budget is flat in history length within 1.5×; an append is part of every turn).
* Search: ``Session.search`` over an agent with 100,000 stored messages (a 5,000-word vocabulary plus
  common words, 40 words per message), for a rare word, a common word, a two-word phrase and a word that
  does not occur. Budget ≤ 10 ms median.
* Model input per turn: ``read_model_messages()`` right after each append (overlays, truncation and the
  per-message conversion cache), at 10 and 10,000 messages. Reported, not budgeted: it is part of the
  per-turn overhead, which is budgeted for Think as a whole.
* Cold wake: a fresh ``Session`` object on a store holding 10,000 messages: ``open()`` (metadata scan,
  path, hydration of the window) plus the first model input (``read_model_messages()``, which converts
  every message once). Budget ≤ 50 ms (DESIGN.md: cold wake of 10,000 messages to the
  first streamed chunk; the model call itself is not ponder's cost).

Prints medians, p95s and ratios against the budgets; never asserts. Stores live in a temporary directory.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))

from ponder.sessions import Session  # noqa: E402
from ponder.storage import SQLiteStore  # noqa: E402

BUDGET_SEARCH_S = 0.010
BUDGET_WAKE_S = 0.050
BUDGET_FLATNESS = 1.5

_rng = random.Random(7)
_VOCAB = [f"term{i}" for i in range(5_000)]
_COMMON = ["the", "agent", "answer", "question", "weather", "python", "result", "file"]


def _sentence(words: int = 40) -> str:
    return " ".join(
        _rng.choice(_COMMON) if _rng.random() < 0.3 else _rng.choice(_VOCAB) for _ in range(words)
    )


def _history(n: int, prefix: str) -> list[dict[str, Any]]:
    out = []
    for i in range(n):
        role = "user" if i % 2 == 0 else "assistant"
        out.append({"id": f"{prefix}{i}", "role": role, "parts": [{"type": "text", "text": _sentence()}]})
    return out


def pct(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(p / 100 * len(ordered)) - 1))]


async def _filled(store: SQLiteStore, agent: str, n: int) -> Session:
    session = Session(store, agent)
    await session.open()
    messages = _history(n, f"{agent}-")
    for start in range(0, n, 5_000):
        await session.append_many(messages[start : start + 5_000])
    return session


async def bench_append(
    store_dir: Path, appends: int
) -> tuple[dict[int, list[float]], dict[int, list[float]]]:
    results: dict[int, list[float]] = {}
    views: dict[int, list[float]] = {}
    for history in (10, 10_000):
        store = SQLiteStore(store_dir / f"append-{history}.sqlite3")
        await store.open()
        session = await _filled(store, f"h{history}", history)
        for i in range(50):  # warm-up
            await session.append(
                {"id": f"w{i}", "role": "user", "parts": [{"type": "text", "text": _sentence()}]}
            )
        samples = []
        for i in range(appends):
            message = {"id": f"x{i}", "role": "user", "parts": [{"type": "text", "text": _sentence()}]}
            start = time.perf_counter()
            await session.append(message)
            samples.append(time.perf_counter() - start)
        results[history] = samples
        # A turn's model input: append one message, then read (only the read is timed).
        await session.read_model_messages()
        reads = []
        for i in range(appends):
            message = {"id": f"y{i}", "role": "user", "parts": [{"type": "text", "text": _sentence()}]}
            await session.append(message)
            start = time.perf_counter()
            await session.read_model_messages()
            reads.append(time.perf_counter() - start)
        views[history] = reads
        await session.close()
        await store.close()
    return results, views


async def bench_search(store_dir: Path, messages: int, rounds: int) -> dict[str, list[float]]:
    store = SQLiteStore(store_dir / "search.sqlite3")
    await store.open()
    session = await _filled(store, "search", messages)
    reopened = Session(store, "search")
    await reopened.open()
    queries = {
        "rare word": "term4242",
        "common word": "weather",
        "two-word phrase": "the answer",
        "no match": "zzzzzz",
    }
    results: dict[str, list[float]] = {}
    for label, query in queries.items():
        await reopened.search(query)  # warm-up
        samples = []
        for _ in range(rounds):
            start = time.perf_counter()
            await reopened.search(query, limit=10)
            samples.append(time.perf_counter() - start)
        results[label] = samples
    await session.close()
    await store.close()
    return results


async def bench_wake(store_dir: Path, messages: int, rounds: int) -> dict[str, list[float]]:
    store = SQLiteStore(store_dir / "wake.sqlite3")
    await store.open()
    filled = await _filled(store, "wake", messages)
    await filled.close()
    del filled
    out: dict[str, list[float]] = {"open": [], "first": [], "open cpu": [], "first cpu": []}
    for _ in range(rounds):
        start, start_cpu = time.perf_counter(), time.process_time()
        session = Session(store, "wake")
        await session.open()
        opened, opened_cpu = time.perf_counter(), time.process_time()
        await session.read_model_messages()
        done, done_cpu = time.perf_counter(), time.process_time()
        out["open"].append(opened - start)
        out["first"].append(done - start)
        out["open cpu"].append(opened_cpu - start_cpu)
        out["first cpu"].append(done_cpu - start_cpu)
        await session.close()
        del session
    await store.close()
    return out


def _fmt(seconds: float) -> str:
    return f"{seconds * 1e6:.1f} µs" if seconds < 1e-3 else f"{seconds * 1e3:.2f} ms"


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="10,000 messages for search, fewer samples")
    args = parser.parse_args()
    appends = 300 if args.quick else 2_000
    search_messages = 10_000 if args.quick else 100_000
    rounds = 50 if args.quick else 200
    wake_rounds = 5 if args.quick else 20

    began = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="ponder-bench-sessions-") as tmp:
        store_dir = Path(tmp)
        print("append …", file=sys.stderr)
        append, views = asyncio.run(bench_append(store_dir, appends))
        print(f"search over {search_messages:,} messages …", file=sys.stderr)
        search = asyncio.run(bench_search(store_dir, search_messages, rounds))
        print("cold wake …", file=sys.stderr)
        wake = asyncio.run(bench_wake(store_dir, 10_000, wake_rounds))

    rows: list[tuple[str, ...]] = []
    small, large = statistics.median(append[10]), statistics.median(append[10_000])
    for history, samples in append.items():
        rows.append(
            (
                f"append, {history:,} messages stored",
                _fmt(statistics.median(samples)),
                _fmt(pct(samples, 95)),
                "-",
                "-",
            )
        )
    rows.append(
        (
            "append flatness (10,000 vs 10)",
            f"{large / small:.2f}×",
            "-",
            f"≤ {BUDGET_FLATNESS}×",
            "ok" if large / small <= BUDGET_FLATNESS else "OVER",
        )
    )
    for history, samples in views.items():
        rows.append(
            (
                f"model input per turn (warm), {history:,} messages",
                _fmt(statistics.median(samples)),
                _fmt(pct(samples, 95)),
                "-",
                "-",
            )
        )
    all_search: list[float] = []
    for label, samples in search.items():
        all_search += samples
        med = statistics.median(samples)
        rows.append(
            (
                f"search {search_messages:,}: {label}",
                _fmt(med),
                _fmt(pct(samples, 95)),
                f"≤ {BUDGET_SEARCH_S * 1e3:.0f} ms",
                f"{med / BUDGET_SEARCH_S:.3f}× budget" + ("" if med <= BUDGET_SEARCH_S else " OVER"),
            )
        )
    med = statistics.median(all_search)
    rows.append(
        (
            f"search {search_messages:,}: all queries",
            _fmt(med),
            _fmt(pct(all_search, 95)),
            f"≤ {BUDGET_SEARCH_S * 1e3:.0f} ms",
            f"{med / BUDGET_SEARCH_S:.3f}× budget" + ("" if med <= BUDGET_SEARCH_S else " OVER"),
        )
    )
    for label, samples in (
        ("cold wake 10,000: open()", wake["open"]),
        ("cold wake 10,000: open(), process CPU time", wake["open cpu"]),
        ("cold wake 10,000: to first model input", wake["first"]),
        ("cold wake 10,000: to first model input, CPU time", wake["first cpu"]),
    ):
        med = statistics.median(samples)
        rows.append(
            (
                label,
                _fmt(med),
                _fmt(pct(samples, 95)),
                f"≤ {BUDGET_WAKE_S * 1e3:.0f} ms",
                f"{med / BUDGET_WAKE_S:.2f}× budget" + ("" if med <= BUDGET_WAKE_S else " OVER"),
            )
        )

    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(
        f"ponder sessions benchmark ({'quick' if args.quick else 'full'}) — Python {platform.python_version()}, "
        f"{os.cpu_count()} CPU(s), load average {load:.2f}, took {time.perf_counter() - began:.1f}s"
    )
    headers = ("metric", "median", "p95", "budget", "ratio")
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(headers)]
    print("  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True)))
    print("  ".join("-" * w for w in widths))
    for row in rows:
        print("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)))


if __name__ == "__main__":
    main()
