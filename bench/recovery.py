"""Time from process (host) start to the first resumed chunk of an interrupted turn; budget ≤ 1 s.

Run: ``.venv/bin/python bench/recovery.py``. Each run streams a turn, kills the host without grace mid-text,
then starts a new host on the same store and measures until the recovered continuation's first chunk.
"""

from __future__ import annotations

import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from ponder import AgentHost
from ponder.testing import ScriptedModel
from ponder.think import Think

LONG = " ".join(f"w{i}" for i in range(200))


def make(model: ScriptedModel, first: asyncio.Event | None) -> type[Think]:
    class Bench(Think):
        def get_model(self) -> Any:
            return model

        async def on_chunk(self, chunk: dict[str, Any]) -> None:
            if first is not None and chunk.get("type") == "text-delta":
                first.set()

    return Bench


async def one(db: Path) -> float:
    streamed = asyncio.Event()
    host = AgentHost(f"sqlite:///{db}", shutdown_timeout=0.0)
    await host.start()
    agent = await host.get_agent(make(ScriptedModel([LONG], chunk_delay=0.002), streamed), "b")
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
    await host.get_agent(make(ScriptedModel(["done."]), resumed), "b")
    await asyncio.wait_for(resumed.wait(), 10)
    elapsed = time.perf_counter() - started
    await host.close()
    return elapsed


async def main() -> None:
    times = []
    for i in range(5):
        with tempfile.TemporaryDirectory() as tmp:
            times.append(await one(Path(tmp) / f"r{i}.sqlite3"))
    median = statistics.median(times)
    print(
        f"recovery: start → first resumed chunk median {median * 1000:.1f} ms over {len(times)} runs "
        f"(min {min(times) * 1000:.1f}, max {max(times) * 1000:.1f}); budget 1000 ms"
    )


if __name__ == "__main__":
    asyncio.run(main())
