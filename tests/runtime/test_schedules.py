from __future__ import annotations

import asyncio
import time
from datetime import UTC, datetime, timedelta

import pytest

from ponder import AgentHost

from .agents import Notebook


@pytest.fixture
def ran(host: AgentHost) -> asyncio.Event:
    host.schedule_ran = asyncio.Event()  # type: ignore[attr-defined]
    return host.schedule_ran  # type: ignore[attr-defined]


async def wait_for_rows_gone(host: AgentHost, agent_id: str) -> None:
    # The callback signals before its row is removed; the removal ends the schedule's task.
    agent = await host.get_agent_by_id(agent_id)
    assert agent is not None
    await agent.wait_until_idle()
    rows = await host.store.fetch_all("SELECT id FROM ponder_schedules WHERE agent_id = ?", (agent_id,))
    assert rows == [], "schedule row was not removed"


async def test_delayed_schedule_runs_once_with_its_payload(host: AgentHost, ran: asyncio.Event) -> None:
    agent = await host.get_agent(Notebook, "alice")
    schedule = await agent.schedule(0.05, agent.record, {"hello": "world"})
    assert schedule.kind == "delayed"
    assert [s.id for s in await agent.get_schedules()] == [schedule.id]
    await asyncio.wait_for(ran.wait(), 5)
    await wait_for_rows_gone(host, agent.id)
    assert await agent.storage.get("runs") == [{"payload": {"hello": "world"}, "kind": "delayed"}]
    assert await agent.get_schedules() == []


async def test_datetime_schedule_and_callbacks_without_arguments(host: AgentHost, ran: asyncio.Event) -> None:
    agent = await host.get_agent(Notebook, "alice")
    schedule = await agent.schedule(datetime.now(UTC) + timedelta(milliseconds=50), "no_args")
    assert schedule.kind == "scheduled"
    await asyncio.wait_for(ran.wait(), 5)
    assert await agent.storage.get("no_args") is True


async def test_cron_schedule_moves_to_its_next_occurrence_after_running(
    host: AgentHost, ran: asyncio.Event
) -> None:
    agent = await host.get_agent(Notebook, "alice")
    schedule = await agent.schedule("* * * * *", "record", "tick")
    assert schedule.kind == "cron" and schedule.due_at > time.time()
    # Make it due now, as if the minute had come.
    await host.store.execute(
        "UPDATE ponder_schedules SET due_at = ? WHERE id = ?", (time.time() - 1, schedule.id)
    )
    host._schedules_changed()
    await asyncio.wait_for(ran.wait(), 5)
    await agent.wait_until_idle()
    current = await agent.get_schedule(schedule.id)
    assert current is not None and current.due_at > time.time()  # re-armed, not deleted
    assert await agent.storage.get("runs") == [{"payload": "tick", "kind": "cron"}]


async def test_cancel_schedule(host: AgentHost) -> None:
    agent = await host.get_agent(Notebook, "alice")
    schedule = await agent.schedule(60, "record")
    assert await agent.cancel_schedule(schedule.id) is True
    assert await agent.cancel_schedule(schedule.id) is False
    assert await agent.get_schedule(schedule.id) is None


async def test_schedules_are_scoped_to_their_agent(host: AgentHost) -> None:
    alice = await host.get_agent(Notebook, "alice")
    bob = await host.get_agent(Notebook, "bob")
    schedule = await alice.schedule(60, "record")
    assert await bob.get_schedules() == []
    assert await bob.get_schedule(schedule.id) is None
    assert await bob.cancel_schedule(schedule.id) is False
    assert await alice.get_schedule(schedule.id) is not None


async def test_failing_callback_is_logged_and_removed(
    host: AgentHost, ran: asyncio.Event, caplog: pytest.LogCaptureFixture
) -> None:
    agent = await host.get_agent(Notebook, "alice")
    await agent.schedule(0, "explode")
    await asyncio.wait_for(ran.wait(), 5)
    await wait_for_rows_gone(host, agent.id)
    assert "scheduled explode raised" in caplog.text
    assert await agent.add("still works") == 1


@pytest.mark.parametrize(
    ("when", "callback", "error", "match"),
    [
        (-1, "record", ValueError, "zero or more"),
        (datetime(2030, 1, 1), "record", ValueError, "timezone-aware"),
        ("not a cron", "record", ValueError, "5 fields"),
        (1, "missing_method", ValueError, "no method 'missing_method'"),
        (True, "record", TypeError, "bool"),
        ([1], "record", TypeError, "list"),
    ],
)
async def test_bad_schedules_are_refused_and_store_nothing(
    host: AgentHost, when, callback, error, match
) -> None:
    agent = await host.get_agent(Notebook, "alice")
    with pytest.raises(error, match=match):
        await agent.schedule(when, callback)
    assert await agent.get_schedules() == []


async def test_schedule_due_while_down_runs_once_at_start(store_url: str) -> None:
    async with AgentHost(store_url) as first:
        agent = await first.get_agent(Notebook, "alice")
        schedule = await agent.schedule(0.2, "record", "while down")
        await first.store.execute(
            "UPDATE ponder_schedules SET due_at = ? WHERE id = ?", (time.time() + 3600, schedule.id)
        )
    # Down: make it come due, then start a fresh host without asking for the agent.
    second = AgentHost(store_url, agents=[Notebook])
    second.schedule_ran = asyncio.Event()  # type: ignore[attr-defined]
    await second.store.open()
    await second.store.execute(
        "UPDATE ponder_schedules SET due_at = ? WHERE id = ?", (time.time() - 10, schedule.id)
    )
    await second.start()
    try:
        await asyncio.wait_for(second.schedule_ran.wait(), 5)  # type: ignore[attr-defined]
        await wait_for_rows_gone(second, "notebook/alice")
        woken = await second.get_agent(Notebook, "alice")
        assert await woken.storage.get("runs") == [{"payload": "while down", "kind": "delayed"}]
    finally:
        await second.close()
