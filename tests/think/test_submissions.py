"""Durable submissions: accept before acknowledging, idempotency, FIFO drain, cancel, recovery."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path
from typing import Any

import pytest

from ponder import AgentHost
from ponder.testing import ScriptedModel, error, reply, stall
from ponder.think import SubmissionConflictError, SubmissionInspection, Think

from .conftest import user


class Submitter(Think):
    model: Any = None

    def get_model(self) -> Any:
        return type(self).model


def make(model: Any, **attrs: Any) -> type[Submitter]:
    return type("Submitter", (Submitter,), {"model": model, **attrs})


def texts(agent: Any) -> list[tuple[str, str]]:
    return [
        (m["role"], "".join(p.get("text", "") for p in m["parts"] if p["type"] == "text"))
        for m in agent.messages
    ]


async def test_accept_then_drain_completes(host: AgentHost) -> None:
    statuses: list[tuple[str, str]] = []

    class Hooked(Submitter):
        async def on_submission_status(self, s: SubmissionInspection) -> None:
            statuses.append((s.submission_id, s.status))

    cls = type("Hooked", (Hooked,), {"model": ScriptedModel(["Hello."])})
    agent = await host.get_agent(cls, "a")
    sub = await agent.submit_messages("hi", metadata={"source": "test"})
    assert sub.accepted is True and sub.status == "pending"
    assert statuses[0] == (sub.submission_id, "pending")  # the hook was awaited before returning
    stored = await agent.inspect_submission(sub.submission_id)
    assert stored is not None and stored.metadata == {"source": "test"}
    done = await agent.wait_for_submission(sub.submission_id, timeout=5)
    assert done is not None and done.status == "completed"
    assert done.messages_applied and done.message_id == agent.messages[-1]["id"]
    assert done.started_at is not None and done.completed_at is not None
    assert [s for _, s in statuses] == ["pending", "running", "completed"]
    assert texts(agent) == [("user", "hi"), ("assistant", "Hello.")]


async def test_a_stalled_submission_stays_running_until_its_recovery_finishes_it(host: AgentHost) -> None:
    statuses: list[str] = []

    class Hooked(Submitter):
        async def on_submission_status(self, s: SubmissionInspection) -> None:
            statuses.append(s.status)

    model = ScriptedModel([reply("Hello", stall(10), "never"), " world."])
    cls = type("Hooked", (Hooked,), {"model": model, "chat_stream_stall_timeout": 0.2})
    agent = await host.get_agent(cls, "a")
    sub = await agent.submit_messages("hi")
    done = await agent.wait_for_submission(sub.submission_id, timeout=10)
    # Not finished by the stalled attempt (its status "recovering" is not a submission status): the
    # continuation that completed the answer finished the submission, with the answer's id.
    assert done is not None and done.status == "completed", done
    assert texts(agent) == [("user", "hi"), ("assistant", "Hello world.")]
    assert done.message_id == agent.messages[-1]["id"]
    assert statuses == ["pending", "running", "completed"]


async def test_two_hundred_concurrent_same_key(host: AgentHost) -> None:
    model = ScriptedModel(default="ok")
    agent = await host.get_agent(make(model), "a")
    results = await asyncio.gather(
        *(agent.submit_messages(f"hello {i}", idempotency_key="k1") for i in range(200))
    )
    assert sum(1 for r in results if r.accepted) == 1
    assert len({r.submission_id for r in results}) == 1
    await agent.wait_for_submission(results[0].submission_id, timeout=5)
    await agent.wait_until_idle()
    assert model.calls == 1
    assert [role for role, _ in texts(agent)] == ["user", "assistant"]
    assert len(await agent.list_submissions()) == 1


async def test_resubmit_same_id_and_key_sequentially(host: AgentHost) -> None:
    agent = await host.get_agent(make(ScriptedModel(default="ok")), "a")
    first = await agent.submit_messages("one", submission_id="s1", idempotency_key="k")
    again = await agent.submit_messages("one", submission_id="s1", idempotency_key="k")
    by_key = await agent.submit_messages("other text", idempotency_key="k")
    by_id = await agent.submit_messages("other text", submission_id="s1")
    assert first.accepted and not again.accepted and not by_key.accepted and not by_id.accepted
    assert {again.submission_id, by_key.submission_id, by_id.submission_id} == {"s1"}
    await agent.wait_for_submission("s1", timeout=5)
    assert [r for r, _ in texts(agent)] == ["user", "assistant"]


async def test_conflicting_id_and_key(host: AgentHost) -> None:
    agent = await host.get_agent(make(ScriptedModel(default="ok")), "a")
    await agent.submit_messages("one", submission_id="s1", idempotency_key="k1")
    await agent.submit_messages("two", submission_id="s2", idempotency_key="k2")
    with pytest.raises(SubmissionConflictError, match="different submissions"):
        await agent.submit_messages("x", submission_id="s2", idempotency_key="k1")
    with pytest.raises(SubmissionConflictError):
        await agent.submit_messages("x", submission_id="s3", idempotency_key="k1")
    with pytest.raises(SubmissionConflictError):
        await agent.submit_messages("x", submission_id="s1", idempotency_key="k9")
    assert await agent.inspect_submission("s3") is None


@pytest.mark.parametrize("bad", ["", [], [{"role": "user"}], [{"id": "x", "role": "bot", "parts": []}], 5])
async def test_bad_input_stores_nothing(host: AgentHost, bad: Any) -> None:
    agent = await host.get_agent(make(ScriptedModel(default="ok")), "a")
    with pytest.raises(ValueError):
        await agent.submit_messages(bad)
    assert await agent.list_submissions() == []


async def test_fifo_and_messages_applied_only_at_turn_start(host: AgentHost) -> None:
    seen: list[list[str]] = []

    def answer(request: Any) -> str:
        seen.append(
            [p.content for m in request.messages for p in getattr(m, "parts", []) if hasattr(p, "content")]
        )
        return f"answer {len(seen)}"

    agent = await host.get_agent(make(ScriptedModel(default=answer, chunk_delay=0.01)), "a")
    subs = [await agent.submit_messages(f"q{i}") for i in range(3)]
    for sub in subs:
        await agent.wait_for_submission(sub.submission_id, timeout=5)
    assert texts(agent) == [
        ("user", "q0"),
        ("assistant", "answer 1"),
        ("user", "q1"),
        ("assistant", "answer 2"),
        ("user", "q2"),
        ("assistant", "answer 3"),
    ]
    listed = await agent.list_submissions()
    assert [s.submission_id for s in listed] == [s.submission_id for s in subs]
    assert all(s.status == "completed" for s in listed)
    assert [s.submission_id for s in await agent.list_submissions(status="completed", limit=2)] == [
        subs[0].submission_id,
        subs[1].submission_id,
    ]
    with pytest.raises(ValueError):
        await agent.list_submissions(status="nope")


async def test_cancel_queued_leaves_no_messages(host: AgentHost) -> None:
    gate = asyncio.Event()

    async def slow(request: Any) -> str:
        await gate.wait()
        return "first done"

    model = ScriptedModel([slow], default="later")
    agent = await host.get_agent(make(model), "a")
    first = await agent.submit_messages("first")
    queued = [await agent.submit_messages(f"queued {i}") for i in range(5)]
    for _ in range(50):
        if (await agent.inspect_submission(first.submission_id)).status == "running":  # type: ignore[union-attr]
            break
        await asyncio.sleep(0.01)
    outcomes = [await agent.cancel_submission(s.submission_id, "no longer needed") for s in queued]
    assert all(o.outcome == "cancelled" and o.previous_status == "pending" for o in outcomes)
    assert all(not o.messages_applied for o in outcomes)
    gate.set()
    await agent.wait_for_submission(first.submission_id, timeout=5)
    await agent.wait_until_idle()
    assert texts(agent) == [("user", "first"), ("assistant", "first done")]
    for s in queued:
        record = await agent.inspect_submission(s.submission_id)
        assert record is not None and record.status == "aborted" and record.error == "no longer needed"
    again = await agent.cancel_submission(queued[0].submission_id)
    assert again.outcome == "already_terminal"
    assert (await agent.cancel_submission("missing")).outcome == "not_found"


async def test_cancel_claimed_but_not_started_applies_nothing(host: AgentHost) -> None:
    """A submission claimed by the drainer but still waiting behind another turn in the queue."""
    gate = asyncio.Event()

    async def slow(request: Any) -> str:
        await gate.wait()
        return "programmatic"

    agent = await host.get_agent(make(ScriptedModel([slow], default="sub")), "a")
    blocker = asyncio.create_task(agent.save_messages("block"))
    await asyncio.sleep(0.05)
    sub = await agent.submit_messages("queued behind")
    for _ in range(50):
        if (await agent.inspect_submission(sub.submission_id)).status == "running":  # type: ignore[union-attr]
            break
        await asyncio.sleep(0.01)
    outcome = await agent.cancel_submission(sub.submission_id)
    assert outcome.previous_status == "running" and not outcome.messages_applied
    gate.set()
    await blocker
    await agent.wait_until_idle()
    assert texts(agent) == [("user", "block"), ("assistant", "programmatic")]
    record = await agent.inspect_submission(sub.submission_id)
    assert record is not None and record.status == "aborted"


async def test_cancel_running_aborts_and_is_not_overwritten(host: AgentHost) -> None:
    agent = await host.get_agent(make(ScriptedModel(default="word " * 200, chunk_delay=0.01)), "a")
    sub = await agent.submit_messages("long")
    for _ in range(100):
        record = await agent.inspect_submission(sub.submission_id)
        if record is not None and record.messages_applied:
            break
        await asyncio.sleep(0.01)
    await asyncio.sleep(0.05)
    outcome = await agent.cancel_submission(sub.submission_id, "stop")
    assert (
        outcome.outcome == "cancelled" and outcome.previous_status == "running" and outcome.messages_applied
    )
    await agent.wait_until_idle()
    record = await agent.inspect_submission(sub.submission_id)
    assert record is not None and record.status == "aborted" and record.error == "stop"


async def test_error_and_skip_statuses(host: AgentHost) -> None:
    agent = await host.get_agent(make(ScriptedModel([error("provider down")], default="ok")), "a")
    failed = await agent.submit_messages("x")
    done = await agent.wait_for_submission(failed.submission_id, timeout=5)
    assert done is not None and done.status == "error" and "provider down" in (done.error or "")

    gate = asyncio.Event()

    async def slow(request: Any) -> str:
        await gate.wait()
        return "never seen"

    agent2 = await host.get_agent(make(ScriptedModel([slow], default="ok")), "b")
    blocker = asyncio.create_task(agent2.save_messages("block"))
    await asyncio.sleep(0.05)
    sub = await agent2.submit_messages("after reset")
    for _ in range(50):
        if (await agent2.inspect_submission(sub.submission_id)).status == "running":  # type: ignore[union-attr]
            break
        await asyncio.sleep(0.01)
    await agent2.clear_messages()
    gate.set()
    await blocker
    record = await agent2.wait_for_submission(sub.submission_id, timeout=5)
    assert record is not None and record.status == "skipped" and "skipped" in (record.error or "")
    assert agent2.messages == []


async def test_submit_allowed_inside_a_turn_blocking_calls_raise(host: AgentHost) -> None:
    from ponder import tool

    outcomes: dict[str, Any] = {}

    @tool
    async def enqueue(ctx: Any) -> str:
        """Queue a follow-up."""
        agent = ctx.agent
        try:
            await agent.save_messages("nested")
        except RuntimeError as exc:
            outcomes["save"] = str(exc)
        try:
            await agent.run_turn("nested", mode="stream")
        except RuntimeError as exc:
            outcomes["stream"] = str(exc)
        sub = await agent.run_turn("follow-up", mode="submit")
        outcomes["sub"] = sub.submission_id
        return "queued"

    from ponder.testing import tool_call

    cls = make(ScriptedModel([tool_call("enqueue", {}), "Queued it.", "Follow-up answer."]))
    cls.get_tools = lambda self: [enqueue]  # type: ignore[method-assign]
    agent = await host.get_agent(cls, "a")
    await agent.save_messages("go")
    assert "add_messages" in outcomes["save"] and "stream" in outcomes
    done = await agent.wait_for_submission(outcomes["sub"], timeout=5)
    assert done is not None and done.status == "completed"
    assert texts(agent)[-2:] == [("user", "follow-up"), ("assistant", "Follow-up answer.")]


async def test_delete_rules(host: AgentHost) -> None:
    agent = await host.get_agent(make(ScriptedModel(default="ok")), "a")
    sub = await agent.submit_messages("x")
    await agent.wait_for_submission(sub.submission_id, timeout=5)
    assert await agent.delete_submission(sub.submission_id) is True
    assert await agent.inspect_submission(sub.submission_id) is None
    for i in range(3):
        s = await agent.submit_messages(f"y{i}")
        await agent.wait_for_submission(s.submission_id, timeout=5)
    assert await agent.delete_submissions(status=["running", "completed"], limit=2) == 2
    assert len(await agent.list_submissions()) == 1


# -- restart -------------------------------------------------------------------------------------------


async def _row(host: AgentHost, submission_id: str) -> dict[str, Any]:
    row = await host.store.fetch_one(
        "SELECT * FROM ponder_think_submissions WHERE submission_id = ?", (submission_id,)
    )
    assert row is not None
    return row


async def test_pending_rows_drain_after_restart_without_a_client(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'r.sqlite3'}"
    cls = make(ScriptedModel(default="after restart"))
    first = AgentHost(url, agents=[cls], shutdown_timeout=0.5)
    await first.start()
    agent = await first.get_agent(cls, "a")
    agent._kick_drain = lambda: None  # type: ignore[method-assign]  # simulate dying before the drain ran
    sub = await agent.submit_messages("hello")
    first._closing = True  # keep the schedule row: the process "dies" here
    await first.store.close()

    second = AgentHost(url, agents=[cls], shutdown_timeout=2.0)
    await second.start()  # nothing asks for the agent: the durable schedule wakes it
    try:
        for _ in range(200):
            row = await _row(second, sub.submission_id)
            if row["status"] == "completed":
                break
            await asyncio.sleep(0.02)
        assert row["status"] == "completed"
        agent2 = await second.get_agent(cls, "a")
        assert texts(agent2) == [("user", "hello"), ("assistant", "after restart")]
    finally:
        await second.close()


async def test_stale_running_requeued_or_errored_on_start(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'r.sqlite3'}"
    cls = make(ScriptedModel(default="replayed"), submission_recovery_stale=0.05)
    host = AgentHost(url, agents=[cls], shutdown_timeout=2.0)
    await host.start()
    agent = await host.get_agent(cls, "a")
    await agent.add_messages(user("already applied", "m-applied"))
    now = time.time()
    for sid, message_id, applied in (("unapplied", "m-new", None), ("applied", "m-applied", now)):
        await host.store.execute(
            "INSERT INTO ponder_think_submissions (agent_id, submission_id, idempotency_key, request_id, status,"
            " messages, seq, created_at, started_at, messages_applied_at)"
            " VALUES (?, ?, NULL, ?, 'running', ?, ?, ?, ?, ?)",
            (
                agent.id,
                sid,
                sid,
                json.dumps([user("text of " + sid, message_id)]),
                time.time_ns(),
                now - 10,
                now - 10,
                applied,
            ),
        )
    await host.close()

    host2 = AgentHost(url, agents=[cls], shutdown_timeout=2.0)
    await host2.start()
    try:
        agent2 = await host2.get_agent(cls, "a")
        done = await agent2.wait_for_submission("unapplied", timeout=5)
        assert done is not None and done.status == "completed"
        errored = await agent2.inspect_submission("applied")
        assert errored is not None and errored.status == "error" and "interrupted" in (errored.error or "")
        assert texts(agent2) == [
            ("user", "already applied"),
            ("user", "text of unapplied"),
            ("assistant", "replayed"),
        ]
    finally:
        await host2.close()


async def _interrupted_applied(tmp_path: Path, cls: type[Submitter]) -> AgentHost:
    """A store holding a running submission whose messages were applied and whose turn fiber is orphaned."""
    url = f"sqlite:///{tmp_path / 'r.sqlite3'}"
    host = AgentHost(url, agents=[cls], shutdown_timeout=2.0)
    await host.start()
    agent = await host.get_agent(cls, "a")
    await agent.add_messages(user("applied", "m1"))
    now = time.time()
    await host.store.execute(
        "INSERT INTO ponder_think_submissions (agent_id, submission_id, request_id, status, messages, seq,"
        " created_at, started_at, messages_applied_at) VALUES (?, 's', 'req-s', 'running', ?, 1, ?, ?, ?)",
        (agent.id, json.dumps([user("applied", "m1")]), now, now, now),
    )
    await host.store.execute(
        "INSERT INTO ponder_fibers (id, agent_id, name, snapshot, created_at) VALUES ('f1', ?, ?, NULL, ?)",
        (agent.id, "ponder:chat-turn:req-s", now),
    )
    await host.close()
    return AgentHost(url, agents=[cls], shutdown_timeout=2.0)


async def test_applied_running_without_recovery_errors_after_the_window(tmp_path: Path) -> None:
    class NoRecovery(Submitter):
        async def on_fiber_recovered(self, ctx: Any) -> None:
            return None  # drop the interrupted turn: nothing will finish the submission

    cls = type(
        "NoRecovery", (NoRecovery,), {"model": ScriptedModel(default="x"), "submission_recovery_stale": 0.3}
    )
    host2 = await _interrupted_applied(tmp_path, cls)
    await host2.start()
    try:
        agent2 = await host2.get_agent(cls, "a")
        record = await agent2.inspect_submission("s")
        assert record is not None and record.status == "running"  # left to chat recovery for now
        done = await agent2.wait_for_submission("s", timeout=5)
        assert done is not None and done.status == "error" and "interrupted" in (done.error or "")
        assert [r for r, _ in texts(agent2)] == ["user"]  # never replayed
    finally:
        await host2.close()


async def test_applied_running_completed_by_chat_recovery(tmp_path: Path) -> None:
    cls = make(ScriptedModel(default="recovered answer"), submission_recovery_stale=30.0)
    host2 = await _interrupted_applied(tmp_path, cls)
    await host2.start()
    try:
        agent2 = await host2.get_agent(cls, "a")
        done = await agent2.wait_for_submission("s", timeout=5)
        assert done is not None and done.status == "completed"
        assert texts(agent2) == [("user", "applied"), ("assistant", "recovered answer")]
    finally:
        await host2.close()
