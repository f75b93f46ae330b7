"""Sub-agent streaming: a parent ``chat()``s a child (``self.sub_agent(...)``) with callbacks, and cancels it."""

from __future__ import annotations

import asyncio
from typing import Any

from ponder import AgentHost
from ponder.testing import ScriptedModel, error, reply, stall
from ponder.think import ChatResult, Think

from .conftest import FakeTransport


class Helper(Think):
    model: Any = None

    def get_model(self) -> Any:
        return type(self).model


class Parent(Think):
    def get_model(self) -> Any:
        return ScriptedModel(default="parent")


class Recorder:
    def __init__(self) -> None:
        self.calls: list[str] = []
        self.started: dict[str, Any] | None = None
        self.events: list[dict[str, Any]] = []
        self.done: ChatResult | None = None
        self.error: str | None = None
        self.has_started = asyncio.Event()
        self.has_event = asyncio.Event()

    def on_start(self, info: dict[str, Any]) -> None:
        self.calls.append("start")
        self.started = info
        self.has_started.set()

    def on_event(self, chunk: dict[str, Any]) -> None:
        if not self.calls or self.calls[-1] != "event":
            self.calls.append("event")
        self.events.append(chunk)
        self.has_event.set()

    async def on_done(self, result: ChatResult) -> None:
        self.calls.append("done")
        self.done = result

    def on_error(self, text: str) -> None:
        self.calls.append("error")
        self.error = text

    def on_interrupted(self) -> None:
        self.calls.append("interrupted")


def helper(model: Any, **attrs: Any) -> type[Helper]:
    return type("Helper", (Helper,), {"model": model, **attrs})


async def test_parent_streams_a_child_turn(host: AgentHost) -> None:
    parent = await host.get_agent(Parent, "p")
    child_cls = helper(ScriptedModel(["Child says hi."]))
    child = await parent.sub_agent(child_cls, "c")
    transport = FakeTransport()
    from ponder.runtime import Connection

    await child._accept_connection(Connection("watch", transport))
    recorder = Recorder()
    result = await child.chat("hello child", recorder)
    assert recorder.calls == ["start", "event", "done"]
    assert recorder.started is not None and recorder.started["request_id"] == result.request_id
    text = "".join(c.get("delta", "") for c in recorder.events if c["type"] == "text-delta")
    assert text == "Child says hi."
    assert recorder.done is result and result.status == "completed"
    assert [m["role"] for m in child.messages] == ["user", "assistant"]
    assert parent.messages == []  # the child has its own storage
    # the child's own clients watched the turn too
    assert transport.responses(result.request_id)


async def test_child_error_goes_to_on_error(host: AgentHost) -> None:
    parent = await host.get_agent(Parent, "p")
    child = await parent.sub_agent(helper(ScriptedModel([error("child model down")])), "c")
    recorder = Recorder()
    result = await child.chat("hi", recorder)
    assert result.status == "error"
    assert recorder.calls[0] == "start" and recorder.calls[-1] == "error"
    assert recorder.error is not None and "child model down" in recorder.error


async def test_cancel_a_running_child_chat(host: AgentHost) -> None:
    parent = await host.get_agent(Parent, "p")
    child = await parent.sub_agent(helper(ScriptedModel(default="word " * 500, chunk_delay=0.01)), "c")
    recorder = Recorder()
    task = asyncio.create_task(child.chat("long", recorder))
    await recorder.has_started.wait()
    await asyncio.wait_for(recorder.has_event.wait(), 5)
    assert recorder.started is not None
    assert child.cancel_chat(recorder.started["request_id"]) is True
    result = await task
    assert result.status == "aborted"
    assert recorder.calls[-1] == "done"
    assert child.cancel_chat(recorder.started["request_id"]) is False  # nothing left to cancel


async def test_cancel_a_queued_child_chat_skips_it(host: AgentHost) -> None:
    gate = asyncio.Event()

    async def slow(request: Any) -> str:
        await gate.wait()
        return "first"

    parent = await host.get_agent(Parent, "p")
    child = await parent.sub_agent(helper(ScriptedModel([slow], default="second")), "c")
    first = asyncio.create_task(child.chat("one"))
    await asyncio.sleep(0.05)
    recorder = Recorder()
    second = asyncio.create_task(child.chat("two", recorder))
    await recorder.has_started.wait()
    await asyncio.sleep(0.01)
    assert recorder.started is not None and child.cancel_chat(recorder.started["request_id"])
    gate.set()
    assert (await first).status == "completed"
    assert (await second).status == "skipped"


async def test_cancelling_the_caller_aborts_the_child_turn(host: AgentHost) -> None:
    parent = await host.get_agent(Parent, "p")
    child = await parent.sub_agent(helper(ScriptedModel(default="word " * 500, chunk_delay=0.01)), "c")
    recorder = Recorder()
    task = asyncio.create_task(child.chat("long", recorder))
    await asyncio.wait_for(recorder.has_event.wait(), 5)
    task.cancel()
    try:
        await task
    except asyncio.CancelledError:
        pass
    await child.wait_until_idle()
    assert child._turn_tasks == {}


async def test_a_tool_of_the_parent_chats_with_its_child(host: AgentHost) -> None:
    from ponder import tool
    from ponder.testing import tool_call

    child_cls = helper(ScriptedModel(["research result"]))

    @tool
    async def research(ctx: Any, topic: str) -> str:
        """Ask the research helper."""
        child = await ctx.agent.sub_agent(child_cls, "researcher")
        chunks: list[dict[str, Any]] = []
        result = await child.chat(topic, chunks.append)
        return result.message["parts"][-1]["text"] if result.message else "nothing"

    class Boss(Think):
        def get_model(self) -> Any:
            return type(self).model

        def get_tools(self) -> Any:
            return [research]

    cls = type(
        "Boss", (Boss,), {"model": ScriptedModel([tool_call("research", {"topic": "tides"}), "Done."])}
    )
    boss = await host.get_agent(cls, "b")
    result = await boss.save_messages("look it up")
    assert result.status == "completed"
    tool_part = next(p for p in result.message["parts"] if p["type"] == "tool-research")  # type: ignore[index]
    assert tool_part["output"] == "research result"


async def test_child_stall_interrupts_the_parent_call_and_the_child_recovers(host: AgentHost) -> None:
    parent = await host.get_agent(Parent, "p")
    model = ScriptedModel([reply("The tide", stall(10), "never"), " turns at six."])
    child = await parent.sub_agent(helper(model, chat_stream_stall_timeout=0.2), "c")
    transport = FakeTransport()
    from ponder.runtime import Connection

    await child._accept_connection(Connection("watch", transport))
    recorder = Recorder()
    result = await child.chat("when is the tide?", recorder)
    # The parent is told the call was interrupted, not that it finished or failed.
    assert recorder.calls == ["start", "event", "interrupted"]
    assert recorder.done is None and recorder.error is None
    assert result.status == "recovering" and result.message is not None
    await child.wait_until_idle()
    # The recovered answer lands in the child's transcript, in the same message.
    assert [m["role"] for m in child.messages] == ["user", "assistant"]
    answer = child.messages[-1]
    assert answer["id"] == result.message["id"]
    assert (
        "".join(p.get("text", "") for p in answer["parts"] if p["type"] == "text") == "The tide turns at six."
    )
    assert parent.messages == []
    # The child's own clients saw the turn end as recovering, then the continuation complete.
    outcomes = [f.get("outcome") for f in transport.responses(result.request_id) if f.get("done")]
    assert outcomes == ["recovering", "completed"]
