"""Local model benchmark: ponder's adapter vs. the same llama-server called directly with httpx.

    .venv/bin/python bench/local.py            # 7 measured runs per path and model (about a minute)
    .venv/bin/python bench/local.py --quick    # 3 runs, SmolLM2 only (about 10 s)

For each local model (SmolLM2-135M, Qwen2.5-Coder-0.5B) it starts this process's llama-server (fetching the
model first if it is not cached; that is announced on stderr), then streams the same chat request through
two paths, alternating them:

- direct: ``httpx`` POSTs to ``/v1/chat/completions`` with ``stream: true`` and reads the SSE lines;
- ponder: ``resolve_model("local:<name>").stream(ModelRequest(...))``, i.e. pydantic-ai's OpenAI model, the
  OpenAI SDK and ponder's event mapping.

Both requests are identical: temperature 0, ``max_tokens`` N with ``ignore_eos`` (so every run generates
exactly N tokens) and ``cache_prompt: false`` (so every run processes the whole prompt). It reports medians
of time to first token (TTFT), decode rate (tokens after the first / time after the first) and total time,
and the ponder/direct ratios: the framework's overhead. Also timed once: a process's first use of a cached
model (sha256 check + server start until ``/health``). Never asserts. Progress on stderr, table on stdout.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import statistics
import sys
import time
from dataclasses import dataclass

import httpx

from ponder.models import ModelRequest, ModelSettings, TextDelta, Usage, UserMessage, resolve_model
from ponder.models import _local_files as local_files
from ponder.models._local import LocalModel
from ponder.models._local_server import LlamaServer, stop_local_servers

SYSTEM = "You are a helpful assistant."
PROMPT = "Write a short poem about the sea."


@dataclass
class Run:
    ttft: float
    total: float
    tokens: int
    cpu: float
    """CPU seconds this (client) process spent on the run."""

    @property
    def rate(self) -> float:
        """Decode rate: tokens after the first, per second after the first token."""
        decode = self.total - self.ttft
        return (self.tokens - 1) / decode if decode > 0 and self.tokens > 1 else float("nan")


def log(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def llama_options() -> dict[str, object]:
    """llama.cpp request options that make runs comparable: fixed length, no prompt cache."""
    return {"ignore_eos": True, "cache_prompt": False, "seed": 1}


async def direct_run(client: httpx.AsyncClient, server: LlamaServer, max_tokens: int) -> Run:
    body = {
        "model": "local",
        "messages": [{"role": "system", "content": SYSTEM}, {"role": "user", "content": PROMPT}],
        "stream": True,
        "stream_options": {"include_usage": True},
        "temperature": 0,
        "max_tokens": max_tokens,
        **llama_options(),
    }
    started, cpu = time.perf_counter(), time.process_time()
    first: float | None = None
    tokens = 0
    async with client.stream(
        "POST",
        f"{server.base_url}/chat/completions",
        json=body,
        headers={"Authorization": f"Bearer {server.api_key}"},
    ) as response:
        response.raise_for_status()
        async for line in response.aiter_lines():
            if not line.startswith("data: ") or line == "data: [DONE]":
                continue
            data = json.loads(line[6:])
            for choice in data.get("choices") or []:
                if (choice.get("delta") or {}).get("content") and first is None:
                    first = time.perf_counter()
            if data.get("usage"):
                tokens = data["usage"]["completion_tokens"]
    end = time.perf_counter()
    return Run((first or end) - started, end - started, tokens, time.process_time() - cpu)


async def ponder_run(model: LocalModel, max_tokens: int) -> Run:
    request = ModelRequest(
        system=SYSTEM,
        messages=[UserMessage(PROMPT)],
        settings=ModelSettings(
            temperature=0, max_tokens=max_tokens, max_retries=0, extra={"extra_body": llama_options()}
        ),
    )
    started, cpu = time.perf_counter(), time.process_time()
    first: float | None = None
    tokens = 0
    async for event in model.stream(request):
        if isinstance(event, TextDelta) and first is None:
            first = time.perf_counter()
        elif isinstance(event, Usage):
            tokens = event.output_tokens
    end = time.perf_counter()
    return Run((first or end) - started, end - started, tokens, time.process_time() - cpu)


def load_average() -> str:
    """The 1-minute load average: other work on the machine slows llama-server (it uses 2 threads)."""
    try:
        return f"{os.getloadavg()[0]:.1f}"
    except OSError:
        return "?"


def median(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


def first_use(name: str) -> tuple[float, float]:
    """(sha256 check of the cached GGUF, server launch until healthy) for a fresh start, in seconds."""
    model = resolve_model(f"local:{name}")
    assert isinstance(model, LocalModel)
    model.model_path_sync()  # fetch if needed (announced); not timed
    stop_local_servers()
    local_files._verified.clear()
    started = time.perf_counter()
    model.model_path_sync()
    verified = time.perf_counter()
    model.start_sync()
    ready = time.perf_counter()
    return verified - started, ready - verified


async def bench_model(name: str, runs: int, max_tokens: int) -> dict[str, object]:
    model = resolve_model(f"local:{name}")
    assert isinstance(model, LocalModel)
    server = await model.start()
    direct: list[Run] = []
    adapted: list[Run] = []
    async with httpx.AsyncClient(timeout=120) as client:
        await direct_run(client, server, max_tokens)  # warm-up of both paths
        await ponder_run(model, max_tokens)
        for index in range(runs):
            log(f"  {name}: run {index + 1}/{runs}")
            pair = [("direct", direct), ("ponder", adapted)]
            if index % 2:
                pair.reverse()  # alternate which path goes first
            for path, results in pair:
                if path == "direct":
                    results.append(await direct_run(client, server, max_tokens))
                else:
                    results.append(await ponder_run(model, max_tokens))
    await model.aclose()
    return {"name": name, "direct": direct, "ponder": adapted}


def fmt_us(seconds: float) -> str:
    return f"{seconds * 1e6:,.0f} µs"


def fmt_ms(seconds: float) -> str:
    return f"{seconds * 1e3:,.1f} ms"


def table(rows: list[list[str]], headers: list[str]) -> str:
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(headers)]
    lines = ["  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True))]
    lines.append("  ".join("-" * w for w in widths))
    for row in rows:
        lines.append(
            "  ".join(
                (c.ljust(w) if i == 0 else c.rjust(w))
                for i, (c, w) in enumerate(zip(row, widths, strict=True))
            )
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="3 runs, SmolLM2 only")
    parser.add_argument("--runs", type=int, default=None, help="measured runs per path and model (default 7)")
    parser.add_argument("--max-tokens", type=int, default=64, help="tokens generated per run (default 64)")
    parser.add_argument("--models", nargs="*", default=None, help="local model names (default: both)")
    args = parser.parse_args()
    runs = args.runs or (3 if args.quick else 7)
    names = args.models or (["smollm2-135m"] if args.quick else ["smollm2-135m", "qwen2.5-coder-0.5b"])

    started = time.perf_counter()
    load_before = load_average()
    startup: dict[str, tuple[float, float]] = {}
    results = []
    for name in names:
        log(f"{name}: first use in a process (sha256 check + server start)")
        startup[name] = first_use(name)
        log(f"{name}: {runs} runs x 2 paths, {args.max_tokens} tokens each")
        results.append(asyncio.run(bench_model(name, runs, args.max_tokens)))
    stop_local_servers()

    rows: list[list[str]] = []
    for result in results:
        name = str(result["name"])
        direct: list[Run] = result["direct"]  # type: ignore[assignment]
        adapted: list[Run] = result["ponder"]  # type: ignore[assignment]
        d_ttft, p_ttft = median([r.ttft for r in direct]), median([r.ttft for r in adapted])
        d_rate, p_rate = median([r.rate for r in direct]), median([r.rate for r in adapted])
        d_total, p_total = median([r.total for r in direct]), median([r.total for r in adapted])
        rows.append(
            [
                f"{name}: time to first token",
                fmt_ms(d_ttft),
                fmt_ms(p_ttft),
                f"{(p_ttft - d_ttft) * 1e3:+,.1f} ms",
                f"{p_ttft / d_ttft:.2f}x",
            ]
        )
        rows.append(
            [
                f"{name}: decode rate",
                f"{d_rate:,.1f} tok/s",
                f"{p_rate:,.1f} tok/s",
                f"{p_rate - d_rate:+,.1f} tok/s",
                f"{p_rate / d_rate:.2f}x",
            ]
        )
        rows.append(
            [
                f"{name}: total ({args.max_tokens} tokens)",
                fmt_ms(d_total),
                fmt_ms(p_total),
                f"{(p_total - d_total) * 1e3:+,.1f} ms",
                f"{p_total / d_total:.2f}x",
            ]
        )
        d_cpu = median([r.cpu / max(r.tokens, 1) for r in direct])
        p_cpu = median([r.cpu / max(r.tokens, 1) for r in adapted])
        rows.append(
            [
                f"{name}: client CPU per token",
                fmt_us(d_cpu),
                fmt_us(p_cpu),
                f"{(p_cpu - d_cpu) * 1e6:+,.0f} µs",
                f"{p_cpu / d_cpu:.2f}x",
            ]
        )
    for name, (verify, start) in startup.items():
        rows.append([f"{name}: first use: sha256 check of the GGUF", fmt_ms(verify), "-", "-", "-"])
        rows.append([f"{name}: first use: llama-server start → /health", fmt_ms(start), "-", "-", "-"])

    print(
        f"ponder local model benchmark — Python {platform.python_version()}, {os.cpu_count()} CPU(s), "
        f"{time.strftime('%Y-%m-%d')}, {runs} runs, {args.max_tokens} tokens per run, "
        f"took {time.perf_counter() - started:.1f}s, load average {load_before} before / {load_average()} after"
    )
    print()
    print(table(rows, ["metric (median)", "direct httpx", "ponder adapter", "difference", "ponder/direct"]))


if __name__ == "__main__":
    main()
