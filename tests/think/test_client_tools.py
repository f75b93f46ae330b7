"""Client tools: declared by the browser (``clientTools``), called by the model, answered with
``cf_agent_tool_result``, continued in the same assistant message — and the resume handshake that lets the
stock hook attach to that continuation (probe → ``stream_pending`` / ``stream_resuming`` → ACK → replay)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

from ponder import AgentHost
from ponder.models import Finish, TextDelta, ToolMessage
from ponder.runtime import Connection
from ponder.testing import ScriptedModel, tool_call
from ponder.think import ClientTool, Think, tool

from .conftest import Client, FakeTransport, user

LOCATION = {
    "name": "getLocation",
    "description": "Where the user is (asks the browser).",
    "parameters": {"type": "object", "properties": {"precise": {"type": "boolean"}}},
}
CLOCK = {"name": "getTime", "description": "The browser's local time."}


class Chat(Think):
    model: Any = None
    search_tool = False  # these tests compare the exact tool lists the model sees

    def get_model(self) -> Any:
        return type(self).model


def chat_class(model: ScriptedModel, name: str = "Chat", base: type[Think] = Chat) -> type[Think]:
    return type(name, (base,), {"model": model})


def is_done(request_id: str | None = None, **match: Any) -> Any:
    def predicate(frame: dict[str, Any]) -> bool:
        return (
            frame.get("type") == "cf_agent_use_chat_response"
            and frame.get("done") is True
            and (request_id is None or frame.get("id") == request_id)
            and all(frame.get(k) == v for k, v in match.items())
        )

    return predicate


def of_type(kind: str, **match: Any) -> Any:
    return lambda f: f.get("type") == kind and all(f.get(k) == v for k, v in match.items())


def tool_part(message: dict[str, Any], call_id: str) -> dict[str, Any]:
    return next(p for p in message["parts"] if p.get("toolCallId") == call_id)


def tool_results(request: Any) -> list[Any]:
    return [r for m in request.messages if isinstance(m, ToolMessage) for r in m.results]


async def result_frame(client: Any, call_id: str, name: str, output: Any = None, **extra: Any) -> None:
    await client.send(
        {"type": "cf_agent_tool_result", "toolCallId": call_id, "toolName": name, "output": output, **extra}
    )


def gated(text: str) -> tuple[asyncio.Event, Any]:
    """A scripted reply that waits for ``gate.set()`` before the model answers ``text``."""
    gate = asyncio.Event()

    async def answer(request: Any) -> str:
        await gate.wait()
        return text

    return gate, answer


async def test_client_tool_round_trip_continues_the_same_message(host: Any, connect: Any) -> None:
    gate, answer = gated("You are in Lisbon.")
    model = ScriptedModel([tool_call("getLocation", {"precise": True}, id="c1"), answer])
    agent = await host.get_agent(chat_class(model), "r")
    client = await connect(agent)
    watcher = await connect(agent)
    await client.request("R1", [user("where am I?", "u1")], clientTools=[LOCATION])
    done = await client.wait_done("R1")
    assert done["outcome"] == "completed"

    # the model saw the client tool like any other tool
    (definition,) = model.requests[0].tools
    assert (definition.name, definition.description) == ("getLocation", LOCATION["description"])
    assert definition.parameters == LOCATION["parameters"]
    # the call waits for the browser; the turn ended normally
    assistant = agent.messages[-1]
    assert tool_part(assistant, "c1")["state"] == "input-available"
    assert tool_part(assistant, "c1")["input"] == {"precise": True}
    assert model.calls == 1

    # what useAgentChat does: tool result with autoContinue, then a resume probe for the continuation
    await result_frame(
        client, "c1", "getLocation", {"city": "Lisbon"}, autoContinue=True, clientTools=[LOCATION]
    )
    await client.send({"type": "cf_agent_stream_resume_request", "probeId": "probe-1"})
    updated = await client.transport.wait_for(of_type("cf_agent_message_updated"))
    assert updated["message"]["id"] == assistant["id"]
    assert tool_part(updated["message"], "c1")["state"] == "output-available"
    offer = await client.transport.wait_for(of_type("cf_agent_stream_resuming", probeId="probe-1"))
    continuation_id = offer["id"]
    # the continuation has started (start, start-step) and waits for the model: ACK, replay, then live
    await client.send({"type": "cf_agent_stream_resume_ack", "id": continuation_id})
    await client.transport.wait_for(lambda f: f.get("id") == continuation_id and f.get("replayComplete"))
    gate.set()
    final = await client.wait_done(continuation_id)
    assert final["outcome"] == "completed" and final["continuation"] is True

    # the client got every chunk exactly once: the replay up to its ACK, then live
    frames = client.transport.responses(continuation_id)
    assert all(f.get("continuation") is True for f in frames)
    chunk_frames = [f for f in frames if f["body"]]
    assert [f["seq"] for f in chunk_frames] == list(range(len(chunk_frames)))
    replayed = [f for f in chunk_frames if f.get("replay")]
    assert [json.loads(f["body"])["type"] for f in replayed] == ["start", "start-step"]
    assert chunk_frames[: len(replayed)] == replayed  # the replay first, then the live chunks
    assert sum(1 for f in frames if f.get("replayComplete")) == 1
    chunks = [json.loads(f["body"]) for f in chunk_frames]
    assert chunks[0] == {"type": "start"}  # no messageId: it extends the last assistant message
    assert chunks[-1] == {"type": "finish", "finishReason": "stop"}
    # a tab that never probed watched the same stream live
    watched = [json.loads(f["body"]) for f in watcher.transport.responses(continuation_id) if f["body"]]
    assert watched == chunks

    # one assistant message, continued: the tool output, then the model's answer
    assert [m["id"] for m in agent.messages] == ["u1", assistant["id"]]
    final_message = agent.messages[-1]
    assert tool_part(final_message, "c1")["output"] == {"city": "Lisbon"}
    assert final_message["parts"][-1] == {"type": "text", "text": "You are in Lisbon.", "state": "done"}
    (result,) = tool_results(model.requests[1])
    assert result.output == {"city": "Lisbon"} and not result.is_error
    assert [t.name for t in model.requests[1].tools] == ["getLocation"]


async def test_parallel_client_tools_wait_for_every_result(host: Any, connect: Any) -> None:
    model = ScriptedModel(
        [[tool_call("getLocation", {}, id="c1"), tool_call("getTime", {}, id="c2")], "Lisbon, noon."]
    )
    agent = await host.get_agent(chat_class(model), "r")
    client = await connect(agent)
    await client.request("R1", [user("where and when?", "u1")], clientTools=[LOCATION, CLOCK])
    await client.wait_done("R1")
    states = {p["toolCallId"]: p["state"] for p in agent.messages[-1]["parts"] if "toolCallId" in p}
    assert states == {"c1": "input-available", "c2": "input-available"}

    await result_frame(client, "c1", "getLocation", {"city": "Lisbon"}, autoContinue=True)
    await client.send({"type": "cf_agent_stream_resume_request", "probeId": "p1"})
    # half a batch: the continuation is pending, so the probe is parked rather than told "idle"
    pending = await client.transport.wait_for(of_type("cf_agent_stream_pending", probeId="p1"))
    assert model.calls == 1
    assert not [f for f in client.transport.of_type("cf_agent_use_chat_response") if f.get("continuation")]

    await result_frame(client, "c2", "getTime", "12:00", autoContinue=True)
    offer = await client.transport.wait_for(of_type("cf_agent_stream_resuming", probeId="p1"))
    assert offer["id"] == pending["id"]
    await client.send({"type": "cf_agent_stream_resume_ack", "id": offer["id"]})
    final = await client.wait_done(offer["id"])
    assert final["outcome"] == "completed" and final["continuation"] is True
    assert model.calls == 2
    assert {r.tool_call_id: r.output for r in tool_results(model.requests[1])} == {
        "c1": {"city": "Lisbon"},
        "c2": "12:00",
    }
    assert agent.messages[-1]["parts"][-1]["text"] == "Lisbon, noon."
    assert len(agent.messages) == 2


async def test_errored_result_without_auto_continue_does_not_continue(host: Any, connect: Any) -> None:
    model = ScriptedModel([tool_call("getLocation", {}, id="c1")])
    agent = await host.get_agent(chat_class(model), "r")
    client = await connect(agent)
    await client.request("R1", [user("where am I?", "u1")], clientTools=[LOCATION])
    await client.wait_done("R1")
    # what the stock hook sends for addToolOutput({state: "output-error"}): autoContinue false
    await result_frame(
        client, "c1", "getLocation", None, state="output-error", errorText="User said no", autoContinue=False
    )
    updated = await client.transport.wait_for(of_type("cf_agent_message_updated"))
    part = tool_part(updated["message"], "c1")
    assert part["state"] == "output-error" and part["errorText"] == "User said no"
    # a probe sent after the result is answered "idle": nothing was queued
    await client.send({"type": "cf_agent_stream_resume_request", "probeId": "p1"})
    answer = await client.transport.wait_for(of_type("cf_agent_stream_resume_none", probeId="p1"))
    assert answer["reason"] == "idle"
    await agent.wait_until_idle()
    assert model.calls == 1
    assert tool_part(agent.messages[-1], "c1")["state"] == "output-error"


async def test_errored_sibling_completing_a_batch_continues(host: Any, connect: Any) -> None:
    model = ScriptedModel(
        [[tool_call("getLocation", {}, id="c1"), tool_call("getTime", {}, id="c2")], "Partly."]
    )
    agent = await host.get_agent(chat_class(model), "r")
    client = await connect(agent)
    await client.request("R1", [user("where and when?", "u1")], clientTools=[LOCATION, CLOCK])
    await client.wait_done("R1")
    await result_frame(client, "c1", "getLocation", {"city": "Porto"}, autoContinue=True)
    await result_frame(client, "c2", "getTime", None, state="output-error", autoContinue=False)
    done = await client.transport.wait_for(is_done(continuation=True))
    assert done["outcome"] == "completed"
    results = {r.tool_call_id: r for r in tool_results(model.requests[1])}
    assert results["c2"].is_error and "denied" in results["c2"].error  # the stock client's default text
    assert agent.messages[-1]["parts"][-1]["text"] == "Partly."


async def test_client_tools_persist_across_a_restart(tmp_path: Path, connect: Any) -> None:
    url = f"sqlite:///{tmp_path / 'restart.sqlite3'}"
    first = ScriptedModel([tool_call("getLocation", {}, id="c1")])
    cls = chat_class(first, "Persisted")
    host = AgentHost(url, shutdown_timeout=2.0)
    await host.start()
    agent = await host.get_agent(cls, "r")
    client = await connect(agent)
    await client.request("R1", [user("where am I?", "u1")], clientTools=[LOCATION], locale="pt-PT")
    await client.wait_done("R1")
    await host.close()

    second = ScriptedModel(["You are in Lisbon.", "Still Lisbon.", "No tools now."])
    cls.model = second
    host = AgentHost(url, shutdown_timeout=2.0)
    await host.start()
    try:
        agent = await host.get_agent(cls, "r")
        assert [t["name"] for t in agent.client_tools] == ["getLocation"]
        assert agent.last_body == {"locale": "pt-PT"}
        client = await connect(agent)
        await result_frame(client, "c1", "getLocation", {"city": "Lisbon"}, autoContinue=True)
        await client.transport.wait_for(is_done(continuation=True))
        assert [t.name for t in second.requests[0].tools] == ["getLocation"]
        assert agent.messages[-1]["parts"][-1]["text"] == "You are in Lisbon."

        # a later request without clientTools still has them; an explicit empty array clears them
        await client.request("R2", [*agent.messages, user("and now?", "u2")])
        await client.wait_done("R2")
        assert [t.name for t in second.requests[1].tools] == ["getLocation"]
        await client.request("R3", [*agent.messages, user("and now?", "u3")], clientTools=[])
        await client.wait_done("R3")
        assert second.requests[2].tools == []
        assert agent.client_tools == []
        rows = await host.store.fetch_all(
            "SELECT key FROM ponder_think_config WHERE agent_id = ? ORDER BY key", (agent.id,)
        )
        assert [r["key"] for r in rows] == []  # the body of R3 was empty too
    finally:
        await host.close()


@tool
def getLocation() -> dict[str, str]:
    """The server's own location tool."""
    return {"city": "server-side"}


