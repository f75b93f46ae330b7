from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

from starlette.testclient import TestClient

from ponder.server import App
from ponder.testing import ScriptedModel, reply, tool_call
from ponder.think import Think, tool

from .conftest import user


@tool(needs_approval=True)
def delete_file(path: str) -> str:
    """Delete a file."""
    return f"deleted {path}"


class Chat(Think):
    model: Any = None

    def get_model(self) -> Any:
        return type(self).model

    def get_tools(self) -> Any:
        return [delete_file]

    async def on_chat_error(self, error: BaseException, ctx: Any = None) -> Any:
        self.__dict__.setdefault("errors", []).append((error, ctx))
        return None


def chat_class(model: ScriptedModel, name: str = "Chat") -> type[Chat]:
    return type(name, (Chat,), {"model": model})


def bodies(frames: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [json.loads(f["body"]) for f in frames if not f["done"] and f["body"] and not f.get("error")]


async def test_golden_frame_sequence(host: Any, connect: Any) -> None:
    agent = await host.get_agent(chat_class(ScriptedModel(["You said: Hi there."])), "room-1")
    client = await connect(agent)
    assert client.transport.frames[:3] == [
        {"type": "cf_agent_identity", "name": "room-1", "agent": "chat"},
        {"type": "cf_agent_mcp_servers", "mcp": {"prompts": [], "resources": [], "servers": {}, "tools": []}},
        {"type": "cf_agent_chat_messages", "messages": [], "connect": True},
    ]
    await client.send({"type": "cf_agent_stream_resume_request", "probeId": "mVJtvWuD"})
    await client.transport.wait_for(lambda f: f["type"] == "cf_agent_stream_resume_none")
    await client.request("KTV6U9HR", [user("Hi there", "DyQ0AbHrD9NnfiFC")])
    done = await client.wait_done("KTV6U9HR")

    frames = client.transport.frames[4:]
    responses = [f for f in frames if f["type"] == "cf_agent_use_chat_response"]
    chunks = responses[:-1]
    assert [f["seq"] for f in chunks] == list(range(len(chunks)))
    assert all(list(f) == ["type", "id", "body", "done", "seq"] for f in chunks)
    kinds = [json.loads(f["body"])["type"] for f in chunks]
    assert kinds == ["start", "start-step", "text-start"] + ["text-delta"] * 4 + [
        "text-end",
        "finish-step",
        "finish",
    ]
    start = json.loads(chunks[0]["body"])
    assert json.loads(chunks[2]["body"]) == {"type": "text-start", "id": "t0"}
    assert json.loads(chunks[-1]["body"]) == {"type": "finish", "finishReason": "stop"}
    # after the last chunk: the transcript, then the terminal frame
    assert frames[-2]["type"] == "cf_agent_chat_messages"
    transcript = frames[-2]["messages"]
    assert [m["id"] for m in transcript] == ["DyQ0AbHrD9NnfiFC", start["messageId"]]
    assert transcript[1]["parts"] == [
        {"type": "step-start"},
        {"type": "text", "text": "You said: Hi there.", "state": "done"},
    ]
    assert done == {
        "type": "cf_agent_use_chat_response",
        "id": "KTV6U9HR",
        "body": "",
        "done": True,
        "outcome": "completed",
        "messageIds": ["DyQ0AbHrD9NnfiFC"],
    }
    # the sender does not get its own user message echoed before the stream
    assert [f["type"] for f in frames].count("cf_agent_chat_messages") == 1
    assert agent.messages == transcript


async def test_second_connection_sees_the_turn(host: Any, connect: Any) -> None:
    agent = await host.get_agent(chat_class(ScriptedModel(["Hello."])), "r")
    sender = await connect(agent)
    watcher = await connect(agent)
    await sender.request("R1", [user("hi", "u1")])
    await sender.wait_done("R1")
    await watcher.wait_done("R1")
    snapshots = watcher.transport.of_type("cf_agent_chat_messages")
    assert snapshots[0]["connect"] is True
    assert [m["id"] for m in snapshots[1]["messages"]] == ["u1"]  # the user message, before the stream
    assert len(snapshots[2]["messages"]) == 2
    assert bodies(watcher.transport.responses("R1")) == bodies(sender.transport.responses("R1"))


async def test_malformed_body_is_answered(host: Any, connect: Any) -> None:
    agent = await host.get_agent(chat_class(ScriptedModel(["ok"])), "r")
    client = await connect(agent)
    await client.send(
        {"type": "cf_agent_use_chat_request", "id": "bad", "init": {"method": "POST", "body": "{nope"}}
    )
    frame = await client.wait_done("bad")
    assert frame["error"] is True and "not valid JSON" in frame["body"]
    await client.request("bad2", [{"id": "x", "role": "robot", "parts": []}])
    frame = await client.wait_done("bad2")
    assert frame["error"] is True and "invalid role" in frame["body"]
    assert [ctx.stage for _, ctx in agent.errors] == ["parse", "parse"]
    assert agent.messages == []
    await client.request("good", [user("hi", "u1")])
    assert (await client.wait_done("good"))["outcome"] == "completed"


async def test_model_error_sends_error_frame(host: Any, connect: Any) -> None:
    from ponder.testing import error

    model = ScriptedModel([reply("part", error("provider down")), "fine"])
    agent = await host.get_agent(chat_class(model), "r")
    client = await connect(agent)
    await client.request("R1", [user("hi", "u1")])
    done = await client.wait_done("R1")
    assert done["outcome"] == "error"
    errors = [f for f in client.transport.responses("R1") if f.get("error")]
    assert errors == [
        {
            "type": "cf_agent_use_chat_response",
            "id": "R1",
            "body": "provider down",
            "done": False,
            "error": True,
        }
    ]
    assert agent.errors and agent.errors[0][1].stage == "stream"
    assert agent.messages[-1]["parts"][-1]["text"] == "part"
    await client.request("R2", [*agent.messages, user("again", "u2")])
    assert (await client.wait_done("R2"))["outcome"] == "completed"


async def test_cancel_mid_stream_persists_partial(host: Any, connect: Any) -> None:
    model = ScriptedModel([" ".join(f"w{i}" for i in range(200))], chunk_delay=0.01)
    agent = await host.get_agent(chat_class(model), "r")
    client = await connect(agent)
    await client.request("R1", [user("long", "u1")])
    await client.transport.wait_for(lambda f: f.get("body", "").startswith('{"type":"text-delta"'))
    await client.send({"type": "cf_agent_chat_request_cancel", "id": "R1"})
    done = await client.wait_done("R1")
    assert done["outcome"] == "aborted"
    stored = agent.messages[-1]
    assert stored["role"] == "assistant"
    text = stored["parts"][-1]
    assert text["state"] == "done" and 0 < len(text["text"].split()) < 200


async def test_clear_broadcasts_to_others(host: Any, connect: Any) -> None:
    agent = await host.get_agent(chat_class(ScriptedModel(["one"])), "r")
    a = await connect(agent)
    b = await connect(agent)
    await a.request("R1", [user("hi", "u1")])
    await a.wait_done("R1")
    await a.send({"type": "cf_agent_chat_clear"})
    await b.transport.wait_for(lambda f: f["type"] == "cf_agent_chat_clear")
    assert agent.messages == []
    assert not a.transport.of_type("cf_agent_chat_clear")
    rows = await host.store.fetch_all(
        "SELECT id FROM ponder_session_messages WHERE agent_id = ?", (agent.id,)
    )
    assert rows == []


async def test_regenerate_keeps_the_old_answer_as_a_sibling(host: Any, connect: Any) -> None:
    agent = await host.get_agent(chat_class(ScriptedModel(["first answer", "second answer"])), "r")
    client = await connect(agent)
    await client.request("R1", [user("q", "u1")])
    await client.wait_done("R1")
    old = agent.messages[-1]
    await client.request("R2", [user("q", "u1")], trigger="regenerate-message")
    await client.wait_done("R2")
    new = agent.messages[-1]
    assert new["id"] != old["id"] and new["parts"][-1]["text"] == "second answer"
    assert [m["id"] for m in agent.messages] == ["u1", new["id"]]
    assert [m["id"] for m in await agent.get_branches("u1")] == [old["id"], new["id"]]


async def test_approval_approve_continues_in_the_same_message(host: Any, connect: Any) -> None:
    model = ScriptedModel([tool_call("delete_file", {"path": "/tmp/x"}, id="call_a"), "Deleted it."])
    agent = await host.get_agent(chat_class(model), "r")
    client = await connect(agent)
    await client.request("R1", [user("delete /tmp/x", "u1")])
    await client.wait_done("R1")
    assistant = agent.messages[-1]
    part = assistant["parts"][-1]
    assert part["state"] == "approval-requested" and part["approval"]["id"]
    assert model.calls == 1

    await client.send(
        {"type": "cf_agent_tool_approval", "toolCallId": "call_a", "approved": True, "autoContinue": True}
    )
    updated = await client.transport.wait_for(lambda f: f["type"] == "cf_agent_message_updated")
    assert updated["message"]["parts"][-1]["state"] == "approval-responded"
    done = await client.transport.wait_for(
        lambda f: f["type"] == "cf_agent_use_chat_response" and f["done"] and f.get("continuation")
    )
    assert done["outcome"] == "completed"
    frames = client.transport.responses(done["id"])
    assert all(f.get("continuation") is True for f in frames)
    chunks = bodies(frames)
    # The approved call runs before the stream starts: WebSocket clients get its output as the updated
    # message (before the first stream frame), never as a chunk a resumed hook could not apply.
    assert chunks[0] == {"type": "start"}
    assert chunks[1] == {"type": "start-step"}
    assert not [c for c in chunks if c.get("toolCallId") == "call_a"]
    all_frames = client.transport.frames
    ran = [
        i
        for i, f in enumerate(all_frames)
        if isinstance(f, dict)
        and f.get("type") == "cf_agent_message_updated"
        and f["message"]["parts"][-1].get("state") == "output-available"
    ]
    assert len(ran) == 1
    ran_part = all_frames[ran[0]]["message"]["parts"][-1]
    assert ran_part["toolCallId"] == "call_a" and ran_part["output"] == "deleted /tmp/x"
    assert ran[0] < all_frames.index(frames[0])
    assert [m["id"] for m in agent.messages] == ["u1", assistant["id"]]  # same message, continued
    final = agent.messages[-1]
    tool_part = next(p for p in final["parts"] if p.get("toolCallId") == "call_a")
    assert tool_part["state"] == "output-available" and tool_part["output"] == "deleted /tmp/x"
    assert final["parts"][-1]["text"] == "Deleted it."
    assert model.calls == 2


async def test_approval_deny_continues_without_running(host: Any, connect: Any) -> None:
    model = ScriptedModel([tool_call("delete_file", {"path": "/etc"}, id="call_d"), "OK, I will not."])
    agent = await host.get_agent(chat_class(model), "r")
    client = await connect(agent)
    await client.request("R1", [user("delete /etc", "u1")])
    await client.wait_done("R1")
    await client.send(
        {"type": "cf_agent_tool_approval", "toolCallId": "call_d", "approved": False, "autoContinue": True}
    )
    await client.transport.wait_for(
        lambda f: f["type"] == "cf_agent_use_chat_response" and f["done"] and f.get("continuation")
    )
    final = agent.messages[-1]
    tool_part = next(p for p in final["parts"] if p.get("toolCallId") == "call_d")
    assert tool_part["state"] == "output-denied"
    assert final["parts"][-1]["text"] == "OK, I will not."
    (result,) = [r for m in model.requests[1].messages if hasattr(m, "results") for r in m.results]
    assert result.is_error and "denied" in result.error


async def test_parallel_approvals_wait_for_every_answer(host: Any, connect: Any) -> None:
    model = ScriptedModel(
        [
            [
                tool_call("delete_file", {"path": "a"}, id="c1"),
                tool_call("delete_file", {"path": "b"}, id="c2"),
            ],
            "Both handled.",
        ]
    )
    agent = await host.get_agent(chat_class(model), "r")
    client = await connect(agent)
    await client.request("R1", [user("delete a and b", "u1")])
    await client.wait_done("R1")
    await client.send(
        {"type": "cf_agent_tool_approval", "toolCallId": "c1", "approved": True, "autoContinue": True}
    )
    await client.transport.wait_for(lambda f: f["type"] == "cf_agent_message_updated")
    await asyncio.sleep(0.05)  # give a (wrong) continuation the chance to start; none may
    assert model.calls == 1
    await client.send(
        {"type": "cf_agent_tool_approval", "toolCallId": "c2", "approved": False, "autoContinue": True}
    )
    await client.transport.wait_for(
        lambda f: f["type"] == "cf_agent_use_chat_response" and f["done"] and f.get("continuation")
    )
    assert model.calls == 2
    states = {p["toolCallId"]: p["state"] for p in agent.messages[-1]["parts"] if "toolCallId" in p}
    assert states == {"c1": "output-available", "c2": "output-denied"}


async def test_tool_result_frame_updates_a_waiting_call(host: Any, connect: Any) -> None:
    agent = await host.get_agent(chat_class(ScriptedModel([])), "r")
    client = await connect(agent)
    waiting = {
        "id": "a1",
        "role": "assistant",
        "parts": [
            {
                "type": "tool-getLocation",
                "toolCallId": "c9",
                "toolName": "getLocation",
                "state": "input-available",
                "input": {},
            }
        ],
    }
    await agent.add_messages([user("where am I", "u1"), waiting])
    await client.send(
        {
            "type": "cf_agent_tool_result",
            "toolCallId": "c9",
            "toolName": "getLocation",
            "output": {"city": "Lisbon"},
        }
    )
    updated = await client.transport.wait_for(lambda f: f["type"] == "cf_agent_message_updated")
    assert updated["message"]["parts"][0]["output"] == {"city": "Lisbon"}
    assert agent.messages[-1]["parts"][0]["state"] == "output-available"


def test_get_messages_over_http(tmp_path: Path) -> None:
    model = ScriptedModel(["Hello from HTTP."])
    cls = chat_class(model, "HttpChat")
    app = App(agents=[cls], store=f"sqlite:///{tmp_path / 'app.sqlite3'}")
    with TestClient(app) as http:
        assert http.get("/agents/http-chat/room/get-messages").json() == []
        with http.websocket_connect("/agents/http-chat/room?_pk=p1") as ws:
            while json.loads(ws.receive_text())["type"] != "cf_agent_chat_messages":
                pass
            body = json.dumps({"messages": [user("hi", "u1")], "trigger": "submit-message"})
            ws.send_text(
                json.dumps(
                    {
                        "type": "cf_agent_use_chat_request",
                        "id": "R1",
                        "init": {"method": "POST", "body": body},
                    }
                )
            )
            while True:
                frame = json.loads(ws.receive_text())
                if frame["type"] == "cf_agent_use_chat_response" and frame["done"]:
                    break
        messages = http.get("/agents/http-chat/room/get-messages").json()
        assert [m["role"] for m in messages] == ["user", "assistant"]
        assert messages[1]["parts"][-1]["text"] == "Hello from HTTP."
        assert http.get("/agents/http-chat/room/other").status_code == 404
