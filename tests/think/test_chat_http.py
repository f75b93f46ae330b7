"""``POST /agents/<class>/<name>/chat`` (the AI SDK's HTTP transport), in process: the App is called as an
ASGI application by a fake client that can hang up whenever it likes."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from ponder.runtime import Connection
from ponder.server import App
from ponder.testing import ScriptedModel, error, reply, tool_call
from ponder.think import Think

from .conftest import Client, FakeTransport, user


class Chat(Think):
    model: Any = None

    def get_model(self) -> Any:
        return type(self).model


class Response:
    def __init__(self) -> None:
        self.status = 0
        self.headers: dict[str, str] = {}
        self.body = b""

    @property
    def events(self) -> list[Any]:
        """The SSE ``data:`` payloads, parsed (``[DONE]`` stays a string)."""
        out: list[Any] = []
        for block in self.body.decode().split("\n\n"):
            if not block:
                continue
            assert block.startswith("data: "), block
            data = block[len("data: ") :]
            out.append(data if data == "[DONE]" else json.loads(data))
        return out

    def json(self) -> Any:
        return json.loads(self.body)


async def call(
    app: App,
    method: str,
    path: str,
    body: bytes = b"",
    *,
    hang_up_after: str | None = None,
    started: asyncio.Event | None = None,
) -> Response:
    """One HTTP request through the ASGI app (spec 2.3, as uvicorn speaks it).

    With ``hang_up_after``, the client disconnects as soon as a body chunk containing that text arrived;
    ``started`` is set when the response's status line arrives.
    """
    response = Response()
    gone = asyncio.Event()
    delivered = False

    async def receive() -> dict[str, Any]:
        nonlocal delivered
        if not delivered:
            delivered = True
            return {"type": "http.request", "body": body, "more_body": False}
        await gone.wait()
        return {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        if gone.is_set():
            raise OSError("the client went away")
        if message["type"] == "http.response.start":
            response.status = message["status"]
            response.headers = {k.decode(): v.decode() for k, v in message["headers"]}
            if started is not None:
                started.set()
        elif message["type"] == "http.response.body":
            response.body += message.get("body", b"")
            if hang_up_after is not None and hang_up_after.encode() in message.get("body", b""):
                gone.set()

    scope = {
        "type": "http",
        "asgi": {"version": "3.0", "spec_version": "2.3"},
        "http_version": "1.1",
        "method": method,
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "query_string": b"",
        "root_path": "",
        "headers": [(b"host", b"test"), (b"content-type", b"application/json")],
        "client": ("127.0.0.1", 5000),
        "server": ("test", 80),
    }
    await app(scope, receive, send)
    return response


def body(*messages: dict[str, Any], trigger: str = "submit-message", **extra: Any) -> bytes:
    return json.dumps({"id": "chat-1", "messages": list(messages), "trigger": trigger, **extra}).encode()


@pytest.fixture
async def served(tmp_path: Path) -> AsyncIterator[Any]:
    apps: list[App] = []

    def make(model: Any, **attrs: Any) -> tuple[App, type[Chat]]:
        cls = type("HttpChat", (Chat,), {"model": model, **attrs})
        app = App(agents=[cls], store=f"sqlite:///{tmp_path / f'app{len(apps)}.sqlite3'}")
        apps.append(app)
        return app, cls

    yield make
    for app in apps:
        await app.host.close()


async def watch(app: App, cls: type[Chat], name: str) -> Client:
    """A WebSocket-protocol client of the same agent (fake transport)."""
    await app.host.start()
    agent = await app.host.get_agent(cls, name)
    transport = FakeTransport()
    client = Client(agent, Connection(f"watcher-{name}", transport), transport)
    await agent._accept_connection(client.connection)
    await transport.wait_for(lambda f: f.get("type") == "cf_agent_chat_messages")
    return client


async def test_sse_frames_and_headers(served: Any) -> None:
    app, cls = served(ScriptedModel(["Hello from SSE."]))
    watcher = await watch(app, cls, "room")
    response = await call(app, "POST", "/agents/http-chat/room/chat", body(user("hi", "u1"), locale="pt"))
    assert response.status == 200
    assert response.headers["content-type"] == "text/event-stream"
    assert response.headers["x-vercel-ai-ui-message-stream"] == "v1"
    assert response.headers["cache-control"] == "no-cache"
    assert response.body.endswith(b"data: [DONE]\n\n")
    events = response.events
    assert events[-1] == "[DONE]"
    chunks = events[:-1]
    assert [c["type"] for c in chunks] == [
        "start",
        "start-step",
        "text-start",
        "text-delta",
        "text-delta",
        "text-delta",
        "text-end",
        "finish-step",
        "finish",
    ]
    agent = watcher.agent
    assert chunks[0]["messageId"] == agent.messages[-1]["id"]
    assert [m["id"] for m in agent.messages] == ["u1", chunks[0]["messageId"]]
    assert agent.messages[-1]["parts"][-1] == {"type": "text", "text": "Hello from SSE.", "state": "done"}
    # persisted exactly as over the WebSocket: the watcher saw the user message, the stream and the transcript
    snapshots = watcher.transport.of_type("cf_agent_chat_messages")
    assert [m["id"] for m in snapshots[1]["messages"]] == ["u1"]
    request_id = next(f["id"] for f in watcher.transport.of_type("cf_agent_use_chat_response"))
    done = await watcher.wait_done(request_id)
    assert done["outcome"] == "completed" and done["messageIds"] == ["u1"]
    watched = [json.loads(f["body"]) for f in watcher.transport.responses(request_id) if f["body"]]
    assert watched == chunks
    assert agent.last_body == {"locale": "pt"}  # the AI SDK's id/messageId are not part of the body


async def test_same_transcript_as_the_websocket_path(served: Any, connect: Any) -> None:
    script = [reply("Let me add.", tool_call("add", {"a": 2, "b": 3}, id="k1")), "It is 5."]

    def add(a: int, b: int) -> int:
        """Add."""
        return a + b

    class Adder(Chat):
        def get_tools(self) -> Any:
            return [add]

    http_app, _ = served(ScriptedModel(list(script)), get_tools=Adder.get_tools)
    http = await call(http_app, "POST", "/agents/http-chat/a/chat", body(user("2+3?", "u1")))
    assert http.status == 200
    http_agent = await http_app.host.get_agent(http_app.agents[0], "a")

    ws_app, ws_cls = served(ScriptedModel(list(script)), get_tools=Adder.get_tools)
    ws = await watch(ws_app, ws_cls, "b")
    await ws.request("R1", [user("2+3?", "u1")])
    await ws.wait_done("R1")

    def strip(transcript: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return [{**m, "id": m["role"]} for m in transcript]

    assert strip(http_agent.messages) == strip(ws.agent.messages)
    assert http_agent.messages[-1]["parts"][-1]["text"] == "It is 5."


@pytest.mark.parametrize(
    ("payload", "expected"),
    [
        (b"{oops", "the body is not valid JSON"),
        (b'"text"', "the body must be a JSON object"),
        (b'{"messages": {}}', "'messages' must be an array"),
        (b'{"messages": [{"id": "", "role": "user", "parts": []}]}', "non-empty string 'id'"),
        (b'{"messages": [{"id": "x", "role": "user", "parts": "hi"}]}', "'parts' list of objects"),
        (b'{"messages": [], "trigger": "resume-stream"}', "'trigger' must be"),
        (b'{"messages": [], "clientTools": "all"}', "'clientTools' must be an array"),
        (b"\xff\xfe", "not valid UTF-8"),
    ],
)
async def test_bad_bodies_get_400_and_change_nothing(served: Any, payload: bytes, expected: str) -> None:
    app, cls = served(ScriptedModel([]))
    watcher = await watch(app, cls, "room")
    response = await call(app, "POST", "/agents/http-chat/room/chat", payload)
    assert response.status == 400
    assert response.headers["content-type"] == "application/json"
    assert expected in response.json()["error"]
    assert response.json()["error"].startswith("Invalid chat request: ")
    assert watcher.agent.messages == []
    assert watcher.agent.last_body == {}
    assert len(watcher.transport.frames) == 3  # identity, mcp, transcript: nothing was broadcast
    rows = await app.host.store.fetch_all("SELECT id FROM ponder_session_messages")
    assert rows == []


async def test_oversized_body_is_refused(served: Any) -> None:
    app, _ = served(ScriptedModel([]))
    app.max_frame_bytes = 100
    response = await call(app, "POST", "/agents/http-chat/room/chat", body(user("x" * 200, "u1")))
    assert response.status == 413
    assert "exceeds the 100-byte limit" in response.json()["error"]


async def test_client_disconnect_mid_stream_does_not_abort_the_turn(served: Any) -> None:
    words = " ".join(f"w{i}" for i in range(100))
    app, cls = served(ScriptedModel([words], chunk_delay=0.002))
    watcher = await watch(app, cls, "room")
    response = await call(
        app, "POST", "/agents/http-chat/room/chat", body(user("talk", "u1")), hang_up_after="w3"
    )
    # the client saw only the beginning, and no end of stream
    assert b'"w3' in response.body and b"[DONE]" not in response.body
    request_id = next(f["id"] for f in watcher.transport.of_type("cf_agent_use_chat_response"))
    done = await watcher.wait_done(request_id)
    assert done["outcome"] == "completed"
    stored = watcher.agent.messages[-1]
    assert stored["parts"][-1] == {"type": "text", "text": words, "state": "done"}
    rows = await app.host.store.fetch_all("SELECT id FROM ponder_session_messages WHERE role = 'assistant'")
    assert [r["id"] for r in rows] == [stored["id"]]


async def test_failed_turn_ends_with_an_error_chunk(served: Any) -> None:
    app, _ = served(ScriptedModel([reply("partial", error("provider down"))]))
    response = await call(app, "POST", "/agents/http-chat/room/chat", body(user("hi", "u1")))
    assert response.status == 200
    events = response.events
    assert events[-2:] == [{"type": "error", "errorText": "provider down"}, "[DONE]"]
    agent = await app.host.get_agent(app.agents[0], "room")
    assert agent.messages[-1]["parts"][-1]["text"] == "partial"  # the partial reply is kept


async def test_cancelled_turn_ends_with_an_abort_chunk(served: Any) -> None:
    app, cls = served(ScriptedModel([" ".join(f"w{i}" for i in range(400))], chunk_delay=0.005))
    watcher = await watch(app, cls, "room")
    request = asyncio.ensure_future(call(app, "POST", "/agents/http-chat/room/chat", body(user("go", "u1"))))
    first = await watcher.transport.wait_for(lambda f: '"text-delta"' in f.get("body", ""))
    await watcher.send({"type": "cf_agent_chat_request_cancel", "id": first["id"]})
    response = await request
    assert response.events[-2:] == [{"type": "abort"}, "[DONE]"]


async def test_regenerate_over_http(served: Any) -> None:
    app, _ = served(ScriptedModel(["first", "second"]))
    path = "/agents/http-chat/room/chat"
    first = await call(app, "POST", path, body(user("q", "u1")))
    answer_id = first.events[0]["messageId"]
    second = await call(
        app, "POST", path, body(user("q", "u1"), trigger="regenerate-message", messageId=answer_id)
    )
    assert second.status == 200
    agent = await app.host.get_agent(app.agents[0], "room")
    assert [m["id"] for m in await agent.get_branches("u1")] == [answer_id, second.events[0]["messageId"]]
    assert agent.messages[-1]["parts"][-1]["text"] == "second"


async def test_drop_mode_answers_409_and_stores_nothing(served: Any) -> None:
    gate = asyncio.Event()

    async def slow(request: Any) -> str:
        await gate.wait()
        return "done"

    app, cls = served(ScriptedModel([slow]), message_concurrency="drop")
    watcher = await watch(app, cls, "room")
    first = asyncio.ensure_future(call(app, "POST", "/agents/http-chat/room/chat", body(user("one", "u1"))))
    await watcher.transport.wait_for(lambda f: '"start-step"' in f.get("body", ""))
    second = await call(
        app, "POST", "/agents/http-chat/room/chat", body(user("one", "u1"), user("two", "u2"))
    )
    assert second.status == 409 and "in progress" in second.json()["error"]
    gate.set()
    assert (await first).status == 200
    assert [m["id"] for m in watcher.agent.messages if m["role"] == "user"] == ["u1"]


async def test_other_methods_and_the_resume_probe(served: Any) -> None:
    app, _ = served(ScriptedModel([]))
    response = await call(app, "GET", "/agents/http-chat/room/chat")
    assert response.status == 405 and response.headers["allow"] == "POST"
    response = await call(app, "GET", "/agents/http-chat/room/chat/chat-1/stream")
    assert response.status == 204
    response = await call(app, "GET", "/agents/http-chat/room/get-messages")
    assert response.status == 200 and response.json() == []


async def test_ai_sdk_client_tool_flow_continues_the_assistant_message(served: Any) -> None:
    """useChat over HTTP: the browser runs the tool, then posts the list back ending with the assistant
    message (``sendAutomaticallyWhen``); the server continues that message."""
    location = {"name": "getLocation", "parameters": {"type": "object", "properties": {}}}
    model = ScriptedModel([tool_call("getLocation", {}, id="c1"), "You are in Faro."])
    app, _ = served(model)
    path = "/agents/http-chat/room/chat"
    first = await call(app, "POST", path, body(user("where?", "u1"), clientTools=[location]))
    chunks = first.events[:-1]
    assert chunks[-1] == {"type": "finish", "finishReason": "tool-calls"}
    assert {
        "type": "tool-input-available",
        "toolCallId": "c1",
        "toolName": "getLocation",
        "input": {},
    } in chunks
    assistant_id = chunks[0]["messageId"]

    answered = {
        "id": assistant_id,
        "role": "assistant",
        "parts": [
            {"type": "step-start"},
            {
                "type": "tool-getLocation",
                "toolCallId": "c1",
                "state": "output-available",
                "input": {},
                "output": {"city": "Faro"},
            },
        ],
    }
    second = await call(app, "POST", path, body(user("where?", "u1"), answered))
    chunks = second.events[:-1]
    assert chunks[0] == {"type": "start"}  # continues the message the client already has
    assert chunks[-1] == {"type": "finish", "finishReason": "stop"}
    agent = await app.host.get_agent(app.agents[0], "room")
    assert [m["id"] for m in agent.messages] == ["u1", assistant_id]
    final = agent.messages[-1]
    assert final["parts"][1]["output"] == {"city": "Faro"}
    assert final["parts"][-1]["text"] == "You are in Faro."
    (result,) = [r for m in model.requests[1].messages if hasattr(m, "results") for r in m.results]
    assert result.output == {"city": "Faro"}


async def test_resume_probe_replays_then_follows_the_running_turn_to_its_end(served: Any) -> None:
    """The resumed stream has exactly the chunks the original request got, including a cancellation's
    ``abort`` ending, even when it joined mid-turn."""
    app, cls = served(ScriptedModel([" ".join(f"w{i}" for i in range(200))], chunk_delay=0.005))
    watcher = await watch(app, cls, "room")
    original = asyncio.ensure_future(call(app, "POST", "/agents/http-chat/room/chat", body(user("go", "u1"))))
    await watcher.transport.wait_for(lambda f: '"delta":"w20' in f.get("body", ""))
    resumed = asyncio.ensure_future(call(app, "GET", "/agents/http-chat/room/chat/chat-1/stream"))
    frame = await watcher.transport.wait_for(lambda f: '"delta":"w60' in f.get("body", ""))
    await watcher.send({"type": "cf_agent_chat_request_cancel", "id": frame["id"]})
    first, second = await original, await resumed
    assert second.status == 200 and second.headers["x-vercel-ai-ui-message-stream"] == "v1"
    assert second.events == first.events
    assert second.events[-2:] == [{"type": "abort"}, "[DONE]"]
    assert second.events[0]["type"] == "start"


async def test_resume_probe_of_a_failed_turn_ends_with_its_error(served: Any) -> None:
    gate = asyncio.Event()

    async def fails(request: Any) -> Any:
        await gate.wait()
        return reply("partial", error("provider down"))

    app, cls = served(ScriptedModel([fails]))
    watcher = await watch(app, cls, "room")
    original = asyncio.ensure_future(call(app, "POST", "/agents/http-chat/room/chat", body(user("go", "u1"))))
    await watcher.transport.wait_for(lambda f: '"start-step"' in f.get("body", ""))
    subscribed = asyncio.Event()
    resumed = asyncio.ensure_future(
        call(app, "GET", "/agents/http-chat/room/chat/chat-1/stream", started=subscribed)
    )
    await subscribed.wait()  # the probe answered 200: it is following the turn
    gate.set()
    first, second = await original, await resumed
    assert second.events == first.events
    assert second.events[-2:] == [{"type": "error", "errorText": "provider down"}, "[DONE]"]