class WithServerTool(Chat):
    def get_tools(self) -> Any:
        return [getLocation]


async def test_a_client_tool_cannot_shadow_a_server_tool(host: Any, connect: Any) -> None:
    model = ScriptedModel([tool_call("getLocation", {}, id="c1"), "Done."])
    agent = await host.get_agent(chat_class(model, "Shadow", WithServerTool), "r")
    client = await connect(agent)
    await client.request("R1", [user("where?", "u1")], clientTools=[LOCATION])
    await client.wait_done("R1")
    assert [t.description for t in model.requests[0].tools] == ["The server's own location tool."]
    part = tool_part(agent.messages[-1], "c1")
    assert part["state"] == "output-available" and part["output"] == {"city": "server-side"}
    assert agent.messages[-1]["parts"][-1]["text"] == "Done."


async def test_client_tools_are_visible_to_hooks_and_active_tools(host: Any, connect: Any) -> None:
    seen: dict[str, Any] = {}

    class Hooked(Chat):
        async def before_turn(self, ctx: Any) -> Any:
            seen["tools"] = dict(ctx.tools)
            from ponder.think import TurnConfig

            return TurnConfig(active_tools=["getTime"])

    model = ScriptedModel(["ok"])
    agent = await host.get_agent(chat_class(model, "Hooked", Hooked), "r")
    client = await connect(agent)
    await client.request("R1", [user("hi", "u1")], clientTools=[LOCATION, CLOCK])
    await client.wait_done("R1")
    assert sorted(seen["tools"]) == ["getLocation", "getTime"]
    assert all(isinstance(t, ClientTool) for t in seen["tools"].values())
    assert [t.name for t in model.requests[0].tools] == ["getTime"]
    assert model.requests[0].tools[0].parameters == {"type": "object", "properties": {}}


