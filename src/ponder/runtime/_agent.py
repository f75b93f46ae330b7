"""``Agent``: a named, single-writer actor with durable state, schedules, fibers and connections.

This is ponder's Durable Object. An :class:`~ponder.runtime.AgentHost` keeps at most one live instance
per agent id and rebuilds it from the store after it was evicted or the process restarted, so every
durable fact about an agent lives in its rows, never only in memory. The hooks (``on_start``,
``on_connect``, ``on_message``, ...) are the ones Cloudflare's ``Agent`` has, in snake case.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import inspect
import json
import logging
import time
import uuid
from collections.abc import Awaitable, Callable, Coroutine, Iterable, Iterator
from datetime import datetime
from typing import TYPE_CHECKING, Any, ClassVar, TypeVar

from ..storage import Storage
from ._callable import callable_info
from ._connection import Connection, ConnectionInfo
from ._cron import next_cron_time
from ._fibers import FiberContext, FiberRecoveryContext, current_fiber
from ._json import dumps
from ._naming import kebab_case, sub_agent_id_for
from ._schedules import Schedule, resolve_when

if TYPE_CHECKING:
    from ._host import AgentHost

__all__ = ["Agent", "StateUpdateRejected"]

logger = logging.getLogger("ponder.runtime")

T = TypeVar("T")
A = TypeVar("A", bound="Agent")

_UNSET: Any = object()

#: Interrupted fibers whose recovery keeps failing are given up after this long (seconds).
FIBER_RECOVERY_MAX_AGE = 24 * 3600.0
FIBER_RECOVERY_MAX_DELAY = 300.0


class StateUpdateRejected(Exception):
    """Raise from ``validate_state`` to refuse a client's state update."""


def _positional_arity(fn: Callable[..., Any]) -> int:
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return 1
    if any(p.kind is p.VAR_POSITIONAL for p in params):
        return 99
    return sum(1 for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD))


