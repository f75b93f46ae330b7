"""Turning ``/agents/<kebab-class>/<name>[/sub/<kebab-class>/<name>…][/rest]`` into an agent.

Matches Cloudflare's ``routeAgentRequest``: a path shorter than prefix + class + name is not ours
(404), an unknown class segment is a bad request (400), and ``sub`` hops address sub-agents.
Names are taken from the raw path and percent-decoded, so a name may contain any character.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from urllib.parse import unquote

from ..runtime import Agent, AgentHost

__all__ = ["AgentRoute", "RouteError", "parse_agent_path"]


class RouteError(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


@dataclass(frozen=True, slots=True)
class AgentRoute:
    """Where a request goes: the top-level agent, the chain of sub-agent hops, and the rest."""

    cls: type[Agent]
    name: str
    hops: tuple[tuple[type[Agent], str], ...] = ()
    rest: tuple[str, ...] = field(default=())

    @property
    def target_class(self) -> type[Agent]:
        return self.hops[-1][0] if self.hops else self.cls

    async def resolve(self, host: AgentHost) -> Agent:
        agent: Agent = await host.get_agent(self.cls, self.name)
        for cls, name in self.hops:
            agent = await agent.sub_agent(cls, name)
        return agent


def parse_agent_path(raw_path: str, prefix: str, host: AgentHost) -> AgentRoute:
    """Parse a raw (still percent-encoded) path under ``/<prefix>/``."""
    prefix_parts = [p for p in prefix.split("/") if p]
    parts = [p for p in raw_path.split("/") if p]
    if parts[: len(prefix_parts)] != prefix_parts or len(parts) < len(prefix_parts) + 2:
        raise RouteError(404, "Not found")
    parts = parts[len(prefix_parts) :]
    cls = host.agent_class(unquote(parts[0]))
    if cls is None:
        raise RouteError(400, "Invalid request")
    name = unquote(parts[1])
    rest = parts[2:]
    hops: list[tuple[type[Agent], str]] = []
    while len(rest) >= 3 and rest[0] == "sub":
        child = host.agent_class(unquote(rest[1]))
        if child is None:
            raise RouteError(400, "Invalid request")
        hops.append((child, unquote(rest[2])))
        rest = rest[3:]
    return AgentRoute(cls, name, tuple(hops), tuple(unquote(p) for p in rest))