async def test_invalid_client_tools_are_refused(host: Any, connect: Any) -> None:
    agent = await host.get_agent(chat_class(ScriptedModel([])), "r")
    client = await connect(agent)
    await client.request("R1", [user("hi", "u1")], clientTools=[{"name": "bad name!"}])
    frame = await client.wait_done("R1")
    assert frame["error"] is True and "clientTools[0].name" in frame["body"]
    await client.request("R2", [user("hi", "u1")], clientTools={"name": "x"})
    frame = await client.wait_done("R2")
    assert frame["error"] is True and "'clientTools' must be an array" in frame["body"]
    assert agent.messages == [] and agent.client_tools == []


async def test_probe_during_a_continuation_owned_by_another_tab(host: Any, connect: Any) -> None:
    gate, answer = gated("Lisbon.")
    model = ScriptedModel([tool_call("getLocation", {}, id="c1"), answer])
    agent = await host.get_agent(chat_class(model), "r")
    owner = await connect(agent)
    other = await connect(agent)
    await owner.request("R1", [user("where?", "u1")], clientTools=[LOCATION])
    await owner.wait_done("R1")
    await result_frame(owner, "c1", "getLocation", {"city": "Lisbon"}, autoContinue=True)
    # wait until the continuation streams, then the other tab probes
    started = await other.transport.wait_for(
        lambda f: f.get("type") == "cf_agent_use_chat_response" and f.get("continuation") and f["body"]
    )
    await other.send({"type": "cf_agent_stream_resume_request", "probeId": "x"})
    refused = await other.transport.wait_for(of_type("cf_agent_stream_resume_none", probeId="x"))
    assert refused["reason"] == "continuation-owned"
    # the owner's probe is offered the stream
    await owner.send({"type": "cf_agent_stream_resume_request", "probeId": "o"})
    offer = await owner.transport.wait_for(of_type("cf_agent_stream_resuming", probeId="o"))
    assert offer["id"] == started["id"]
    gate.set()
    await other.wait_done(started["id"])
    await owner.wait_done(started["id"])


