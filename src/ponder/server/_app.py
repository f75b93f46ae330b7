"""``ponder.App``: the ASGI application that serves agents over WebSocket and HTTP.

It is a thin layer: it parses the agent path, runs the auth hooks, wakes the agent through the host
and hands it frames and requests. Everything an agent does is in the runtime; this is the only
module that knows HTTP. Mount it anywhere in another ASGI app; the host starts lazily on the first
request when the parent app does not run this app's lifespan.
"""

from __future__ import annotations

import contextlib
import inspect
import logging
import os
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Sequence
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import BaseRoute, Route, WebSocketRoute
from starlette.types import Receive, Scope, Send
from starlette.websockets import WebSocket

from ..runtime import Agent, AgentHost, Connection, ConnectionInfo
from ..storage import Store
from ._chat_http import handle_chat_http
from ._routing import AgentRoute, RouteError, parse_agent_path
from ._submissions_http import handle_submissions_http
from ._ui import agent_ui_response, ui_routes

__all__ = ["DEFAULT_MAX_FRAME_BYTES", "App", "BeforeConnectHook", "BeforeRequestHook"]

logger = logging.getLogger("ponder.server")

DEFAULT_MAX_FRAME_BYTES = 4 * 1024 * 1024

#: ``(request_or_websocket, class_name, name)`` → ``None`` to continue, a ``Response`` to reject.
BeforeConnectHook = Callable[[WebSocket, str, str], Awaitable[Response | None] | Response | None]
#: ``(request, class_name, name)`` → ``None`` to continue, a ``Response`` to answer, a ``Request`` to rewrite.
BeforeRequestHook = Callable[
    [Request, str, str], Awaitable[Response | Request | None] | Response | Request | None
]


class _WebSocketTransport:
    __slots__ = ("_ws",)

    def __init__(self, websocket: WebSocket) -> None:
        self._ws = websocket

    async def send_text(self, data: str) -> None:
        await self._ws.send({"type": "websocket.send", "text": data})

    async def send_bytes(self, data: bytes) -> None:
        await self._ws.send({"type": "websocket.send", "bytes": data})

    async def close(self, code: int = 1000, reason: str = "") -> None:
        await self._ws.close(code, reason)


async def _maybe_await(value: Any) -> Any:
    return await value if inspect.isawaitable(value) else value


def _close_reason(response: Response) -> str:
    body = bytes(getattr(response, "body", b"") or b"").decode("utf-8", "replace").strip()
    text = f"{response.status_code} {body}".strip() if body else str(response.status_code)
    return text.encode("utf-8")[:120].decode("utf-8", "ignore")


