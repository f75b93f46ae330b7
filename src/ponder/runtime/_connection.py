"""A client connection as an agent sees it, independent of the server that carries it.

The runtime knows nothing of HTTP or ASGI: the server hands it a :class:`Transport` (send text, send
bytes, close) and the runtime wraps it in a :class:`Connection`. ``send`` only queues the frame and a
writer task drains the queue in order, so broadcasting to many clients never waits on the slowest
one; a client that falls too far behind is disconnected (it reconnects and resumes) rather than
letting the queue grow without bound.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from ._json import dumps

if TYPE_CHECKING:
    from ._agent import Agent

__all__ = ["Connection", "ConnectionInfo", "Transport"]

logger = logging.getLogger("ponder.runtime")


class Transport(Protocol):
    """What a server provides for one live socket."""

    async def send_text(self, data: str) -> None: ...

    async def send_bytes(self, data: bytes) -> None: ...

    async def close(self, code: int = 1000, reason: str = "") -> None: ...


@dataclass(frozen=True, slots=True)
class ConnectionInfo:
    """What the agent may know about the request that opened a connection."""

    path: str = ""
    query: Mapping[str, str] = field(default_factory=dict)
    headers: Mapping[str, str] = field(default_factory=dict)
    client: str | None = None


def encode_frame(message: Any) -> str | bytes:
    """Frames are JSON text; strings and bytes pass through untouched."""
    if isinstance(message, str | bytes):
        return message
    return dumps(message)


class Connection:
    """One client socket attached to an agent.

    ``id`` is the client's ``_pk`` (stable across its reconnects). ``state`` is per-connection data
    the agent may keep (not persisted). A ``readonly`` connection cannot change the agent's state.
    """

    #: Bytes queued beyond this mean the client stopped reading; it is disconnected (it can reconnect and
    #: resume). Counted in bytes, not frames, so a burst of small chunks from a fast model to a reading
    #: client is not mistaken for a stuck one.
    max_pending_bytes = 16 * 1024 * 1024

    def __init__(self, id: str, transport: Transport, info: ConnectionInfo | None = None) -> None:
        self.id = id
        self.info = info or ConnectionInfo()
        self.readonly = False
        self.state: Any = None
        self.agent: Agent | None = None
        self._transport = transport
        self._queue: deque[str | bytes] = deque()
        self._pending_bytes = 0
        self._ready = asyncio.Event()
        self._writer: asyncio.Task[None] | None = None
        self._closer: asyncio.Task[None] | None = None
        self._closed = False

    def __repr__(self) -> str:
        return f"<Connection {self.id!r}>"

    @property
    def closed(self) -> bool:
        return self._closed

    def send(self, message: Any) -> None:
        """Queue a frame (a dict is sent as JSON). Never blocks; frames go out in order."""
        if self._closed:
            return
        frame = encode_frame(message)
        self._pending_bytes += len(frame)
        if self._pending_bytes > self.max_pending_bytes:
            logger.warning("connection %s is not reading its frames; disconnecting it", self.id)
            # 1013 (try again later), not 1008: the stock clients never reconnect after a 1008.
            self.close(1013, "client too slow")
            return
        self._queue.append(frame)
        if self._writer is None:
            self._writer = asyncio.get_running_loop().create_task(self._write_loop())
        self._ready.set()

    def close(self, code: int = 1000, reason: str = "") -> None:
        """Close the socket after the frames already queued are sent."""
        if self._closed:
            return
        self._closed = True
        self._ready.set()
        self._closer = asyncio.get_running_loop().create_task(self._close_after_flush(code, reason))

    async def _close_after_flush(self, code: int, reason: str) -> None:
        if self._writer is not None:
            try:
                await asyncio.wait_for(asyncio.shield(self._writer), timeout=5.0)
            except (TimeoutError, asyncio.CancelledError, Exception):
                self._writer.cancel()
        try:
            await self._transport.close(code, reason)
        except Exception:  # the peer may already be gone
            pass

    async def _write_loop(self) -> None:
        queue = self._queue
        try:
            while True:
                while queue:
                    frame = queue.popleft()
                    self._pending_bytes -= len(frame)
                    if isinstance(frame, bytes):
                        await self._transport.send_bytes(frame)
                    else:
                        await self._transport.send_text(frame)
                if self._closed:
                    return
                self._ready.clear()
                await self._ready.wait()
        except Exception as exc:  # the socket went away; the server will report the close
            logger.debug("connection %s writer stopped: %s", self.id, exc)
            self._closed = True
            queue.clear()

    def _detach(self) -> None:
        """Called by the runtime when the socket has closed."""
        self._closed = True
        self._queue.clear()
        self._ready.set()