class HalfwayModel:
    """Streams ``first``, waits for ``gate``, then streams ``second``."""

    name = "halfway"

    def __init__(self, first: str, second: str) -> None:
        self.first, self.second = first, second
        self.gate = asyncio.Event()

    async def stream(self, request: Any) -> Any:
        yield TextDelta(self.first)
        await self.gate.wait()
        yield TextDelta(self.second)
        yield Finish("stop")


async def test_connecting_mid_stream_is_offered_the_stream(host: Any, connect: Any) -> None:
    model = HalfwayModel("Once upon ", "a time.")
    agent = await host.get_agent(type("Story", (Chat,), {"model": model}), "r")
    sender = await connect(agent)
    await sender.request("R1", [user("tell me", "u1")])
    await sender.transport.wait_for(lambda f: '"text-delta"' in f.get("body", ""))

    transport = FakeTransport()
    late = Client(agent, Connection("late", transport), transport)
    await agent._accept_connection(late.connection)
    offer = await transport.wait_for(of_type("cf_agent_stream_resuming", id="R1"))
    assert "probeId" not in offer
    assert not transport.of_type("cf_agent_chat_messages")  # the replay rebuilds the message instead
    await late.send({"type": "cf_agent_stream_resume_ack", "id": "R1"})
    await transport.wait_for(lambda f: f.get("id") == "R1" and f.get("replayComplete"))
    model.gate.set()
    await late.wait_done("R1")
    frames = [f for f in transport.responses("R1") if f["body"]]
    assert [f["seq"] for f in frames] == list(range(len(frames)))
    replayed = [json.loads(f["body"])["type"] for f in frames if f.get("replay")]
    assert replayed == ["start", "start-step", "text-start", "text-delta"]
    live = [f for f in sender.transport.responses("R1") if f["body"]]
    assert [f["body"] for f in frames] == [f["body"] for f in live]  # the same chunks, the same seq
    text = "".join(json.loads(f["body"]).get("delta", "") for f in frames)
    assert text == "Once upon a time."
    assert transport.of_type("cf_agent_chat_messages")[-1]["messages"] == agent.messages


