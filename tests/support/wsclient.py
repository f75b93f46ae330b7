"""A minimal agents-protocol client over the ``websockets`` library, for end-to-end tests."""

from __future__ import annotations

import asyncio
import json
import uuid
from typing import Any

from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed


class AgentSocket:
    """One WebSocket to ``/agents/<class>/<name>``: handshake frames, RPC calls, waiting for frames."""

    def __init__(self, ws: ClientConnection) -> None:
        self.ws = ws
        self.frames: list[dict[str, Any]] = []
        self._waiters: list[tuple[Any, asyncio.Future[dict[str, Any]]]] = []
        self._reader = asyncio.ensure_future(self._read())

    @classmethod
    async def open(cls, base_ws_url: str, agent: str, name: str, pk: str | None = None) -> AgentSocket:
        ws = await connect(f"{base_ws_url}/agents/{agent}/{name}?_pk={pk or uuid.uuid4()}", max_size=None)
        return cls(ws)

    async def _read(self) -> None:
        try:
            await self._read_frames()
        except ConnectionClosed:  # e.g. the server was killed: waiters time out with a clear message
            pass

    async def _read_frames(self) -> None:
        async for raw in self.ws:
            if isinstance(raw, bytes):
                continue
            frame = json.loads(raw)
            self.frames.append(frame)
            for waiter in list(self._waiters):
                predicate, future = waiter
                if not future.done() and predicate(frame):
                    future.set_result(frame)
                    self._waiters.remove(waiter)

    async def wait_for(self, predicate: Any, timeout: float = 10.0) -> dict[str, Any]:
        """The first frame (already received or future) for which ``predicate(frame)`` is true."""
        for frame in self.frames:
            if predicate(frame):
                return frame
        future: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self._waiters.append((predicate, future))
        return await asyncio.wait_for(future, timeout)

    async def handshake(self) -> list[dict[str, Any]]:
        await self.wait_for(lambda f: f.get("type") == "cf_agent_mcp_servers")
        return list(self.frames)

    async def call(self, method: str, *args: Any, timeout: float = 10.0) -> Any:
        call_id = str(uuid.uuid4())
        await self.ws.send(json.dumps({"type": "rpc", "id": call_id, "method": method, "args": list(args)}))
        reply = await self.wait_for(
            lambda f: f.get("type") == "rpc" and f.get("id") == call_id and f.get("done", True), timeout
        )
        if not reply.get("success"):
            raise RuntimeError(reply.get("error"))
        return reply.get("result")

    async def close(self) -> None:
        await self.ws.close()
        self._reader.cancel()