class Agent:
    """Base class of every ponder agent.

    Subclass it, override the hooks you need, and mark methods clients may call with ``@callable``.
    Do not construct agents yourself: ask a host for one (``await host.get_agent(MyAgent, "alice")``)
    so that there is only ever one live instance per name. Put start-up work in ``on_start``.
    """

    #: State an agent has before anything was ever stored (deep-copied per instance).
    initial_state: ClassVar[Any] = None
    #: Frame ``type`` → handler method name. Subclasses extend it with their own protocols.
    frame_handlers: ClassVar[dict[str, str]] = {"cf_agent_state": "_on_state_frame", "rpc": "_on_rpc_frame"}

    def __init__(self, host: AgentHost, name: str, *, agent_id: str, parent_id: str | None = None) -> None:
        self.host = host
        self.name = name
        self.id = agent_id
        self.parent_id = parent_id
        self.storage = Storage(host.store, agent_id)
        self._state: Any = _UNSET
        self._connections: dict[str, Connection] = {}
        self._keep_alive = 0
        self._tasks: set[asyncio.Task[Any]] = set()
        self._running_fibers: set[str] = set()
        self._last_active = time.monotonic()

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name!r}>"

    @classmethod
    def class_segment(cls) -> str:
        """The kebab-case URL segment and id prefix of this class (``MyAgent`` → ``my-agent``)."""
        return kebab_case(cls.__name__)

    # -- lifecycle hooks ---------------------------------------------------------------------------

    async def on_start(self) -> None:
        """Called once each time the agent wakes (first use, after eviction, after a restart)."""

    async def on_connect(self, connection: Connection, info: ConnectionInfo) -> None:
        """A client connected (after identity and state were sent). Close it here to reject it."""

    async def on_message(self, connection: Connection, message: Any) -> None:
        """A frame no built-in protocol handled: a parsed JSON value, or the raw text/bytes."""

    async def on_close(self, connection: Connection, code: int, reason: str) -> None:
        """A client disconnected."""

    async def on_request(self, request: Any) -> Any:
        """A plain HTTP request to this agent's URL (a Starlette ``Request``); return a ``Response``.

        Returning ``None`` answers 404.
        """
        return None

    async def on_state_update(self, state: Any, source: Connection | str) -> None:
        """State changed; ``source`` is the client connection or ``"server"``."""

    def validate_state(self, state: Any, source: Connection | str) -> None:
        """Raise :class:`StateUpdateRejected` (or any error) to refuse a state change."""

    async def on_fiber_recovered(self, ctx: FiberRecoveryContext) -> None:
        """A fiber was interrupted by a crash. Resume, redo or report it; raise to be retried later."""
        logger.warning(
            "%r: fiber %r (%s) was interrupted and %s does not override on_fiber_recovered; dropping it",
            self,
            ctx.name,
            ctx.id,
            type(self).__name__,
        )

    # -- state -------------------------------------------------------------------------------------

    @property
    def state(self) -> Any:
        """The agent's current state (``initial_state`` until something was stored)."""
        if self._state is _UNSET:
            self._state = copy.deepcopy(type(self).initial_state)
        return self._state

    async def set_state(self, state: Any) -> None:
        """Persist new state, broadcast it to every client and call ``on_state_update``."""
        await self._apply_state(state, "server")

    async def _apply_state(self, state: Any, source: Connection | str) -> None:
        encoded = dumps(state)
        await self.host.store.execute(
            "UPDATE ponder_agents SET state = ? WHERE agent_id = ?", (encoded, self.id)
        )
        self._state = json.loads(encoded)
        exclude = (source,) if isinstance(source, Connection) else ()
        self.broadcast({"type": "cf_agent_state", "state": self._state}, exclude=exclude)
        await self._call_hook(self.on_state_update, self._state, source)

    def _load_state(self, encoded: str | None) -> None:
        if encoded is not None:
            self._state = json.loads(encoded)

    # -- connections -------------------------------------------------------------------------------

    @property
    def connections(self) -> list[Connection]:
        """The clients connected right now."""
        return list(self._connections.values())

    def get_connection(self, connection_id: str) -> Connection | None:
        return self._connections.get(connection_id)

    def broadcast(self, message: Any, exclude: Iterable[Connection | str] = ()) -> None:
        """Send a frame to every connected client except ``exclude`` (connections or ids)."""
        if not self._connections:
            return
        skip = {c.id if isinstance(c, Connection) else c for c in exclude}
        frame = message if isinstance(message, str | bytes) else dumps(message)
        for connection in self._connections.values():
            if connection.id not in skip:
                connection.send(frame)

    async def _accept_connection(self, connection: Connection) -> None:
        """Attach a new socket: protocol greeting first, then the user's ``on_connect``."""
        self._touch()
        previous = self._connections.get(connection.id)
        if previous is not None and previous is not connection:
            previous.close(1000, "replaced by a new connection with the same id")
            previous._detach()
        connection.agent = self
        self._connections[connection.id] = connection
        state = self.state
        identity: dict[str, Any] = {
            "type": "cf_agent_identity",
            "name": self.name,
            "agent": self.class_segment(),
        }
        if state is not None:
            identity["stateFollows"] = True
        connection.send(identity)
        if state is not None:
            connection.send({"type": "cf_agent_state", "state": state})
        connection.send(
            {
                "type": "cf_agent_mcp_servers",
                "mcp": {"prompts": [], "resources": [], "servers": {}, "tools": []},
            }
        )
        await self._on_connected(connection)
        await self._call_hook(self.on_connect, connection, connection.info)

    async def _on_connected(self, connection: Connection) -> None:
        """Extension point for protocols layered on top (Think sends its chat frames here)."""

    async def _release_connection(self, connection: Connection, code: int, reason: str) -> None:
        self._touch()
        if self._connections.get(connection.id) is connection:
            del self._connections[connection.id]
        connection._detach()
        await self._on_disconnected(connection)
        await self._call_hook(self.on_close, connection, code, reason)

    async def _on_disconnected(self, connection: Connection) -> None:
        """Extension point for protocols layered on top."""

    async def _receive(self, connection: Connection, data: str | bytes) -> None:
        """One frame from a client. Never raises: bad input is answered or dropped."""
        self._touch()
        message: Any = data
        if isinstance(data, str):
            try:
                message = json.loads(data)
            except (ValueError, RecursionError):  # not JSON, or nested too deep to parse
                message = data
        if isinstance(message, dict):
            kind = message.get("type")
            handler_name = self.frame_handlers.get(kind) if isinstance(kind, str) else None
            if handler_name is not None:
                try:
                    await getattr(self, handler_name)(connection, message)
                except Exception:
                    logger.exception("%r: handling a %r frame from %s failed", self, kind, connection.id)
                return
        await self._call_hook(self.on_message, connection, message)

    async def _on_state_frame(self, connection: Connection, message: dict[str, Any]) -> None:
        if "state" not in message:
            connection.send({"type": "cf_agent_state_error", "error": "State update rejected"})
            return
        if connection.readonly:
            connection.send({"type": "cf_agent_state_error", "error": "Connection is readonly"})
            return
        try:
            self.validate_state(message["state"], connection)
        except Exception as exc:
            logger.info("%r: state update from %s rejected: %s", self, connection.id, exc)
            connection.send({"type": "cf_agent_state_error", "error": "State update rejected"})
            return
        await self._apply_state(message["state"], connection)

    async def _on_rpc_frame(self, connection: Connection, message: dict[str, Any]) -> None:
        call_id = message.get("id")
        if not isinstance(call_id, str) or not call_id:
            logger.info("%r: dropped an rpc frame without a string id from %s", self, connection.id)
            return
        self.create_task(self._run_rpc(connection, call_id, message.get("method"), message.get("args", [])))

    async def _run_rpc(self, connection: Connection, call_id: str, method: Any, args: Any) -> None:
        def fail(error: str) -> None:
            connection.send({"type": "rpc", "id": call_id, "success": False, "error": error})

        info = callable_info(self, method) if isinstance(method, str) else None
        if info is None:
            fail(
                f"Method {method} is not callable"
                if isinstance(method, str)
                else "rpc method must be a string"
            )
            return
        if not isinstance(args, list):
            fail(f"rpc args for {method} must be an array")
            return
        fn = getattr(self, method)
        try:
            if info.streaming:
                async for chunk in fn(*args):
                    connection.send(
                        dumps({"type": "rpc", "id": call_id, "success": True, "done": False, "result": chunk})
                    )
                connection.send({"type": "rpc", "id": call_id, "success": True, "done": True})
                return
            result = fn(*args)
            if inspect.isawaitable(result):
                result = await result
            frame = dumps({"type": "rpc", "id": call_id, "success": True, "done": True, "result": result})
        except TypeError as exc:
            fail(f"{method}: {exc}")
            return
        except Exception as exc:
            logger.info("%r: rpc %s raised %s: %s", self, method, type(exc).__name__, exc)
            fail(str(exc) or type(exc).__name__)
            return
        connection.send(frame)

    # -- background work ---------------------------------------------------------------------------

    def create_task(self, coro: Coroutine[Any, Any, T], *, name: str | None = None) -> asyncio.Task[T]:
        """Run work in the background; the agent is not evicted and shutdown waits while it runs."""
        task = asyncio.get_running_loop().create_task(coro, name=name)
        self._tasks.add(task)
        task.add_done_callback(self._task_done)
        return task

    def _task_done(self, task: asyncio.Task[Any]) -> None:
        self._tasks.discard(task)
        self._touch()
        if not task.cancelled() and task.exception() is not None:
            logger.error("%r: background task failed", self, exc_info=task.exception())

    async def wait_until_idle(self) -> None:
        """Wait until no background task of this agent is running (handy in tests and scripts)."""
        while self._tasks:
            await asyncio.gather(*list(self._tasks), return_exceptions=True)

    @contextlib.contextmanager
    def keep_alive(self) -> Iterator[None]:
        """Keep this agent in memory while the block runs, even with no client connected."""
        self._keep_alive += 1
        try:
            yield
        finally:
            self._keep_alive -= 1
            self._touch()

    def _touch(self) -> None:
        self._last_active = time.monotonic()

    def _evicted(self) -> None:
        """Called by the host right after it dropped this idle instance: free what it holds in memory.

        Subclasses that cache data (Think's message index) release it here, so an evicted agent's memory is
        returned at once instead of whenever the garbage collector gets to the instance's reference cycles.
        The next ``get_agent`` builds a new instance from the store.
        """

    def _is_idle(self, now: float, idle_timeout: float) -> bool:
        return (
            not self._connections
            and not self._keep_alive
            and not self._tasks
            and not self._running_fibers
            and now - self._last_active >= idle_timeout
        )

    async def _call_hook(self, hook: Callable[..., Awaitable[Any] | Any], *args: Any) -> Any:
        try:
            result = hook(*args)
            if inspect.isawaitable(result):
                result = await result
            return result
        except Exception:
            logger.exception("%r: %s raised", self, getattr(hook, "__name__", hook))
            return None

    # -- schedules ---------------------------------------------------------------------------------

    async def schedule(
        self, when: float | datetime | str, callback: str | Callable[..., Any], payload: Any = None
    ) -> Schedule:
        """Call ``callback(payload)`` later and durably: after ``when`` seconds, at an aware
        ``datetime``, or on every match of a five-field cron string (UTC).

        The callback is a method of this agent, given by name or as a bound method. It may take
        ``(payload)``, ``(payload, schedule)`` or no arguments.
        """
        name = callback if isinstance(callback, str) else getattr(callback, "__name__", None)
        if not isinstance(name, str) or not callable(getattr(self, name, None)):
            raise ValueError(f"{type(self).__name__} has no method {name!r} to schedule")
        kind, due_at, cron = resolve_when(when)
        row = Schedule(
            id=uuid.uuid4().hex,
            callback=name,
            payload=payload,
            kind=kind,
            due_at=due_at,
            cron=cron,
            created_at=time.time(),
        )
        await self.host.store.execute(
            "INSERT INTO ponder_schedules (id, agent_id, callback, payload, kind, due_at, cron, created_at)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            (row.id, self.id, name, dumps(payload), kind, due_at, cron, row.created_at),
        )
        self.host._schedules_changed()
        return row

    async def get_schedules(self) -> list[Schedule]:
        """This agent's pending schedules, soonest first."""
        rows = await self.host.store.fetch_all(
            "SELECT * FROM ponder_schedules WHERE agent_id = ? ORDER BY due_at, created_at", (self.id,)
        )
        return [Schedule.from_row(row) for row in rows]

    async def get_schedule(self, schedule_id: str) -> Schedule | None:
        row = await self.host.store.fetch_one(
            "SELECT * FROM ponder_schedules WHERE id = ? AND agent_id = ?", (schedule_id, self.id)
        )
        return Schedule.from_row(row) if row else None

    async def cancel_schedule(self, schedule_id: str) -> bool:
        """Remove a schedule; return whether it existed."""
        changed = await self.host.store.execute(
            "DELETE FROM ponder_schedules WHERE id = ? AND agent_id = ?", (schedule_id, self.id)
        )
        if changed:
            self.host._schedules_changed()
        return changed > 0

    async def _run_schedule(self, schedule: Schedule) -> None:
        completed = False
        try:
            method = getattr(self, schedule.callback, None)
            if not callable(method):
                logger.error(
                    "%r: scheduled callback %r no longer exists; dropping it", self, schedule.callback
                )
            else:
                args = (schedule.payload, schedule)[: _positional_arity(method)]
                try:
                    with self.keep_alive():
                        result = method(*args)
                        if inspect.isawaitable(result):
                            await result
                except Exception:
                    logger.exception("%r: scheduled %s raised", self, schedule.callback)
            completed = True
        finally:
            if completed:  # a run cut short by shutdown stays due and runs again at the next start
                if schedule.cron:
                    await self.host.store.execute(
                        "UPDATE ponder_schedules SET due_at = ? WHERE id = ? AND agent_id = ?",
                        (next_cron_time(schedule.cron, time.time()), schedule.id, self.id),
                    )
                else:
                    await self.host.store.execute(
                        "DELETE FROM ponder_schedules WHERE id = ? AND agent_id = ?", (schedule.id, self.id)
                    )
            self.host._schedule_finished(schedule.id)

    # -- fibers ------------------------------------------------------------------------------------

    async def run_fiber(self, name: str, fn: Callable[[FiberContext], Awaitable[T]]) -> T:
        """Run ``fn(ctx)`` as durable work: recorded before it starts, forgotten when it ends.

        If the process dies meanwhile, ``on_fiber_recovered`` gets the last ``ctx.stash(...)``
        snapshot when the agent wakes again.
        """
        fiber = FiberContext(self, uuid.uuid4().hex, name, time.time())
        await self.host.store.execute(
            "INSERT INTO ponder_fibers (id, agent_id, name, snapshot, created_at) VALUES (?, ?, ?, NULL, ?)",
            (fiber.id, self.id, name, fiber.created_at),
        )
        self._running_fibers.add(fiber.id)
        token = current_fiber.set(fiber)
        finished = False
        try:
            with self.keep_alive():
                result = await (fn(fiber) if _positional_arity(fn) else fn())  # type: ignore[call-arg]
            finished = True
            return result
        except Exception:
            finished = True
            raise
        finally:
            current_fiber.reset(token)
            self._running_fibers.discard(fiber.id)
            # Cancelled by shutdown: keep the row so the next start recovers the work.
            if finished or not self.host.closing:
                await self.host.store.execute(
                    "DELETE FROM ponder_fibers WHERE id = ? AND agent_id = ?", (fiber.id, self.id)
                )

    async def record_fiber(self, name: str, snapshot: Any = None) -> str:
        """Durably record work that is accepted now but starts later (e.g. a queued turn).

        Until :meth:`forget_fiber` removes it, the row is an interrupted fiber if the process dies:
        ``on_fiber_recovered`` gets it at the next wake. Returns the row's id.
        """
        fiber_id = uuid.uuid4().hex
        await self.host.store.execute(
            "INSERT INTO ponder_fibers (id, agent_id, name, snapshot, created_at) VALUES (?, ?, ?, ?, ?)",
            (fiber_id, self.id, name, dumps(snapshot), time.time()),
        )
        return fiber_id

    async def update_fiber(self, fiber_id: str, snapshot: Any) -> None:
        """Replace the snapshot of a row written by :meth:`record_fiber`."""
        await self.host.store.execute(
            "UPDATE ponder_fibers SET snapshot = ? WHERE id = ? AND agent_id = ?",
            (dumps(snapshot), fiber_id, self.id),
        )

    async def forget_fiber(self, fiber_id: str) -> None:
        """Remove a row written by :meth:`record_fiber` (the work started or will never run)."""
        await self.host.store.execute(
            "DELETE FROM ponder_fibers WHERE id = ? AND agent_id = ?", (fiber_id, self.id)
        )

    async def stash(self, data: Any) -> None:
        """Replace the snapshot of the fiber running in the current task."""
        fiber = current_fiber.get()
        if fiber is None or fiber._agent is not self:
            raise RuntimeError("stash() is only available inside run_fiber() of this agent")
        await fiber.stash(data)

    async def _recover_fibers(self, rows: list[dict[str, Any]]) -> None:
        for row in rows:
            if row["id"] not in self._running_fibers:
                await self._recover_fiber(row, 1)

    async def _recover_fiber(self, row: dict[str, Any], attempt: int) -> None:
        ctx = FiberRecoveryContext.from_row(row, attempt)
        try:
            with self.keep_alive():
                await self.on_fiber_recovered(ctx)
        except Exception:
            age = time.time() - ctx.created_at
            if age > FIBER_RECOVERY_MAX_AGE:
                logger.exception(
                    "%r: giving up on interrupted fiber %r after %d attempts", self, ctx.name, attempt
                )
            else:
                delay = min(FIBER_RECOVERY_MAX_DELAY, 0.5 * 2**attempt)
                logger.exception("%r: recovering fiber %r failed; retrying in %.1fs", self, ctx.name, delay)
                self.create_task(self._retry_fiber_recovery(row, attempt + 1, delay))
                return
        await self.host.store.execute(
            "DELETE FROM ponder_fibers WHERE id = ? AND agent_id = ?", (ctx.id, self.id)
        )

    async def _retry_fiber_recovery(self, row: dict[str, Any], attempt: int, delay: float) -> None:
        await asyncio.sleep(delay)
        current = await self.host.store.fetch_one(
            "SELECT * FROM ponder_fibers WHERE id = ? AND agent_id = ?", (row["id"], self.id)
        )
        if current is not None:
            await self._recover_fiber(current, attempt)

    # -- sub-agents --------------------------------------------------------------------------------

    async def sub_agent(self, cls: type[A], name: str) -> A:
        """A child agent with its own storage, addressed as ``…/sub/<kebab-class>/<name>``."""
        return await self.host._get_agent(
            cls, name, sub_agent_id_for(self.id, cls.class_segment(), name), self.id
        )

    async def get_parent(self) -> Agent | None:
        """The live parent of a sub-agent (woken if needed), or ``None`` for a top-level agent."""
        if self.parent_id is None:
            return None
        return await self.host.get_agent_by_id(self.parent_id)
