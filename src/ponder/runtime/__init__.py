"""The actor runtime: agents with durable state, schedules, fibers, connections and RPC."""

from ._agent import Agent, StateUpdateRejected
from ._callable import CallableInfo, callable
from ._connection import Connection, ConnectionInfo, Transport
from ._cron import CronError
from ._fibers import FiberContext, FiberRecoveryContext
from ._host import AgentHost
from ._naming import agent_id_for, kebab_case
from ._schedules import Schedule

__all__ = [
    "Agent",
    "AgentHost",
    "CallableInfo",
    "Connection",
    "ConnectionInfo",
    "CronError",
    "FiberContext",
    "FiberRecoveryContext",
    "Schedule",
    "StateUpdateRejected",
    "Transport",
    "agent_id_for",
    "callable",
    "kebab_case",
]
