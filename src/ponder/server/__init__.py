"""The ASGI server layer: routing, auth hooks, WebSocket and HTTP endpoints."""

from ._app import DEFAULT_MAX_FRAME_BYTES, App, BeforeConnectHook, BeforeRequestHook
from ._routing import AgentRoute, RouteError, parse_agent_path

__all__ = [
    "DEFAULT_MAX_FRAME_BYTES",
    "AgentRoute",
    "App",
    "BeforeConnectHook",
    "BeforeRequestHook",
    "RouteError",
    "parse_agent_path",
]
