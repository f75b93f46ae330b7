"""Compaction overlays: a span replaced by one summary at read time; every row stays."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from ponder.models import ModelRequest, TextContent, UserMessage, ui_messages_to_model_messages
from ponder.sessions import (
    SUMMARY_ID_PREFIX,
    CompactionPlan,
    Session,
    SessionEvent,
    create_compact_function,
    summarize_with_model,
)
from ponder.storage import Store
from ponder.testing import ScriptedModel

from .conftest import MakeSession
from .helpers import assistant, conversation, ids, user


def _words(view: list[dict[str, Any]]) -> str:
    return " ".join(p.get("text", "") for m in view for p in m["parts"] if p.get("type") == "text")


async def test_an_overlay_replaces_the_span_for_the_model_and_keeps_every_row(
    make_session: MakeSession, store: Store
) -> None:
    session = await make_session()
    await session.append_many(conversation(6))
    overlay = await session.add_compaction("SUMMARY OF EARLY TALK", "u1", "a3")
    rows = await store.fetch_all("SELECT id FROM ponder_session_messages ORDER BY seq")
    assert len(rows) == 12  # nothing deleted

    view = await session.read_model_view()
    assert ids(view) == ["u0", "a0", f"{SUMMARY_ID_PREFIX}{overlay.id}", "u4", "a4", "u5", "a5"]
    summary = view[2]
    assert summary["role"] == "assistant"
    assert summary["parts"] == [{"type": "text", "text": "SUMMARY OF EARLY TALK"}]
    assert summary["metadata"]["compaction"] == {"id": overlay.id, "fromMessageId": "u1", "toMessageId": "a3"}
    # The next turn's model input contains the summary instead of the span.
    model_input = ui_messages_to_model_messages(view)
    texts = [c.text for m in model_input for c in getattr(m, "content", []) if isinstance(c, TextContent)]
    assert "SUMMARY OF EARLY TALK" in texts
    assert "question number 2" not in texts and "answer number 3" not in texts
    assert "question number 4" in texts

    # The UI and the raw history still hold everything; overlays survive a restart.
    assert len(session.active_messages()) == 12
    assert len(await session.get_history()) == 12
    assert ids(await session.get_history(compacted=True)) == ids(view)
    reopened = await make_session()
    assert ids(await reopened.read_model_view()) == ids(view)


async def test_overlays_apply_per_branch(session: Session) -> None:
    await session.append_many(conversation(4))
    await session.add_compaction("S", "u1", "a2")
    await session.append(assistant("alt", "different"), "u1")
    view = await session.read_model_view()
    assert ids(view) == ["u0", "a0", "u1", "alt"]  # the span is not on this branch
    assert SUMMARY_ID_PREFIX in "".join(ids(await session.read_model_view("a3")))


async def test_the_newest_overlay_at_a_start_wins_and_absorbed_ones_are_ignored(session: Session) -> None:
    await session.append_many(conversation(6))
    await session.add_compaction("first", "u1", "a2")
    await session.add_compaction("inner", "u2", "a2")
    await session.add_compaction("grown", "u1", "a4")
    assert (
        _words(await session.read_model_view())
        == "question number 0 answer number 0 grown question number 5 answer number 5"
    )


async def test_invalid_spans_are_rejected(session: Session) -> None:
    await session.append_many(conversation(3))
    await session.append(assistant("alt"), "u0")
    with pytest.raises(KeyError):
        await session.add_compaction("s", "u0", "nope")
    with pytest.raises(ValueError):
        await session.add_compaction("s", "a2", "u1")  # reversed
    with pytest.raises(ValueError):
        await session.add_compaction("s", "a1", "alt")  # not on the same path
    assert session.compactions == []


async def test_deleting_an_end_drops_the_overlay(session: Session) -> None:
    await session.append_many(conversation(3))
    await session.add_compaction("s", "u1", "a1")
    await session.delete("a1")
    assert session.compactions == []


async def test_token_estimate_subtracts_spans_and_adds_summaries(session: Session) -> None:
    await session.append_many([user(f"u{i}", "word " * 400) for i in range(10)])
    before = session.token_estimate()
    await session.add_compaction("short", "u1", "u7")
    after = session.token_estimate()
    assert after < before / 3


# -- the stock compact function ------------------------------------------------------------------------


def _capture() -> tuple[list[str], Any]:
    prompts: list[str] = []

    async def summarize(prompt: str) -> str:
        prompts.append(prompt)
        return f"summary #{len(prompts)}"

    return prompts, summarize


async def test_compact_function_keeps_head_and_tail() -> None:
    prompts, summarize = _capture()
    compact = create_compact_function(summarize, keep_recent_tokens=30, protect_head=2)
    view = conversation(6)  # 12 messages, ~8 tokens each
    plan = await compact(view)
    assert isinstance(plan, CompactionPlan)
    assert plan.from_message_id == "u1"
    assert plan.summary == "summary #1"
    tail = ids(view)[ids(view).index(plan.to_message_id) + 1 :]
    assert 2 <= len(tail) <= 4
    assert "question number 1" in prompts[0] and "answer number 0" not in prompts[0]
    assert "## Topic" in prompts[0] and "## Open Items" in prompts[0]


async def test_compact_function_returns_none_when_nothing_fits_between() -> None:
    _, summarize = _capture()
    compact = create_compact_function(summarize, keep_recent_tokens=10_000)
    assert await compact(conversation(3)) is None


def _tool_call(message_id: str, call_id: str, state: str) -> dict[str, Any]:
    part: dict[str, Any] = {"type": "tool-search", "toolCallId": call_id, "state": state, "input": {"q": 1}}
    if state == "output-available":
        part["output"] = "result"
    return {"id": message_id, "role": "assistant", "parts": [part]}


async def test_compact_function_never_splits_a_tool_call_from_its_result() -> None:
    _, summarize = _capture()
    compact = create_compact_function(summarize, keep_recent_tokens=1, protect_head=1, min_tail_messages=1)
    view = [
        user("u0"),
        user("u1"),
        assistant("a1"),
        _tool_call("call-msg", "c9", "input-available"),  # the call …
        _tool_call("result-msg", "c9", "output-available"),  # … and its result, stored separately
    ]
    plan = await compact(view)
    assert plan is not None
    assert plan.to_message_id == "a1"  # the boundary moved before the call, keeping the pair together


async def test_compact_function_does_not_hide_an_unsettled_call() -> None:
    _, summarize = _capture()
    compact = create_compact_function(summarize, keep_recent_tokens=1, protect_head=1, min_tail_messages=1)
    view = [user("u0"), user("u1"), _tool_call("waiting", "c1", "approval-requested"), user("u2")]
    plan = await compact(view)
    assert plan is not None and plan.to_message_id == "u1"


async def test_compaction_is_iterative_and_one_overlay_grows(session: Session) -> None:
    prompts, summarize = _capture()
    session.on_compaction(create_compact_function(summarize, keep_recent_tokens=20, protect_head=2))
    await session.append_many(conversation(6))
    first = await session.compact()
    assert first is not None and first.from_message_id == "u1"
    await session.append_many(conversation(4, prefix="late-"))
    second = await session.compact()
    assert second is not None
    assert second.from_message_id == "u1"  # extends from the earliest start
    assert "summary #1" in prompts[1]  # the previous summary is fed back
    view = await session.read_model_view()
    summaries = [m for m in view if m["id"].startswith(SUMMARY_ID_PREFIX)]
    assert [s["parts"][0]["text"] for s in summaries] == ["summary #2"]
    assert len(await session.get_history()) == 20


async def test_summarize_with_a_model_client(session: Session) -> None:
    model = ScriptedModel(["## Topic\nWeather chat"])
    session.on_compaction(
        create_compact_function(summarize_with_model(model), keep_recent_tokens=20, protect_head=1)
    )
    await session.append_many(conversation(5))
    overlay = await session.compact()
    assert overlay is not None and overlay.summary == "## Topic\nWeather chat"
    request: ModelRequest = model.requests[0]
    assert isinstance(request.messages[0], UserMessage)
    assert "question number 1" in request.messages[0].text


async def test_compact_after_runs_in_the_background_and_reports_status(session: Session) -> None:
    _, summarize = _capture()
    frames: list[dict[str, Any]] = []
    events: list[SessionEvent] = []
    session.add_listener(events.append)
    session.add_listener(lambda e: frames.append(session.status_frame()) if e.kind == "status" else None)
    session.on_compaction(
        create_compact_function(summarize, keep_recent_tokens=40, protect_head=1)
    ).compact_after(120)
    await session.append_many(conversation(3))
    await session.wait_idle()
    assert session.compactions == []  # under the threshold
    await session.append_many(conversation(8, prefix="more-"))
    await session.wait_idle()
    assert len(session.compactions) == 1
    assert "compact" in [e.kind for e in events]
    phases = [f["phase"] for f in frames]
    assert "compacting" in phases and phases[-1] == "idle"
    assert frames[-1]["type"] == "cf_agent_session"
    assert frames[-1]["tokenThreshold"] == 120
    assert frames[-1]["tokenEstimate"] == session.token_estimate()


async def test_automatic_compaction_failures_are_reported_not_raised(session: Session) -> None:
    async def broken(prompt: str) -> str:
        raise RuntimeError("model down")

    errors: list[BaseException] = []
    events: list[SessionEvent] = []
    session.add_listener(events.append)
    session.on_compaction(create_compact_function(broken, keep_recent_tokens=10, protect_head=1))
    session.compact_after(20).on_compaction_error(errors.append)
    await session.append_many(conversation(6))
    await session.wait_idle()
    assert [str(e) for e in errors] == ["model down"]
    failure = [e for e in events if e.kind == "compaction_error"]
    assert failure and failure[0].data["error"] == "model down"
    assert session.error_frame(errors[0]) == {"type": "cf_agent_session_error", "error": "model down"}
    assert session.status()["phase"] == "idle"
    with pytest.raises(RuntimeError):
        await session.compact()  # an explicit compaction raises


async def test_a_compaction_that_finds_nothing_is_not_retried_on_every_write(session: Session) -> None:
    calls = 0

    async def nothing(view: list[dict[str, Any]]) -> None:
        nonlocal calls
        calls += 1
        await asyncio.sleep(0)
        return None

    session.on_compaction(nothing).compact_after(1)
    await session.append(user("u1"))
    await session.wait_idle()
    await session.upsert(user("u1", "edited"))
    await session.wait_idle()
    assert calls == 1
    await session.append(user("u2"))
    await session.wait_idle()
    assert calls == 2


async def test_compact_after_needs_a_positive_threshold(session: Session) -> None:
    with pytest.raises(ValueError):
        session.compact_after(0)
    assert await session.compact() is None  # no compaction function configured


async def test_clear_cancels_a_running_compaction(session: Session) -> None:
    started = asyncio.Event()

    async def slow(prompt: str) -> str:
        started.set()
        await asyncio.sleep(30)
        return "never"

    session.on_compaction(create_compact_function(slow, keep_recent_tokens=10, protect_head=1)).compact_after(
        20
    )
    await session.append_many(conversation(6))
    await asyncio.wait_for(started.wait(), 5)
    assert session.status()["phase"] == "compacting"
    await asyncio.wait_for(session.clear(), 5)
    assert session.status() == {"phase": "idle", "tokenEstimate": 0, "tokenThreshold": 20}
    assert session.compactions == []
