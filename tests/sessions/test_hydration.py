"""Hydration budget: a wake loads the newest suffix of the path that fits, never fewer than 4 messages."""

from __future__ import annotations

import math

import pytest

from ponder.models import ModelRequest, TextDelta, ui_messages_to_model_messages
from ponder.sessions import Session, SessionEvent
from ponder.testing import ScriptedModel

from .conftest import MakeSession
from .helpers import assistant, conversation, ids, user

MIB = 1024 * 1024


def _big(message_id: str, role: str, size: int) -> dict:
    return {
        "id": message_id,
        "role": role,
        "parts": [{"type": "text", "text": f"{message_id} " + "x" * size}],
    }


async def _forty_mib(session: Session) -> None:
    messages = [
        _big(f"{'u' if i % 2 == 0 else 'a'}{i}", "user" if i % 2 == 0 else "assistant", MIB)
        for i in range(40)
    ]
    await session.append_many(messages)


async def test_small_transcripts_are_not_windowed(make_session: MakeSession) -> None:
    session = await make_session()
    await session.append_many(conversation(50))
    reopened = await make_session()
    assert reopened.hydration.truncated is False
    assert len(reopened.active_messages()) == 100


@pytest.mark.slow
async def test_a_40_mib_history_wakes_windowed_and_the_next_turn_works(make_session: MakeSession) -> None:
    writer = await make_session()
    await _forty_mib(writer)
    events: list[SessionEvent] = []

    session = Session(writer.store, writer.agent_id)  # default budget: 32 MiB
    session.add_listener(events.append)
    await session.open()
    info = session.hydration
    assert info.truncated is True
    assert info.path_length == 40
    assert info.hydrated_bytes <= 32 * MIB
    assert 4 <= info.hydrated_messages < 40
    assert info.total_bytes > 40 * MIB
    window = session.active_messages()
    assert len(window) == info.hydrated_messages
    assert ids(window)[-1] == "a39"
    assert [e.kind for e in events].count("hydration_windowed") == 1
    # The full history stays readable.
    history = await session.get_history()
    assert len(history) == 40 and history[0]["id"] == "u0"

    # The next turn: the model sees the window plus the new user message, and the answer is stored.
    await session.append(user("u40", "and now?"))
    model = ScriptedModel(["fine"])
    view = await session.read_model_view()
    assert view[-1]["id"] == "u40"
    request = ModelRequest(messages=ui_messages_to_model_messages(view))
    text = "".join([e.text async for e in model.stream(request) if isinstance(e, TextDelta)])
    await session.append(assistant("a40", text))
    assert model.requests[0].last_user_text() == "and now?"
    assert ids(session.active_messages())[-2:] == ["u40", "a40"]
    assert session.path_length == 42
    reopened = await make_session()
    assert ids(reopened.active_messages())[-1] == "a40"


async def test_never_fewer_than_four_messages(make_session: MakeSession) -> None:
    writer = await make_session()
    await writer.append_many([_big(f"m{i}", "user", MIB) for i in range(10)])
    session = await make_session(hydration_byte_budget=MIB // 2)
    assert ids(session.active_messages()) == ["m6", "m7", "m8", "m9"]
    assert session.hydration.hydrated_messages == 4


@pytest.mark.parametrize("budget", [0, -1, math.inf])
async def test_a_non_positive_or_infinite_budget_loads_everything(
    make_session: MakeSession, budget: float
) -> None:
    writer = await make_session()
    await writer.append_many([_big(f"m{i}", "user", 1000) for i in range(10)])
    session = await make_session(hydration_byte_budget=budget)
    assert len(session.active_messages()) == 10
    assert session.hydration.truncated is False


async def test_the_window_stays_within_budget_as_messages_are_added(make_session: MakeSession) -> None:
    session = await make_session(hydration_byte_budget=50_000)
    for i in range(30):
        await session.append(_big(f"m{i}", "user", 5_000))
        assert session.hydration.hydrated_bytes <= 50_000
    assert session.hydration.truncated is True
    assert len(session.active_messages()) < 30
    assert session.get("m0") is None  # dropped from memory …
    assert (await session.get_message("m0"))["id"] == "m0"  # … but still stored
    assert len(await session.get_history()) == 30


async def test_model_view_reads_only_the_window(make_session: MakeSession) -> None:
    writer = await make_session()
    await writer.append_many([_big(f"m{i}", "user", 10_000) for i in range(20)])
    session = await make_session(hydration_byte_budget=60_000)
    view = await session.read_model_view()
    assert [m["id"] for m in view] == ids(session.active_messages())
    assert len(view) == 5


async def test_switching_to_a_branch_outside_the_window_hydrates_it(make_session: MakeSession) -> None:
    writer = await make_session()
    await writer.append_many([_big(f"m{i}", "user", 10_000) for i in range(20)])
    await writer.append(assistant("side", "side branch"), "m2")
    session = await make_session(hydration_byte_budget=60_000)
    assert ids(session.active_messages()) == ["m0", "m1", "m2", "side"]
    await session.set_active_leaf("m19")
    assert ids(session.active_messages())[-1] == "m19"
    assert all(m is not None for m in session.active_messages())


async def test_updates_outside_the_window_go_to_the_store(make_session: MakeSession) -> None:
    writer = await make_session()
    await writer.append_many([_big(f"m{i}", "user", 10_000) for i in range(20)])
    session = await make_session(hydration_byte_budget=60_000)
    events: list[str] = []
    session.add_listener(lambda e: events.append(e.kind))
    assert session.get("m0") is None
    await session.upsert(await session.get_message("m0"))  # unchanged: nothing written
    assert "update" not in events
    await session.upsert(user("m0", "rewritten"))
    assert "update" in events
    assert session.get("m0") is None  # still outside the window
    assert (await session.get_message("m0"))["parts"][0]["text"] == "rewritten"
    assert session.hydration.total_bytes < writer.hydration.total_bytes


async def test_an_overlay_reaching_into_the_window_shows_its_summary_first(make_session: MakeSession) -> None:
    writer = await make_session()
    await writer.append_many([_big(f"m{i}", "user", 10_000) for i in range(20)])
    await writer.add_compaction("EARLY PART", "m1", "m16")
    session = await make_session(hydration_byte_budget=60_000)
    window = ids(session.active_messages())
    assert window[0] == "m15"
    view = await session.read_model_view()
    assert view[0]["parts"][0]["text"] == "EARLY PART"
    assert ids(view)[1:] == ["m17", "m18", "m19"]


async def test_delete_inside_a_windowed_path(make_session: MakeSession) -> None:
    writer = await make_session()
    await writer.append_many([_big(f"m{i}", "user", 10_000) for i in range(20)])
    session = await make_session(hydration_byte_budget=60_000)
    await session.delete("m3")
    assert session.parent_of("m4") == "m2"
    assert len(await session.get_history()) == 19
    assert ids(session.active_messages())[-1] == "m19"
