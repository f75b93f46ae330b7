"""Agent classes shared by the runtime tests."""

from __future__ import annotations

import asyncio
from typing import Any

from ponder import Agent, FiberRecoveryContext, Schedule, callable


class Notebook(Agent):
    initial_state = {"notes": []}
    starts = 0

    async def on_start(self) -> None:
        type(self).starts += 1
        self.started_once = True

    @callable
    async def add(self, note: str) -> int:
        await self.set_state({"notes": [*self.state["notes"], note]})
        return len(self.state["notes"])

    async def record(self, payload: Any, schedule: Schedule) -> None:
        runs = await self.storage.get("runs", [])
        await self.storage.put("runs", [*runs, {"payload": payload, "kind": schedule.kind}])
        event = getattr(self.host, "schedule_ran", None)
        if event is not None:
            event.set()

    async def no_args(self) -> None:
        await self.storage.put("no_args", True)
        self.host.schedule_ran.set()  # type: ignore[attr-defined]

    async def explode(self, payload: Any) -> None:
        self.host.schedule_ran.set()  # type: ignore[attr-defined]
        raise RuntimeError("scheduled failure")


class Worker(Agent):
    """Fibers: a job that stashes progress, and a recovery hook that records what it got."""

    fail_recoveries = 0

    async def on_start(self) -> None:
        self.gate_reached = asyncio.Event()

    async def job(self, ctx: Any, gate: asyncio.Event, steps: int) -> str:
        for step in range(steps):
            await ctx.stash({"step": step})
        self.gate_reached.set()
        await gate.wait()
        return "finished"

    async def on_fiber_recovered(self, ctx: FiberRecoveryContext) -> None:
        if type(self).fail_recoveries > 0:
            type(self).fail_recoveries -= 1
            raise RuntimeError("not yet")
        recovered = await self.storage.get("recovered", [])
        await self.storage.put("recovered", [*recovered, {"name": ctx.name, "snapshot": ctx.snapshot}])
        event = getattr(self.host, "recovered", None)
        if event is not None:
            event.set()


class Child(Agent):
    initial_state = {"role": "child"}


class Parent(Agent):
    async def child(self, name: str) -> Child:
        return await self.sub_agent(Child, name)
