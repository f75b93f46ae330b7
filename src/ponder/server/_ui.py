"""The web chat page: ``GET /`` and ``GET /agents/<class>/<name>/ui``, its static assets and branch lookups.

Why this module exists: ``ponder serve app.py`` should give a person something to talk to, not only a
protocol. The page is plain HTML, CSS and ES modules shipped in ``ponder/server/static`` (no build step, no
CDN) and speaks the same WebSocket chat protocol as the stock Cloudflare clients. Switching between
regenerated answers (siblings in ``Think``'s message tree) and searching the transcript are ``rpc`` calls to
``Think.set_active_branch`` and ``Think.search_messages``; the one thing the page still needs over HTTP is
which messages on the path have siblings, which the read-only ``…/ui/branches`` route answers.

Every ``…/ui`` route is an agent route: ``App`` runs ``on_before_request`` before calling
:func:`agent_ui_response`. ``GET /`` runs the same hook for the agent it shows.
"""

from __future__ import annotations

import hashlib
import html
import inspect
import json
import logging
import re
from dataclasses import dataclass
from importlib import resources
from typing import TYPE_CHECKING
from urllib.parse import quote

from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import BaseRoute, Route

from ..think import Think
from ._routing import AgentRoute

if TYPE_CHECKING:
    from ._app import App

__all__ = ["DEFAULT_AGENT_NAME", "agent_ui_response", "is_chat_agent", "ui_routes"]

logger = logging.getLogger("ponder.server")

DEFAULT_AGENT_NAME = "default"
STATIC_PREFIX = "/_ponder/static"
#: Most message ids one ``…/ui/branches`` request may ask about.
MAX_BRANCH_IDS = 500

_CONTENT_TYPES = {
    ".html": "text/html; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".mjs": "text/javascript; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".svg": "image/svg+xml",
    ".json": "application/json",
    ".png": "image/png",
    ".ico": "image/x-icon",
}
_IMMUTABLE = "public, max-age=31536000, immutable"
_PLACEHOLDER = re.compile(r"\{\{([A-Z]+)\}\}")
_SECURITY_HEADERS = {"X-Content-Type-Options": "nosniff", "Referrer-Policy": "same-origin"}
# The page loads nothing from elsewhere and runs no inline script; it connects back to its own origin.
_PAGE_CSP = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; base-uri 'none'; form-action 'none'; object-src 'none'"
)


def is_chat_agent(cls: type) -> bool:
    """True for agent classes that speak the chat protocol (``Think`` subclasses)."""
    return isinstance(cls, type) and issubclass(cls, Think)


# -- static files ------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Asset:
    body: bytes
    content_type: str
    etag: str


class _Static:
    """The files in ``ponder/server/static``, read once; ``version`` changes whenever any of them does."""

    def __init__(self) -> None:
        self._assets: dict[str, _Asset] | None = None
        self._version = ""

    def _load(self) -> dict[str, _Asset]:
        if self._assets is None:
            assets: dict[str, _Asset] = {}
            digest = hashlib.sha256()
            root = resources.files("ponder.server").joinpath("static")
            for entry in sorted(root.iterdir(), key=lambda e: e.name):
                suffix = "." + entry.name.rsplit(".", 1)[-1] if "." in entry.name else ""
                if not entry.is_file() or suffix not in _CONTENT_TYPES:
                    continue
                body = entry.read_bytes()
                tag = hashlib.sha256(body).hexdigest()[:16]
                assets[entry.name] = _Asset(body, _CONTENT_TYPES[suffix], f'"{tag}"')
                digest.update(entry.name.encode() + b"\0" + body)
            self._version = digest.hexdigest()[:12]
            self._assets = assets
        return self._assets

    @property
    def version(self) -> str:
        self._load()
        return self._version

    def get(self, name: str) -> _Asset | None:
        return self._load().get(name)


_static = _Static()


async def _static_file(request: Request) -> Response:
    name = request.path_params["file"]
    asset = _static.get(name) if name != "index.html" else None
    if asset is None:
        return PlainTextResponse("Not found", status_code=404)
    versioned = request.query_params.get("v") == _static.version
    headers = {
        **_SECURITY_HEADERS,
        "ETag": asset.etag,
        # A versioned URL (what the page links) never changes; any other is revalidated every time.
        "Cache-Control": _IMMUTABLE if versioned else "no-cache",
    }
    if asset.etag in _etags(request.headers.get("if-none-match")):
        return Response(status_code=304, headers=headers)
    # For HEAD the server (uvicorn) drops the body and keeps the real Content-Length.
    return Response(asset.body, media_type=asset.content_type, headers=headers)


def _etags(header: str | None) -> set[str]:
    if not header:
        return set()
    return {tag.strip().removeprefix("W/") for tag in header.split(",")}


# -- the page ----------------------------------------------------------------------------------------


