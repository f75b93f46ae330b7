from __future__ import annotations

import asyncio
import json
import time

import pytest

from ponder import AgentHost

from .agents import Worker


async def fiber_rows(host: AgentHost) -> list[dict]:
    return await host.store.fetch_all("SELECT name, snapshot FROM ponder_fibers")


async def test_fiber_returns_result_and_leaves_no_row(host: AgentHost) -> None:
    agent = await host.get_agent(Worker, "w")
    gate = asyncio.Event()
    gate.set()
    assert await agent.run_fiber("job", lambda ctx: agent.job(ctx, gate, 3)) == "finished"
    assert await fiber_rows(host) == []


async def test_stash_is_durable_while_the_fiber_runs(host: AgentHost) -> None:
    agent = await host.get_agent(Worker, "w")
    gate = asyncio.Event()
    task = asyncio.ensure_future(agent.run_fiber("job", lambda ctx: agent.job(ctx, gate, 3)))
    await agent.gate_reached.wait()
    rows = await fiber_rows(host)
    assert [(r["name"], json.loads(r["snapshot"])) for r in rows] == [("job", {"step": 2})]
    gate.set()
    await task
    assert await fiber_rows(host) == []


async def test_fiber_errors_propagate_and_leave_no_row(host: AgentHost) -> None:
    agent = await host.get_agent(Worker, "w")

    async def fail(ctx) -> None:
        await ctx.stash("partial")
        raise ValueError("bad")

    with pytest.raises(ValueError, match="bad"):
        await agent.run_fiber("failing", fail)
    assert await fiber_rows(host) == []


async def test_stash_outside_a_fiber_is_an_error(host: AgentHost) -> None:
    agent = await host.get_agent(Worker, "w")
    with pytest.raises(RuntimeError, match="run_fiber"):
        await agent.stash({"x": 1})


async def test_interrupted_fiber_is_recovered_at_start_without_a_request(store_url: str) -> None:
    first = AgentHost(store_url, shutdown_timeout=0.0)
    await first.start()
    agent = await first.get_agent(Worker, "w")
    agent.create_task(agent.run_fiber("job", lambda ctx: agent.job(ctx, asyncio.Event(), 2)))
    await agent.gate_reached.wait()
    await first.close()  # cancels the stuck work: its row must stay for the next start
    second = AgentHost(store_url, agents=[Worker])
    second.recovered = asyncio.Event()  # type: ignore[attr-defined]
    await second.start()
    try:
        await asyncio.wait_for(second.recovered.wait(), 5)  # type: ignore[attr-defined]
        woken = second.live_agents[0]
        assert await woken.storage.get("recovered") == [{"name": "job", "snapshot": {"step": 1}}]
        await woken.wait_until_idle()
        assert await fiber_rows(second) == []
    finally:
        await second.close()


async def test_failed_recovery_is_retried(store_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("ponder.runtime._agent.FIBER_RECOVERY_MAX_DELAY", 0.01)
    async with AgentHost(store_url) as first:  # the rows a crashed process would leave behind
        await first.store.execute(
            "INSERT INTO ponder_agents (agent_id, class_name, name, created_at) VALUES ('worker/w', 'worker', 'w', 0)"
        )
        await first.store.execute(
            "INSERT INTO ponder_fibers (id, agent_id, name, snapshot, created_at) VALUES ('f1', 'worker/w', 'job', '7', ?)",
            (time.time(),),
        )
    Worker.fail_recoveries = 2
    second = AgentHost(store_url, agents=[Worker])
    second.recovered = asyncio.Event()  # type: ignore[attr-defined]
    await second.start()
    try:
        await asyncio.wait_for(second.recovered.wait(), 5)  # type: ignore[attr-defined]
        assert Worker.fail_recoveries == 0
        assert await second.live_agents[0].storage.get("recovered") == [{"name": "job", "snapshot": 7}]
    finally:
        await second.close()


async def test_recorded_fiber_is_recovered_until_forgotten(store_url: str) -> None:
    async with AgentHost(store_url) as first:
        agent = await first.get_agent(Worker, "w")
        kept = await agent.record_fiber("queued", {"step": 0})
        await agent.update_fiber(kept, {"step": 1})
        dropped = await agent.record_fiber("started")
        await agent.forget_fiber(dropped)
    second = AgentHost(store_url, agents=[Worker])
    second.recovered = asyncio.Event()  # type: ignore[attr-defined]
    await second.start()
    try:
        await asyncio.wait_for(second.recovered.wait(), 5)  # type: ignore[attr-defined]
        woken = second.live_agents[0]
        assert await woken.storage.get("recovered") == [{"name": "queued", "snapshot": {"step": 1}}]
    finally:
        await second.close()