class App:
    """Serve agent classes: ``/agents/<kebab-class>/<name>`` for WebSocket and HTTP.

    ``store`` is a store URL, path or :class:`~ponder.storage.Store` (default: ``PONDER_STORE`` or
    ``./.ponder/ponder.sqlite3``). ``on_before_connect`` / ``on_before_request`` gate every agent
    route: return a ``Response`` to reject (a WebSocket is then accepted and closed with code 1008
    so the client does not reconnect), ``None`` to let it through.
    """

    def __init__(
        self,
        agents: Iterable[type[Agent]] = (),
        store: str | os.PathLike[str] | Store | None = None,
        *,
        on_before_connect: BeforeConnectHook | None = None,
        on_before_request: BeforeRequestHook | None = None,
        prefix: str = "agents",
        max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES,
        idle_timeout: float = 60.0,
        shutdown_timeout: float = 10.0,
        routes: Sequence[BaseRoute] = (),
        debug: bool = False,
    ) -> None:
        self.agents = list(agents)
        self.prefix = prefix.strip("/")
        self.max_frame_bytes = max_frame_bytes
        self.on_before_connect = on_before_connect
        self.on_before_request = on_before_request
        self._host_options = {"idle_timeout": idle_timeout, "shutdown_timeout": shutdown_timeout}
        self.host = AgentHost(store, agents=self.agents, **self._host_options)
        path = f"/{self.prefix}/{{path:path}}"
        self._starlette = Starlette(
            debug=debug,
            routes=[
                Route("/_ponder/health", self._health, methods=["GET"]),
                *routes,
                *ui_routes(self),
                WebSocketRoute(path, self._websocket),
                Route(path, self._http, methods=["GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS"]),
            ],
            lifespan=self._lifespan,
        )

    def set_store(self, store: str | os.PathLike[str] | Store) -> None:
        """Point the app at another store (what ``ponder serve --store`` does). Only before it starts."""
        if self.host._started:
            raise RuntimeError("the store cannot change after the app has started")
        self.host = AgentHost(store, agents=self.agents, **self._host_options)

    @property
    def starlette(self) -> Starlette:
        return self._starlette

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await self._starlette(scope, receive, send)

    @contextlib.asynccontextmanager
    async def _lifespan(self, _app: Starlette) -> AsyncIterator[None]:
        await self.host.start()
        logger.info(
            "serving %s from %s",
            ", ".join(sorted(self.host.agent_classes)) or "no agents",
            self.host.store.url,
        )
        try:
            yield
        finally:
            await self.host.close()

    async def _health(self, request: Request) -> Response:
        return JSONResponse({"ok": True, "agents": sorted(self.host.agent_classes)})

    def _route(self, scope: Scope) -> AgentRoute:
        raw = scope.get("raw_path")
        path = raw.decode("latin-1").split("?", 1)[0] if raw else scope["path"]
        root = scope.get("root_path", "")
        if root and path.startswith(root):
            path = path[len(root) :]
        return parse_agent_path(path, self.prefix, self.host)

    # -- WebSocket -------------------------------------------------------------------------------

    async def _websocket(self, websocket: WebSocket) -> None:
        try:
            route = self._route(websocket.scope)
        except RouteError as exc:
            await websocket.send_denial_response(PlainTextResponse(exc.message, status_code=exc.status))
            return
        if self.on_before_connect is not None:
            try:
                verdict = await _maybe_await(
                    self.on_before_connect(
                        websocket,
                        route.target_class.__name__,
                        route.hops[-1][1] if route.hops else route.name,
                    )
                )
            except Exception:
                logger.exception("on_before_connect raised; rejecting the connection")
                verdict = PlainTextResponse("Internal error", status_code=500)
            if isinstance(verdict, Response):
                # Accept, then close: a refusal before accept reaches browsers as 1006, and the
                # stock clients would reconnect forever.
                await websocket.accept()
                await websocket.close(1008, _close_reason(verdict))
                return
        try:
            await self.host.start()
            agent = await route.resolve(self.host)
        except Exception:
            logger.exception("starting agent %s/%s failed", route.target_class.__name__, route.name)
            await websocket.accept()
            await websocket.close(1011, "agent failed to start")
            return
        await websocket.accept()
        params = websocket.query_params
        connection = Connection(
            params.get("_pk") or uuid.uuid4().hex,
            _WebSocketTransport(websocket),
            ConnectionInfo(
                path=websocket.url.path,
                query=dict(params),
                headers=dict(websocket.headers),
                client=f"{websocket.client.host}:{websocket.client.port}" if websocket.client else None,
            ),
        )
        code, reason = 1005, ""
        try:
            # Inside the try: if attaching fails half-way, the finally still detaches the connection.
            await agent._accept_connection(connection)
            while True:
                message = await websocket.receive()
                if message["type"] == "websocket.disconnect":
                    code, reason = message.get("code", 1005), message.get("reason") or ""
                    break
                data: str | bytes | None = message.get("text")
                if data is None:
                    data = message.get("bytes") or b""
                size = len(data) if isinstance(data, bytes) else len(data.encode("utf-8"))
                if size > self.max_frame_bytes:
                    logger.warning(
                        "dropped a %d-byte frame from %s (limit %d bytes)",
                        size,
                        connection.id,
                        self.max_frame_bytes,
                    )
                    connection.send(
                        {
                            "type": "cf_agent_error",
                            "error": f"frame of {size} bytes exceeds the {self.max_frame_bytes}-byte limit",
                        }
                    )
                    continue
                await agent._receive(connection, data)
        except Exception:
            # A disconnect arrives as a message, so this is a failure in the agent: end this
            # connection only, visibly, with 1011 (the client may reconnect).
            logger.exception("connection %s to %r failed; closing it", connection.id, agent)
            code, reason = 1011, "internal error"
            with contextlib.suppress(Exception):  # the socket may already be gone
                await websocket.close(1011, "internal error")
        finally:
            await agent._release_connection(connection, code, reason)

    # -- HTTP ------------------------------------------------------------------------------------

    async def _http(self, request: Request) -> Response:
        try:
            route = self._route(request.scope)
        except RouteError as exc:
            return PlainTextResponse(exc.message, status_code=exc.status)
        name = route.hops[-1][1] if route.hops else route.name
        if self.on_before_request is not None:
            try:
                verdict = await _maybe_await(
                    self.on_before_request(request, route.target_class.__name__, name)
                )
            except Exception:
                logger.exception("on_before_request raised; rejecting the request")
                return PlainTextResponse("Internal error", status_code=500)
            if isinstance(verdict, Response):
                return verdict
            if isinstance(verdict, Request):
                request = verdict
        try:
            await self.host.start()
            # The web chat page (…/ui) of a chat agent answers before the agent's own on_request.
            response = await agent_ui_response(self, request, route)
            if response is None:
                agent = await route.resolve(self.host)
                response = await handle_chat_http(agent, request, route.rest, self.max_frame_bytes)
                if response is None:
                    response = await handle_submissions_http(agent, request, route.rest, self.max_frame_bytes)
                if response is None:
                    response = await agent.on_request(request)
        except Exception:
            logger.exception("%s %s failed", request.method, request.url.path)
            return JSONResponse({"error": "internal error"}, status_code=500)
        if response is None:
            return JSONResponse({"error": "not found"}, status_code=404)
        if not isinstance(response, Response):
            logger.error(
                "%s.on_request returned %s, not a Response (or None); answering 500",
                type(agent).__name__,
                type(response).__name__,
            )
            return JSONResponse({"error": "internal error"}, status_code=500)
        return response
