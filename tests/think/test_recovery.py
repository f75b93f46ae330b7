"""Crash recovery of chat turns (in-process crash: the host is closed with no grace, tasks are cancelled and
nothing is flushed; a new host on the same store wakes the agent with the orphaned fiber)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

from ponder import AgentHost
from ponder.models import UserMessage
from ponder.testing import ScriptedModel, reply, stall, tool_call
from ponder.think import Think, tool
from ponder.think._recovery import STARTED_TOOL_TEXT
from ponder.think._turn import CONTINUE_PROMPT
from tests.think.conftest import user

LONG = " ".join(f"w{i}" for i in range(60))
CALLS: list[str] = []
BLOCK = asyncio.Event


@tool
def lookup(q: str) -> str:
    """Look something up."""
    CALLS.append(q)
    return f"found {q}"


@tool(idempotent=False)
async def charge(amount: int) -> str:
    """Charge a card (a side effect)."""
    CALLS.append(f"charge {amount}")
    await asyncio.sleep(3600)
    return "charged"


class Bot(Think):
    model: Any = None

    def get_model(self) -> Any:
        return type(self).model

    def get_tools(self) -> Any:
        return [lookup, charge]


def bot(model: ScriptedModel, **attrs: Any) -> type[Bot]:
    return type("Bot", (Bot,), {"model": model, **attrs})


async def crash(host: AgentHost) -> None:
    """Die without grace: running turns are cancelled, buffered chunks are lost, fiber rows stay."""
    host.shutdown_timeout = 0.0
    await host.close()


async def restart(db: Path, cls: type[Bot], name: str = "r") -> tuple[AgentHost, Bot]:
    host = AgentHost(f"sqlite:///{db}", shutdown_timeout=2.0)
    await host.start()
    agent = await host.get_agent(cls, name)
    await asyncio.sleep(0)
    await agent.wait_until_idle()
    return host, agent


def assistants(agent: Bot) -> list[dict[str, Any]]:
    return [m for m in agent.messages if m["role"] == "assistant"]


def text_of(message: dict[str, Any]) -> str:
    return "".join(p.get("text", "") for p in message["parts"] if p["type"] == "text")


async def start_and_crash(
    tmp_path: Path, model: ScriptedModel, connect: Any, until: Any, **attrs: Any
) -> Path:
    db = tmp_path / "rec.sqlite3"
    host = AgentHost(f"sqlite:///{db}", shutdown_timeout=2.0)
    await host.start()
    agent = await host.get_agent(bot(model, **attrs), "r")
    client = await connect(agent)
    await client.request("req1", [user("hi", "u1")])
    await client.transport.wait_for(until, 5.0)
    await crash(host)
    return db


def delta_count(n: int) -> Any:
    """A ``wait_for`` predicate true at the ``n``-th text delta frame (frames are scanned again on each call)."""
    seen: set[int] = set()

    def pred(frame: dict[str, Any]) -> bool:
        if frame.get("type") == "cf_agent_use_chat_response" and '"text-delta"' in frame.get("body", ""):
            seen.add(frame.get("seq", -1))
        return len(seen) >= n

    return pred


async def test_crash_mid_text_continues_into_the_same_message(tmp_path: Path, connect: Any) -> None:
    first = ScriptedModel([LONG], chunk_delay=0.01)
    db = await start_and_crash(tmp_path, first, connect, delta_count(25))
    second = ScriptedModel(["REST."])
    host, agent = await restart(db, bot(second))
    try:
        [answer] = assistants(agent)
        text = text_of(answer)
        assert text.endswith("REST.") and text.startswith("w0 w1")
        assert LONG.startswith(text[: -len("REST.")].rstrip())
        # The continue instruction went to the model and was never stored.
        last = second.requests[0].messages[-1]
        assert isinstance(last, UserMessage) and CONTINUE_PROMPT in json.dumps(str(last))
        assert [m["role"] for m in agent.messages] == ["user", "assistant"]
        assert agent._config.get("recovering") is None
    finally:
        await host.close()


async def test_opened_but_empty_stream_is_retried_2105(tmp_path: Path, connect: Any) -> None:
    first = ScriptedModel([reply(stall(30), "never")])

    def opened(frame: dict[str, Any]) -> bool:
        return frame.get("type") == "cf_agent_use_chat_response" and '"start-step"' in frame.get("body", "")

    db = await start_and_crash(tmp_path, first, connect, opened)
    host, agent = await restart(db, bot(ScriptedModel(["Answer."])))
    try:
        assert [m["role"] for m in agent.messages] == ["user", "assistant"]
        assert text_of(agent.messages[1]) == "Answer."
        assert agent.messages[0]["id"] == "u1"
    finally:
        await host.close()


async def test_settled_tool_result_survives_and_is_not_rerun(tmp_path: Path, connect: Any) -> None:
    CALLS.clear()
    first = ScriptedModel([tool_call("lookup", {"q": "x"}), LONG], chunk_delay=0.01)

    def text_after_tool(frame: dict[str, Any]) -> bool:
        return frame.get("type") == "cf_agent_use_chat_response" and '"text-delta"' in frame.get("body", "")

    db = await start_and_crash(tmp_path, first, connect, text_after_tool)
    host, agent = await restart(db, bot(ScriptedModel(["Done."])))
    try:
        [answer] = assistants(agent)
        tools = [p for p in answer["parts"] if p["type"] == "tool-lookup"]
        assert len(tools) == 1 and tools[0]["state"] == "output-available" and tools[0]["output"] == "found x"
        assert CALLS == ["x"]
        assert text_of(answer).endswith("Done.")
    finally:
        await host.close()


async def test_started_side_effect_is_reported_interrupted_never_rerun(tmp_path: Path, connect: Any) -> None:
    CALLS.clear()
    first = ScriptedModel([tool_call("charge", {"amount": 5})])

    def started(frame: dict[str, Any]) -> bool:
        return bool(CALLS)

    db = await start_and_crash(tmp_path, first, connect, lambda f: started(f) or False)
    model = ScriptedModel(["I could not confirm the charge."])
    host, agent = await restart(db, bot(model))
    try:
        [answer] = assistants(agent)
        [part] = [p for p in answer["parts"] if p["type"] == "tool-charge"]
        assert part["state"] == "output-error" and part["errorText"] == STARTED_TOOL_TEXT
        assert CALLS == ["charge 5"]
        assert text_of(answer) == "I could not confirm the charge."
    finally:
        await host.close()


async def test_exhausted_recovery_ends_with_terminal_message(tmp_path: Path, connect: Any) -> None:
    attrs = {"chat_recovery": {"max_attempts": 1, "terminal_message": "Sorry, giving up."}}

    def opened(frame: dict[str, Any]) -> bool:
        return frame.get("type") == "cf_agent_use_chat_response" and '"start-step"' in frame.get("body", "")

    db = await start_and_crash(tmp_path, ScriptedModel([reply(stall(30), "x")]), connect, opened, **attrs)
    # The retry stalls again and the process dies again: no progress → the budget is spent.
    host = AgentHost(f"sqlite:///{db}", shutdown_timeout=2.0)
    await host.start()
    called = asyncio.Event()

    def stalling(request: Any) -> Any:
        called.set()  # the retry opened its stream and asked the model
        return reply(stall(30), "x")

    await host.get_agent(bot(ScriptedModel([stalling]), **attrs), "r")
    await asyncio.wait_for(called.wait(), 5.0)
    await crash(host)
    host, agent = await restart(db, bot(ScriptedModel(["unused"]), **attrs))
    try:
        assert [m["role"] for m in agent.messages] == ["user", "assistant"]
        assert text_of(agent.messages[1]) == "Sorry, giving up."
        # A client connecting later is told how the turn ended.
        late = await _connect_raw(agent)
        frame = await late.transport.wait_for(lambda f: f.get("type") == "cf_agent_stream_resuming")
        await late.send({"type": "cf_agent_stream_resume_ack", "id": frame["id"]})
        end = await late.transport.wait_for(lambda f: f.get("error") is True and f.get("done") is True)
        assert end["body"] == "Sorry, giving up."
    finally:
        await host.close()


async def test_stall_watchdog_recovers_into_the_same_message(tmp_path: Path, connect: Any) -> None:
    host = AgentHost(f"sqlite:///{tmp_path / 's.sqlite3'}", shutdown_timeout=2.0)
    await host.start()
    model = ScriptedModel([reply("Hello", stall(10), "never"), " world."])
    agent = await host.get_agent(bot(model, chat_stream_stall_timeout=0.2), "s")
    try:
        client = await connect(agent)
        await client.request("req1", [user("hi", "u1")])
        await client.transport.wait_for(
            lambda f: f.get("id") == "req1" and f.get("done") and f.get("continuation"), 5.0
        )
        [answer] = assistants(agent)
        assert text_of(answer) == "Hello world."
        outcomes = [f.get("outcome") for f in client.transport.responses("req1") if f.get("done")]
        assert outcomes == ["recovering", "completed"]
        assert client.transport.of_type("cf_agent_chat_recovering")
    finally:
        await host.close()


async def test_reconnecting_client_sees_exactly_one_full_message(tmp_path: Path, connect: Any) -> None:
    """#1951: the replayed prefix plus the continuation make one message, never duplicated parts."""
    first = ScriptedModel([LONG], chunk_delay=0.01)
    db = await start_and_crash(tmp_path, first, connect, delta_count(25))
    host = AgentHost(f"sqlite:///{db}", shutdown_timeout=2.0)
    await host.start()
    agent = await host.get_agent(bot(ScriptedModel(["REST."], chunk_delay=0.01)), "r")
    try:
        client = await _connect_raw(agent)
        view = ClientView()
        resuming = await client.transport.wait_for(lambda f: f.get("type") == "cf_agent_stream_resuming")
        await client.send({"type": "cf_agent_stream_resume_ack", "id": resuming["id"]})
        await agent.wait_until_idle()
        await client.transport.wait_for(lambda f: f.get("done") and f.get("outcome") == "completed", 5.0)
        for frame in client.transport.frames:
            view.apply(frame)
        assert [m["role"] for m in view.messages] == ["user", "assistant"]
        assert view.messages[1]["id"] == agent.messages[1]["id"]
        assert text_of(view.messages[1]) == text_of(agent.messages[1])
    finally:
        await host.close()