async def test_a_result_that_arrives_while_its_turn_still_runs(host: Any, connect: Any) -> None:
    gate = asyncio.Event()

    @tool
    async def lookup(q: str) -> str:
        """A slow server tool."""
        await gate.wait()
        return f"found {q}"

    class Mixed(Chat):
        def get_tools(self) -> Any:
            return [lookup]

    model = ScriptedModel(
        [[tool_call("getLocation", {}, id="c1"), tool_call("lookup", {"q": "x"}, id="s1")], "Both in."]
    )
    agent = await host.get_agent(chat_class(model, "Mixed", Mixed), "r")
    client = await connect(agent)
    await client.request("R1", [user("go", "u1")], clientTools=[LOCATION])
    # the client tool is waiting while the server tool still runs: answer it mid-turn
    await client.transport.wait_for(lambda f: '"tool-input-available","toolCallId":"c1"' in f.get("body", ""))
    # a client may not answer the server's own call (it is running), only its client tool
    await result_frame(client, "s1", "lookup", "spoofed", autoContinue=True)
    await result_frame(client, "c1", "getLocation", {"city": "Faro"}, autoContinue=True)
    updated = await client.transport.wait_for(of_type("cf_agent_message_updated"))
    assert tool_part(updated["message"], "c1")["output"] == {"city": "Faro"}
    assert tool_part(updated["message"], "s1")["state"] == "input-available"
    assert agent.messages == [user("go", "u1")]  # not persisted yet: it was applied to the running turn
    gate.set()
    await client.wait_done("R1")
    stored = agent.messages[-1]
    assert tool_part(stored, "c1")["state"] == "output-available"
    assert tool_part(stored, "s1")["output"] == "found x"
    assert len(client.transport.of_type("cf_agent_message_updated")) == 1
    done = await client.transport.wait_for(is_done(continuation=True))
    assert done["outcome"] == "completed"
    assert {r.tool_call_id for r in tool_results(model.requests[1])} == {"c1", "s1"}
    assert [m["id"] for m in agent.messages] == ["u1", stored["id"]]
    assert agent.messages[-1]["parts"][-1]["text"] == "Both in."