def _page(request: Request, cls: type, name: str, agent_path: str) -> Response:
    """The chat page bound to the agent at ``agent_path`` (a raw, percent-encoded URL path)."""
    template = _static.get("index.html")
    if template is None:  # a broken install; say so instead of a traceback
        return PlainTextResponse("the web UI files are missing from this ponder install", status_code=500)
    root = request.scope.get("root_path", "").rstrip("/")
    config = {
        "agentPath": agent_path,
        "agent": cls.class_segment(),  # type: ignore[attr-defined]
        "className": cls.__name__,
        "name": name,
        "title": _title(cls),
    }
    values = {
        "TITLE": f"{_title(cls)} · ponder",
        "CONFIG": json.dumps(config, separators=(",", ":")),
        "STATIC": f"{root}{STATIC_PREFIX}",
        "VERSION": _static.version,
    }
    escaped = {key: html.escape(value, quote=True) for key, value in values.items()}
    text = _PLACEHOLDER.sub(lambda m: escaped.get(m.group(1), m.group(0)), template.body.decode("utf-8"))
    headers = {
        **_SECURITY_HEADERS,
        "Cache-Control": "no-cache",
        "Content-Security-Policy": _PAGE_CSP,
    }
    return Response(text.encode("utf-8"), media_type="text/html; charset=utf-8", headers=headers)


def _title(cls: type) -> str:
    title = getattr(cls, "ui_title", None)
    if isinstance(title, str) and title:
        return title
    # "SupportChat" -> "Support Chat"
    out = "".join(
        f" {ch}" if ch.isupper() and i and not cls.__name__[i - 1].isupper() else ch
        for i, ch in enumerate(cls.__name__)
    )
    return out.strip() or cls.__name__


def _first_chat_class(app: App) -> type | None:
    for cls in app.host.agent_classes.values():
        if is_chat_agent(cls):
            return cls
    return None


async def _index(app: App, request: Request) -> Response:
    cls = _first_chat_class(app)
    if cls is None:
        served = ", ".join(sorted(app.host.agent_classes)) or "none"
        return PlainTextResponse(
            f"No chat agent is served here (a ponder.Think subclass shows a chat page at /). Agents: {served}",
            status_code=404,
        )
    name = request.query_params.get("name") or DEFAULT_AGENT_NAME
    if app.on_before_request is not None:
        try:
            verdict = app.on_before_request(request, cls.__name__, name)
            if inspect.isawaitable(verdict):
                verdict = await verdict
        except Exception:
            logger.exception("on_before_request raised; rejecting the request")
            return PlainTextResponse("Internal error", status_code=500)
        if isinstance(verdict, Response):
            return verdict
        if isinstance(verdict, Request):
            request = verdict
    root = request.scope.get("root_path", "").rstrip("/")
    agent_path = f"{root}/{app.prefix}/{cls.class_segment()}/{quote(name, safe='')}"  # type: ignore[attr-defined]
    return _page(request, cls, name, agent_path)


def ui_routes(app: App) -> list[BaseRoute]:
    """``GET /`` (the page for the first chat agent) and the static assets, for ``App`` to mount."""

    async def index(request: Request) -> Response:
        return await _index(app, request)

    return [
        Route("/", index, methods=["GET", "HEAD"]),
        Route(f"{STATIC_PREFIX}/{{file}}", _static_file, methods=["GET", "HEAD"]),
    ]


# -- …/ui, …/ui/branches -------------------------------------------------------------------------------


async def agent_ui_response(app: App, request: Request, route: AgentRoute) -> Response | None:
    """Answer ``…/ui[/branches]`` of a chat agent; ``None`` for every other request.

    Called by ``App`` after the auth hooks and before the agent's own ``on_request``.
    """
    if not route.rest or route.rest[0] != "ui" or not is_chat_agent(route.target_class):
        return None
    if len(route.rest) > 2:
        return JSONResponse({"error": "not found"}, status_code=404)
    if request.method not in ("GET", "HEAD"):
        return JSONResponse({"error": "method not allowed"}, status_code=405, headers={"Allow": "GET, HEAD"})
    sub = route.rest[1] if len(route.rest) == 2 else ""
    if sub == "":
        raw = request.scope.get("raw_path")
        path = raw.decode("latin-1").split("?", 1)[0] if raw else request.url.path
        agent_path = path.rstrip("/").removesuffix("/ui")
        name = route.hops[-1][1] if route.hops else route.name
        return _page(request, route.target_class, name, agent_path)
    if sub != "branches":
        return JSONResponse({"error": "not found"}, status_code=404)
    await app.host.start()
    agent = await route.resolve(app.host)
    assert isinstance(agent, Think)
    await agent._ensure_loaded()
    return _branches(agent, request)


def _branches(agent: Think, request: Request) -> Response:
    """``?id=A&id=B`` → ``{"branches": {"A": [child ids, oldest first]}}`` for each id with several children."""
    ids = request.query_params.getlist("id")
    if len(ids) > MAX_BRANCH_IDS:
        return JSONResponse({"error": f"at most {MAX_BRANCH_IDS} ids per request"}, status_code=400)
    branches: dict[str, list[str]] = {}
    for message_id in dict.fromkeys(ids):
        children = agent.session.branch_ids(message_id)
        if len(children) > 1:
            branches[message_id] = children
    return JSONResponse({"branches": branches}, headers={"Cache-Control": "no-store"})
