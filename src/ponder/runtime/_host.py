"""``AgentHost``: keeps at most one live instance per agent id, and wakes agents that have work.

The host owns the store, a registry of agent classes by URL segment, the live instances, one timer
for every agent's schedules and a sweeper that evicts idle instances. At start it wakes every agent
with an interrupted fiber and runs schedules that came due while the process was down, so recovery
never waits for a client to come back.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import time
from collections.abc import Iterable
from typing import Any, TypeVar

from ..storage import Store, create_store, registered_migrations
from ._agent import Agent
from ._naming import agent_id_for
from ._schedules import Schedule

__all__ = ["AgentHost"]

logger = logging.getLogger("ponder.runtime")

A = TypeVar("A", bound=Agent)

#: Upper bound on how long the scheduler sleeps, so schedules written by another process are seen.
SCHEDULER_MAX_SLEEP = 30.0


class AgentHost:
    """Hosts agents on one store.

    Use it directly for scripts, workers and tests (``async with AgentHost("sqlite:///x.db") as host:
    agent = await host.get_agent(MyAgent, "alice")``); the ASGI app uses one internally.
    """

    def __init__(
        self,
        store: str | os.PathLike[str] | Store | None = None,
        *,
        agents: Iterable[type[Agent]] = (),
        idle_timeout: float = 60.0,
        shutdown_timeout: float = 10.0,
    ) -> None:
        self.store: Store = create_store(store)
        self.idle_timeout = idle_timeout
        self.shutdown_timeout = shutdown_timeout
        self._classes: dict[str, type[Agent]] = {}
        self._live: dict[str, Agent] = {}
        self._creating: dict[str, asyncio.Future[Agent]] = {}
        self._started = False
        self._start_lock: asyncio.Lock | None = None
        self._closing = False
        self._closed = False
        self._migrations_seen = 0
        self._background: set[asyncio.Task[Any]] = set()
        self._wakeup: asyncio.Event | None = None
        self._inflight_schedules: set[str] = set()
        self._orphan_schedules: set[str] = set()
        self.register(*agents)

    def __repr__(self) -> str:
        return f"AgentHost({self.store!r}, live={len(self._live)})"

    async def __aenter__(self) -> AgentHost:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # -- registry ----------------------------------------------------------------------------------

    def register(self, *classes: type[Agent]) -> None:
        """Make agent classes routable and recoverable by their URL segment."""
        for cls in classes:
            if not (isinstance(cls, type) and issubclass(cls, Agent)):
                raise TypeError(f"{cls!r} is not an Agent subclass")
            segment = cls.class_segment()
            if segment == "sub":
                raise ValueError(
                    f"{cls.__name__}: the URL segment 'sub' is reserved for sub-agents; rename the class"
                )
            existing = self._classes.get(segment)
            if existing is not None and existing is not cls:
                if existing.__qualname__ == cls.__qualname__ and existing.__module__ == cls.__module__:
                    self._classes[segment] = cls  # the same class re-imported (e.g. by --reload)
                    continue
                raise ValueError(
                    f"{cls.__module__}.{cls.__qualname__} and {existing.__module__}.{existing.__qualname__} "
                    f"both map to the URL segment {segment!r}; rename one of them"
                )
            self._classes[segment] = cls

    def agent_class(self, segment: str) -> type[Agent] | None:
        """The registered class for a URL segment such as ``my-agent``."""
        return self._classes.get(segment)

    @property
    def agent_classes(self) -> dict[str, type[Agent]]:
        return dict(self._classes)

    @property
    def live_agents(self) -> list[Agent]:
        """The instances in memory right now."""
        return list(self._live.values())

    @property
    def closing(self) -> bool:
        return self._closing

    # -- lifecycle ---------------------------------------------------------------------------------

    async def start(self) -> None:
        """Open the store, wake agents with interrupted work, and start the scheduler. Idempotent."""
        if self._closed or self._closing:
            raise RuntimeError("this AgentHost was closed; create a new one")
        if self._started:
            return
        if self._start_lock is None:
            self._start_lock = asyncio.Lock()
        async with self._start_lock:
            if self._started:
                return
            await self.store.open()
            self._migrations_seen = len(registered_migrations())
            self._wakeup = asyncio.Event()
            self._started = True
            self._spawn(self._scheduler_loop(), "ponder-scheduler")
            self._spawn(self._sweeper_loop(), "ponder-sweeper")
            await self._wake_agents_with_work()

    async def _wake_agents_with_work(self) -> None:
        rows = await self.store.fetch_all("SELECT DISTINCT agent_id FROM ponder_fibers")
        for row in rows:
            try:
                agent = await self.get_agent_by_id(row["agent_id"])
            except Exception:
                logger.exception("waking agent %s to recover its interrupted work failed", row["agent_id"])
                continue
            if agent is None:
                logger.warning(
                    "agent %s has interrupted work but its class is not registered here", row["agent_id"]
                )

    async def close(self) -> None:
        """Stop scheduling, let running work finish (up to ``shutdown_timeout``), checkpoint, close.

        Work still running after the timeout is cancelled; its fiber rows stay in the store, so the
        next start recovers it.
        """
        if self._closed or self._closing:
            return
        self._closing = True
        for task in list(self._background):
            task.cancel()
        await asyncio.gather(*self._background, return_exceptions=True)
        work = {task for agent in self._live.values() for task in agent._tasks}
        if work:
            logger.info(
                "waiting up to %.1fs for %d running task(s) to finish", self.shutdown_timeout, len(work)
            )
            _, pending = await asyncio.wait(work, timeout=self.shutdown_timeout)
            for task in pending:
                task.cancel()
            if pending:
                logger.warning(
                    "cancelled %d task(s) still running at shutdown; fibers resume at next start",
                    len(pending),
                )
                await asyncio.gather(*pending, return_exceptions=True)
        for agent in list(self._live.values()):
            for connection in agent.connections:
                connection.close(1012, "server restarting")
        self._live.clear()
        await self.store.close()
        self._closed = True

    def _spawn(self, coro: Any, name: str) -> None:
        task = asyncio.get_running_loop().create_task(coro, name=name)
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    # -- instances ---------------------------------------------------------------------------------

    async def get_agent(self, cls: type[A], name: str) -> A:
        """The live instance of ``cls`` named ``name``, created (and ``on_start``-ed) if needed."""
        if not isinstance(name, str) or not name:
            raise ValueError("an agent name must be a non-empty string")
        self.register(cls)
        return await self._get_agent(cls, name, agent_id_for(cls.class_segment(), name), None)

    async def get_agent_by_id(self, agent_id: str) -> Agent | None:
        """Wake an agent from its stored id; ``None`` if unknown or its class is not registered."""
        live = self._live.get(agent_id)
        if live is not None:
            return live
        await self.start()
        row = await self.store.fetch_one(
            "SELECT class_name, name, parent_id FROM ponder_agents WHERE agent_id = ?", (agent_id,)
        )
        if row is None:
            return None
        cls = self._classes.get(row["class_name"])
        if cls is None:
            return None
        if row["parent_id"] is not None:
            parent = await self.get_agent_by_id(row["parent_id"])
            if parent is None:
                return None
            return await parent.sub_agent(cls, row["name"])
        return await self.get_agent(cls, row["name"])

    async def _get_agent(self, cls: type[A], name: str, agent_id: str, parent_id: str | None) -> A:
        live = self._live.get(agent_id)
        if live is not None:
            live._touch()
            return live  # type: ignore[return-value]
        if self._closing:
            raise RuntimeError("the host is shutting down")
        pending = self._creating.get(agent_id)
        if pending is not None:
            return await asyncio.shield(pending)  # type: ignore[return-value]
        await self.start()
        self.register(cls)
        future: asyncio.Future[Agent] = asyncio.get_running_loop().create_future()
        self._creating[agent_id] = future
        try:
            agent = await self._create(cls, name, agent_id, parent_id)
        except BaseException as exc:
            future.set_exception(exc)
            future.exception()  # mark retrieved: waiters re-raise it, nobody else must
            raise
        finally:
            self._creating.pop(agent_id, None)
        future.set_result(agent)
        return agent

    async def _create(self, cls: type[A], name: str, agent_id: str, parent_id: str | None) -> A:
        if len(registered_migrations()) != self._migrations_seen:
            await self.store.migrate()
            self._migrations_seen = len(registered_migrations())
        await self.store.execute(
            "INSERT INTO ponder_agents (agent_id, class_name, name, parent_id, created_at) VALUES (?, ?, ?, ?, ?)"
            " ON CONFLICT (agent_id) DO NOTHING",
            (agent_id, cls.class_segment(), name, parent_id, time.time()),
        )
        row = await self.store.fetch_one("SELECT state FROM ponder_agents WHERE agent_id = ?", (agent_id,))
        agent = cls(self, name, agent_id=agent_id, parent_id=parent_id)
        agent._load_state(row["state"] if row else None)
        await agent.on_start()
        self._live[agent_id] = agent
        orphans = await self.store.fetch_all(
            "SELECT * FROM ponder_fibers WHERE agent_id = ? ORDER BY created_at", (agent_id,)
        )
        if orphans:
            agent.create_task(agent._recover_fibers(orphans), name=f"recover-fibers:{agent_id}")
        logger.debug("woke %r (%s)", agent, agent_id)
        return agent

    # -- scheduling --------------------------------------------------------------------------------

    def _schedules_changed(self) -> None:
        if self._wakeup is not None:
            self._wakeup.set()

    def _schedule_finished(self, schedule_id: str) -> None:
        self._inflight_schedules.discard(schedule_id)
        self._schedules_changed()

    async def _scheduler_loop(self) -> None:
        assert self._wakeup is not None
        while not self._closing:
            self._wakeup.clear()
            now = time.time()
            try:
                due = await self.store.fetch_all(
                    "SELECT * FROM ponder_schedules WHERE due_at <= ? ORDER BY due_at LIMIT 500", (now,)
                )
                for row in due:
                    if row["id"] not in self._inflight_schedules and row["id"] not in self._orphan_schedules:
                        self._inflight_schedules.add(row["id"])
                        await self._dispatch_schedule(row)
                upcoming = await self.store.fetch_one(
                    "SELECT MIN(due_at) AS due_at FROM ponder_schedules WHERE due_at > ?", (now,)
                )
            except asyncio.CancelledError:
                raise
            except Exception:
                logger.exception("the scheduler failed to read schedules; retrying")
                upcoming = None
            delay = SCHEDULER_MAX_SLEEP
            if upcoming and upcoming["due_at"] is not None:
                delay = min(delay, max(0.0, upcoming["due_at"] - time.time()))
            # asyncio.timeout, not wait_for: on 3.11 wait_for can swallow a cancellation that
            # races with the event being set, and the loop would never stop.
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(delay):
                    await self._wakeup.wait()

    async def _dispatch_schedule(self, row: dict[str, Any]) -> None:
        try:
            agent = await self.get_agent_by_id(row["agent_id"])
        except Exception:
            logger.exception("waking agent %s for schedule %s failed", row["agent_id"], row["id"])
            agent = None
        if agent is None:
            logger.warning(
                "schedule %s belongs to agent %s whose class is not registered here; leaving it",
                row["id"],
                row["agent_id"],
            )
            self._inflight_schedules.discard(row["id"])
            self._orphan_schedules.add(row["id"])
            return
        agent.create_task(agent._run_schedule(Schedule.from_row(row)), name=f"schedule:{row['id']}")

    # -- eviction ----------------------------------------------------------------------------------

    async def _sweeper_loop(self) -> None:
        interval = max(0.05, min(self.idle_timeout / 2, 30.0))
        while True:
            await asyncio.sleep(interval)
            self.evict_idle()

    def evict_idle(self) -> int:
        """Drop instances idle for ``idle_timeout`` (no clients, no work); return how many."""
        now = time.monotonic()
        idle = [agent_id for agent_id, agent in self._live.items() if agent._is_idle(now, self.idle_timeout)]
        for agent_id in idle:
            agent = self._live.pop(agent_id)
            try:
                agent._evicted()
            except Exception:
                logger.exception("releasing evicted agent %s failed", agent_id)
        if idle:
            logger.debug("evicted %d idle agent(s)", len(idle))
        return len(idle)
