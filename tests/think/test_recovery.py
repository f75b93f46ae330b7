"""Crash recovery of chat turns (in-process crash: the host is closed with no grace, tasks are cancelled and
nothing is flushed; a new host on the same store wakes the agent with the orphaned fiber)."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path
from typing import Any

import pytest

from ponder import AgentHost
from ponder.models import UserMessage
from ponder.testing import ScriptedModel, error, reply, stall, tool_call
from ponder.think import Think, tool
from ponder.think._recovery import STARTED_TOOL_TEXT
from ponder.think._stream_store import KEEP_FINISHED
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


# -- an interrupted regeneration recovers on its own branch --------------------------------------------------


def deltas_of(request_id: str, n: int) -> Any:
    """A ``wait_for`` predicate true once ``n`` text deltas of ``request_id`` were sent."""
    seen: set[int] = set()

    def pred(frame: dict[str, Any]) -> bool:
        if frame.get("id") == request_id and '"text-delta"' in frame.get("body", ""):
            seen.add(frame.get("seq", -1))
        return len(seen) >= n

    return pred


def started_step(request_id: str) -> Any:
    def pred(frame: dict[str, Any]) -> bool:
        return frame.get("id") == request_id and '"start-step"' in frame.get("body", "")

    return pred


async def answer_then_regenerate_and_crash(
    tmp_path: Path, connect: Any, regenerated: Any, until: Any
) -> tuple[Path, dict[str, Any], str]:
    """Answer ``u1``, regenerate it with a model reply ``regenerated``, crash once ``until`` holds.
    Returns the store, the earlier answer and the assistant message id the regeneration streamed."""
    db = tmp_path / "regen.sqlite3"
    host = AgentHost(f"sqlite:///{db}", shutdown_timeout=2.0)
    await host.start()
    model = ScriptedModel(["The first answer.", regenerated], chunk_delay=0.01)
    agent = await host.get_agent(bot(model), "r")
    client = await connect(agent)
    await client.request("req1", [user("hi", "u1")])
    await client.wait_done("req1")
    [old] = assistants(agent)
    await client.request("req2", [user("hi", "u1")], trigger="regenerate-message")
    await client.transport.wait_for(until, 5.0)
    start = next(
        json.loads(f["body"])
        for f in client.transport.responses("req2")
        if f.get("body") and json.loads(f["body"])["type"] == "start"
    )
    await crash(host)
    return db, old, start["messageId"]


async def stored_assistant_ids(host: AgentHost, agent: Bot) -> list[str]:
    rows = await host.store.fetch_all(
        "SELECT id FROM ponder_session_messages WHERE agent_id = ? AND role = 'assistant' ORDER BY seq",
        (agent.id,),
    )
    return [row["id"] for row in rows]


async def test_interrupted_regeneration_continues_on_its_own_branch(tmp_path: Path, connect: Any) -> None:
    db, old, streamed_id = await answer_then_regenerate_and_crash(
        tmp_path, connect, LONG, deltas_of("req2", 25)
    )
    gate = asyncio.Event()

    async def continuation(request: Any) -> str:
        await gate.wait()  # hold the continuation until the test's client has attached
        return "REST."

    host = AgentHost(f"sqlite:///{db}", shutdown_timeout=2.0)
    await host.start()
    agent = await host.get_agent(bot(ScriptedModel([continuation], chunk_delay=0.01)), "r")
    try:
        client = await _connect_raw(agent)
        resuming = await client.transport.wait_for(lambda f: f.get("type") == "cf_agent_stream_resuming")
        assert resuming["id"] == "req2"
        await client.send({"type": "cf_agent_stream_resume_ack", "id": "req2"})
        gate.set()
        await client.transport.wait_for(
            lambda f: f.get("id") == "req2" and f.get("done") and f.get("outcome") == "completed", 5.0
        )
        await agent.wait_until_idle()

        # The continuation streamed into the interrupted message: continuation frames, no new message id.
        live = [f for f in client.transport.responses("req2") if f.get("body") and not f.get("replay")]
        assert live and all(f.get("continuation") is True for f in live)
        assert all("messageId" not in json.loads(f["body"]) for f in live)
        view = ClientView()
        for frame in client.transport.frames:
            view.apply(frame)
        assert [m["id"] for m in view.messages] == ["u1", streamed_id]

        # Stored: the regenerated answer is a sibling of the earlier one under u1, which is untouched.
        [answer] = [m for m in agent.messages if m["role"] == "assistant"]
        assert answer["id"] == streamed_id and [m["id"] for m in agent.messages] == ["u1", streamed_id]
        text = text_of(answer)
        assert text.startswith("w0 w1") and text.endswith("REST.")
        assert LONG.startswith(text[: -len("REST.")].rstrip())
        assert text_of(view.messages[1]) == text
        branches = await agent.get_branches("u1")
        assert [m["id"] for m in branches] == [old["id"], streamed_id] and branches[0] == old
        # Exactly one new assistant message: the earlier answer and the recovered one.
        assert await stored_assistant_ids(host, agent) == [old["id"], streamed_id]
    finally:
        await host.close()


async def test_interrupted_regeneration_with_nothing_streamed_is_retried_on_its_own_branch(
    tmp_path: Path, connect: Any
) -> None:
    db, old, _ = await answer_then_regenerate_and_crash(
        tmp_path, connect, reply(stall(30), "never"), started_step("req2")
    )
    model = ScriptedModel(["The second answer."])
    host, agent = await restart(db, bot(model))
    try:
        assert model.calls == 1
        messages = agent.messages
        assert [m["role"] for m in messages] == ["user", "assistant"] and messages[0]["id"] == "u1"
        new = messages[1]
        assert text_of(new) == "The second answer." and new["id"] != old["id"]
        branches = await agent.get_branches("u1")
        assert [m["id"] for m in branches] == [old["id"], new["id"]] and branches[0] == old
        assert await stored_assistant_ids(host, agent) == [old["id"], new["id"]]
        # The model was asked to answer u1 again, not to continue anything.
        last = model.requests[0].messages[-1]
        assert isinstance(last, UserMessage) and CONTINUE_PROMPT not in str(last)
    finally:
        await host.close()


# -- the end of a turn: the stream is closed, then the reply persisted ---------------------------------------


async def die_at(agent: Bot, method: str) -> asyncio.Event:
    """Make ``agent._recovery.<method>`` run, then hang forever (the process dies there); return an event set
    when it has run."""
    reached = asyncio.Event()
    original = getattr(agent._recovery, method)

    async def run_then_hang(*args: Any) -> None:
        await original(*args)
        reached.set()
        await asyncio.Event().wait()

    setattr(agent._recovery, method, run_then_hang)
    return reached


@pytest.mark.parametrize("kill_after", ["close_stream", "turn_ended"])
async def test_kill_after_the_stream_closed_persists_the_reply_once(tmp_path: Path, kill_after: str) -> None:
    """Killed once the stream is closed (before the reply is stored) or once the reply is stored (before the
    turn's fiber ends): the restart stores the whole reply exactly once and asks the model nothing."""
    db = tmp_path / "end.sqlite3"
    host = AgentHost(f"sqlite:///{db}", shutdown_timeout=2.0)
    await host.start()
    agent = await host.get_agent(bot(ScriptedModel([LONG])), "r")
    reached = await die_at(agent, kill_after)
    task = asyncio.create_task(agent.save_messages("hi"))
    await asyncio.wait_for(reached.wait(), 5.0)
    # The order is the contract: the stream is closed before the reply is stored.
    assert len(await stored_assistant_ids(host, agent)) == (0 if kill_after == "close_stream" else 1)
    await crash(host)
    task.cancel()
    model = ScriptedModel([])
    host, agent = await restart(db, bot(model))
    try:
        assert model.calls == 0  # nothing was re-run or continued
        [answer] = assistants(agent)
        assert text_of(answer) == LONG
        assert await stored_assistant_ids(host, agent) == [answer["id"]]
        rows = await host.store.fetch_all("SELECT status FROM ponder_think_streams", ())
        assert [r["status"] for r in rows] == ["completed"]
        assert await host.store.fetch_all("SELECT id FROM ponder_fibers", ()) == []
    finally:
        await host.close()


async def test_kill_before_an_errored_turns_reply_is_stored_keeps_the_partial_without_continuing(
    tmp_path: Path,
) -> None:
    """A turn that failed mid-text closes its stream as ``error``: a kill before its partial reply is stored
    leaves recovery nothing to continue; it stores the partial the turn would have stored."""
    db = tmp_path / "err.sqlite3"
    host = AgentHost(f"sqlite:///{db}", shutdown_timeout=2.0)
    await host.start()
    agent = await host.get_agent(bot(ScriptedModel([reply("Half an answer", error("model down"))])), "r")
    reached = await die_at(agent, "close_stream")
    task = asyncio.create_task(agent.save_messages("hi"))
    await asyncio.wait_for(reached.wait(), 5.0)
    assert await stored_assistant_ids(host, agent) == []
    await crash(host)
    task.cancel()
    model = ScriptedModel([])
    host, agent = await restart(db, bot(model))
    try:
        assert model.calls == 0
        [answer] = assistants(agent)
        assert text_of(answer) == "Half an answer"
        rows = await host.store.fetch_all("SELECT status FROM ponder_think_streams", ())
        assert [r["status"] for r in rows] == ["error"]
    finally:
        await host.close()


# -- finished stream buffers are swept by one durable schedule per agent ---------------------------------------


class Swept(Bot):
    """Signals each run of the sweep schedule (the test's synchronisation point)."""

    swept: asyncio.Event

    async def _sweep_stream_buffers(self, payload: Any = None, schedule: Any = None) -> None:
        await super()._sweep_stream_buffers(payload, schedule)
        type(self).swept.set()


async def sweep_schedules(host: AgentHost, agent: Bot) -> list[dict[str, Any]]:
    return await host.store.fetch_all(
        "SELECT id, due_at FROM ponder_schedules WHERE agent_id = ? AND callback = '_sweep_stream_buffers'",
        (agent.id,),
    )


async def run_sweep_now(host: AgentHost, agent: Bot, schedule_id: str) -> None:
    """Make the sweep schedule due (as if its time had come) and wait until it ran and its row is settled."""
    type(agent).swept = asyncio.Event()
    await host.store.execute(
        "UPDATE ponder_schedules SET due_at = ? WHERE id = ?", (time.time() - 1, schedule_id)
    )
    host._schedules_changed()
    await asyncio.wait_for(type(agent).swept.wait(), 5.0)
    await agent.wait_until_idle()


async def test_one_sweep_schedule_per_agent_cleans_buffers_without_a_wake(host: AgentHost) -> None:
    cls = type("Swept", (Swept,), {"model": ScriptedModel(default="ok")})
    agent = await host.get_agent(cls, "gc")
    before = time.time()
    for i in range(3):
        await agent.save_messages(f"m{i}")
    # Every turn left a buffer (kept for late resumes); one schedule covers them all, due when the first
    # becomes reclaimable.
    streams = await host.store.fetch_all("SELECT id, completed_at FROM ponder_think_streams", ())
    assert len(streams) == 3
    [armed] = await sweep_schedules(host, agent)
    first = min(row["completed_at"] for row in streams)
    assert before + KEEP_FINISHED <= armed["due_at"] <= first + KEEP_FINISHED + 1

    # Ten minutes pass for two of the buffers; the agent stays live and never wakes again.
    old = [row["id"] for row in streams[:2]]
    await host.store.execute(
        "UPDATE ponder_think_streams SET completed_at = ? WHERE id IN (?, ?)",
        (time.time() - KEEP_FINISHED - 1, *old),
    )
    await run_sweep_now(host, agent, armed["id"])
    left = await host.store.fetch_all("SELECT id FROM ponder_think_streams", ())
    assert [row["id"] for row in left] == [streams[2]["id"]]
    chunks = await host.store.fetch_all("SELECT DISTINCT stream_id FROM ponder_think_stream_chunks", ())
    assert [row["stream_id"] for row in chunks] == [streams[2]["id"]]
    # A buffer remains: the schedule re-armed itself (a new row, still exactly one).
    [rearmed] = await sweep_schedules(host, agent)
    assert rearmed["id"] != armed["id"] and rearmed["due_at"] > time.time()

    # The last one becomes reclaimable: swept, and nothing is left to schedule.
    await host.store.execute(
        "UPDATE ponder_think_streams SET completed_at = ?", (time.time() - KEEP_FINISHED - 1,)
    )
    await run_sweep_now(host, agent, rearmed["id"])
    assert await host.store.fetch_all("SELECT id FROM ponder_think_streams", ()) == []
    assert await host.store.fetch_all("SELECT stream_id FROM ponder_think_stream_chunks", ()) == []
    assert await sweep_schedules(host, agent) == []

    # The next turn arms it again.
    await agent.save_messages("again")
    assert len(await sweep_schedules(host, agent)) == 1


async def test_sweep_arming_is_idempotent_across_restarts(tmp_path: Path) -> None:
    db = tmp_path / "gc.sqlite3"
    cls = type("Swept", (Swept,), {"model": ScriptedModel(default="ok")})
    for _ in range(2):
        host = AgentHost(f"sqlite:///{db}", shutdown_timeout=2.0)
        await host.start()
        agent = await host.get_agent(cls, "gc")
        await agent.save_messages("hi")
        await agent.save_messages("again")
        await host.close()
    host = AgentHost(f"sqlite:///{db}", shutdown_timeout=2.0)
    await host.start()
    try:
        agent = await host.get_agent(cls, "gc")  # a wake with buffers left: still one schedule
        rows = await sweep_schedules(host, agent)
        assert len(rows) == 1
        streams = await host.store.fetch_all("SELECT completed_at FROM ponder_think_streams", ())
        assert len(streams) == 4
        assert rows[0]["due_at"] <= min(r["completed_at"] for r in streams) + KEEP_FINISHED + 1
    finally:
        await host.close()


async def test_kill_between_a_stall_and_its_continuation_still_continues(tmp_path: Path) -> None:
    """A stalled turn hands over to a continuation that is queued in memory; a crash before the continuation's
    own fiber starts must not strand the partial answer: the next start continues it."""
    db = tmp_path / "stall.sqlite3"
    host = AgentHost(f"sqlite:///{db}", shutdown_timeout=2.0)
    await host.start()
    model = ScriptedModel([reply("Hello", stall(10), "never")])
    agent = await host.get_agent(bot(model, chat_stream_stall_timeout=0.2), "r")
    handed_over = asyncio.Event()

    def lost_continuation(*args: Any, **kwargs: Any) -> None:
        handed_over.set()  # the process dies before the queued continuation runs: it is never admitted

    agent._recovery.schedule = lost_continuation  # type: ignore[method-assign]
    result = await agent.save_messages("hi")
    assert result.status == "recovering"
    await asyncio.wait_for(handed_over.wait(), 5.0)
    await crash(host)
    model = ScriptedModel([" world."])
    host, agent = await restart(db, bot(model))
    try:
        [answer] = assistants(agent)
        assert text_of(answer) == "Hello world."
        assert answer["id"] == result.message["id"]  # type: ignore[index]
        assert model.calls == 1
        assert await host.store.fetch_all("SELECT id FROM ponder_fibers", ()) == []
    finally:
        await host.close()