async def _connect_raw(agent: Any) -> Any:
    from ponder.runtime import Connection
    from tests.think.conftest import Client, FakeTransport

    transport = FakeTransport()
    connection = Connection(f"late-{id(transport)}", transport)
    await agent._accept_connection(connection)
    return Client(agent, connection, transport)


class ClientView:
    """What a stock client ends with: transcripts replace the list; a stream builds (or continues) a message."""

    def __init__(self) -> None:
        from ponder.chat import MessageAccumulator

        self._acc_cls = MessageAccumulator
        self.messages: list[dict[str, Any]] = []
        self.acc: Any = None

    def apply(self, frame: dict[str, Any]) -> None:
        kind = frame.get("type")
        if kind == "cf_agent_chat_messages":
            self.messages = json.loads(json.dumps(frame["messages"]))
        elif kind == "cf_agent_use_chat_response" and frame.get("body") and not frame.get("error"):
            chunk = json.loads(frame["body"])
            if self.acc is None:
                last = self.messages[-1] if self.messages else None
                if frame.get("continuation") and last and last["role"] == "assistant":
                    self.acc = self._acc_cls(message=last, continuation=True)
                else:
                    self.acc = self._acc_cls()
            self.acc.apply(chunk)
            message = self.acc.snapshot()
            for i, m in enumerate(self.messages):
                if m["id"] == message["id"]:
                    self.messages[i] = message
                    break
            else:
                self.messages.append(message)
        elif kind == "cf_agent_use_chat_response" and frame.get("done"):
            self.acc = None
