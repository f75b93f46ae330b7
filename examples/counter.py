"""A counter agent: state, RPC (plain and streaming), schedules and a durable fiber.

    ponder serve examples/counter.py

Then connect any Cloudflare Agents client to ``/agents/counter/<name>`` (``useAgent({agent:
"Counter", name: "alice"})``), or call it from Python with ``AgentHost``.
"""

from __future__ import annotations

import asyncio

from ponder import Agent, FiberRecoveryContext, callable


class Counter(Agent):
    initial_state = {"count": 0}

    @callable
    async def increment(self, by: int = 1) -> int:
        """Add ``by`` to the count and broadcast the new state to every client."""
        await self.set_state({**self.state, "count": self.state["count"] + by})
        return self.state["count"]

    @callable
    def greet(self, who: str) -> str:
        return f"Hello, {who}! I am {self.name}."

    @callable(streaming=True)
    async def count_to(self, n: int):
        """Stream the numbers 1..n to the caller."""
        for i in range(1, n + 1):
            yield i

    @callable
    async def remind_in(self, seconds: float, note: str) -> str:
        """Durably schedule a reminder; it runs even if the server restarts meanwhile."""
        schedule = await self.schedule(seconds, self.remind, {"note": note})
        return schedule.id

    async def remind(self, payload: dict) -> None:
        reminders = await self.storage.get("reminders", [])
        await self.storage.put("reminders", [*reminders, payload["note"]])
        self.broadcast({"type": "reminder", "note": payload["note"]})

    @callable
    async def reminders(self) -> list[str]:
        return await self.storage.get("reminders", [])

    @callable
    async def start_job(self, steps: int, interval: float = 1.0) -> None:
        """Start long-running durable work in the background; progress is broadcast."""
        self.create_task(self.run_fiber("job", lambda ctx: self._job(ctx, steps, interval)))

    async def _job(self, ctx, steps: int, interval: float) -> None:
        for step in range(steps):
            await ctx.stash({"step": step, "of": steps})
            self.broadcast({"type": "job_progress", "step": step})
            await asyncio.sleep(interval)
        await self.storage.put("job_done", steps)
        self.broadcast({"type": "job_done", "steps": steps})

    @callable
    async def job_done(self):
        return await self.storage.get("job_done")

    async def on_fiber_recovered(self, ctx: FiberRecoveryContext) -> None:
        await self.storage.put("recovered", {"name": ctx.name, "snapshot": ctx.snapshot})

    @callable
    async def recovered(self):
        return await self.storage.get("recovered")
