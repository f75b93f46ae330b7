from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest

from ponder import AgentHost
from ponder.runtime import Connection


class FakeTransport:
    """An in-memory socket: records every frame the agent sends and lets a test wait for one."""

    def __init__(self) -> None:
        self.frames: list[Any] = []
        self._changed = asyncio.Condition()
        self.closed: tuple[int, str] | None = None

    async def send_text(self, data: str) -> None:
        async with self._changed:
            self.frames.append(json.loads(data))
            self._changed.notify_all()

    async def send_bytes(self, data: bytes) -> None:
        async with self._changed:
            self.frames.append(data)
            self._changed.notify_all()

    async def close(self, code: int = 1000, reason: str = "") -> None:
        self.closed = (code, reason)

    async def wait_for(self, predicate: Callable[[Any], bool], timeout: float = 5.0) -> Any:
        async def find() -> Any:
            async with self._changed:
                while True:
                    for frame in self.frames:
                        if isinstance(frame, dict) and predicate(frame):
                            return frame
                    await self._changed.wait()

        return await asyncio.wait_for(find(), timeout)

    def of_type(self, kind: str) -> list[dict[str, Any]]:
        return [f for f in self.frames if isinstance(f, dict) and f.get("type") == kind]

    def responses(self, request_id: str) -> list[dict[str, Any]]:
        return [f for f in self.of_type("cf_agent_use_chat_response") if f.get("id") == request_id]


class Client:
    def __init__(self, agent: Any, connection: Connection, transport: FakeTransport) -> None:
        self.agent = agent
        self.connection = connection
        self.transport = transport

    async def send(self, frame: dict[str, Any]) -> None:
        await self.agent._receive(self.connection, json.dumps(frame))

    async def request(self, request_id: str, messages: list[dict[str, Any]], **body: Any) -> None:
        payload = {"messages": messages, "trigger": body.pop("trigger", "submit-message"), **body}
        await self.send(
            {
                "id": request_id,
                "init": {"method": "POST", "body": json.dumps(payload)},
                "type": "cf_agent_use_chat_request",
            }
        )

    async def wait_done(self, request_id: str, timeout: float = 5.0) -> dict[str, Any]:
        return await self.transport.wait_for(
            lambda f: (
                f.get("type") == "cf_agent_use_chat_response" and f.get("id") == request_id and f["done"]
            ),
            timeout,
        )


@pytest.fixture
async def host(tmp_path: Path) -> AsyncIterator[AgentHost]:
    h = AgentHost(f"sqlite:///{tmp_path / 'think.sqlite3'}", shutdown_timeout=2.0)
    await h.start()
    yield h
    await h.close()


@pytest.fixture
def connect() -> Callable[..., Any]:
    counter = 0

    async def _connect(agent: Any) -> Client:
        nonlocal counter
        counter += 1
        transport = FakeTransport()
        connection = Connection(f"conn-{counter}", transport)
        await agent._accept_connection(connection)
        await transport.wait_for(lambda f: f.get("type") == "cf_agent_chat_messages")
        return Client(agent, connection, transport)

    return _connect


def user(text: str, id: str) -> dict[str, Any]:
    return {"id": id, "role": "user", "parts": [{"type": "text", "text": text}]}
