"""Tree rules: append (idempotent, default parent), upsert, leaves, history, branches, switching, delete, clear."""

from __future__ import annotations

import json

import pytest

from ponder.sessions import Session
from ponder.storage import Store

from .conftest import MakeSession
from .helpers import assistant, conversation, ids, user


async def test_append_chains_under_the_active_leaf(session: Session) -> None:
    assert await session.append(user("u1"))
    assert await session.append(assistant("a1"))
    assert session.parent_of("u1") is None
    assert session.parent_of("a1") == "u1"
    assert ids(session.active_messages()) == ["u1", "a1"]
    assert session.active_leaf_id == session.latest_leaf_id == "a1"


async def test_append_is_idempotent_by_id(session: Session, store: Store) -> None:
    await session.append(user("u1", "first"))
    assert await session.append(user("u1", "changed")) is False
    assert (await session.get_message("u1"))["parts"][0]["text"] == "first"
    rows = await store.fetch_all("SELECT id FROM ponder_session_messages")
    assert [r["id"] for r in rows] == ["u1"]


async def test_parent_none_starts_a_new_root(session: Session) -> None:
    await session.append_many(conversation(1))
    await session.append(user("r2"), None)
    assert session.parent_of("r2") is None
    assert ids(session.active_messages()) == ["r2"]
    assert session.branch_ids(None) == ["u0", "r2"]


async def test_unknown_parent_is_an_error_and_changes_nothing(session: Session) -> None:
    await session.append(user("u1"))
    with pytest.raises(KeyError):
        await session.append(assistant("a1"), "nope")
    assert "a1" not in session
    assert len(session) == 1


async def test_messages_need_an_id(session: Session) -> None:
    with pytest.raises(ValueError):
        await session.append({"role": "user", "parts": []})
    assert len(session) == 0


async def test_upsert_updates_in_place(session: Session, store: Store) -> None:
    await session.append_many([user("u1"), assistant("a1", "draft")])
    assert await session.upsert(assistant("a1", "final")) is False
    assert session.get("a1")["parts"][0]["text"] == "final"
    assert (await session.get_message("a1"))["parts"][0]["text"] == "final"
    assert ids(session.active_messages()) == ["u1", "a1"]
    reopened = Session(store, "agent-1")
    await reopened.open()
    assert (await reopened.get_message("a1"))["parts"][0]["text"] == "final"
    assert reopened.parent_of("a1") == "u1"


async def test_upsert_of_a_new_message_appends_it(session: Session) -> None:
    await session.append(user("u1"))
    assert await session.upsert(assistant("a1")) is True
    assert session.parent_of("a1") == "u1"


async def test_unchanged_upsert_writes_nothing(session: Session) -> None:
    await session.append(user("u1"))
    events = []
    session.add_listener(lambda e: events.append(e.kind))
    await session.upsert(user("u1"))
    assert "update" not in events


async def test_regenerate_keeps_both_answers_and_get_branches_lists_them(make_session: MakeSession) -> None:
    session = await make_session()
    await session.append_many([user("u1", "tell me a joke"), assistant("a1", "first joke")])
    # Regenerating the answer: a sibling under the same user message.
    await session.append(assistant("a2", "second joke"), "u1")
    branches = await session.get_branches("u1")
    assert ids(branches) == ["a1", "a2"]  # oldest first
    assert [b["parts"][0]["text"] for b in branches] == ["first joke", "second joke"]
    assert ids(session.active_messages()) == ["u1", "a2"]  # the view is the path to the newest leaf
    assert ids(await session.get_history("a1")) == ["u1", "a1"]  # the earlier branch is still readable
    reopened = await make_session()
    assert ids(await reopened.get_branches("u1")) == ["a1", "a2"]
    assert ids(reopened.active_messages()) == ["u1", "a2"]


async def test_latest_leaf_and_history(session: Session) -> None:
    assert await session.get_latest_leaf() is None
    await session.append_many(conversation(3))
    assert (await session.get_latest_leaf())["id"] == "a2"
    assert ids(await session.get_history()) == ["u0", "a0", "u1", "a1", "u2", "a2"]
    assert ids(await session.get_history("u1")) == ["u0", "a0", "u1"]
    with pytest.raises(KeyError):
        await session.get_history("missing")


async def test_history_copies_are_independent(session: Session) -> None:
    await session.append(user("u1", "original"))
    history = await session.get_history()
    history[0]["parts"][0]["text"] = "mutated"
    assert session.get("u1")["parts"][0]["text"] == "original"


async def test_switching_branches_is_persisted_until_the_next_append(make_session: MakeSession) -> None:
    session = await make_session()
    await session.append_many([user("u1"), assistant("a1"), user("u2"), assistant("a2")])
    await session.append(assistant("b1", "other answer"), "u1")
    assert ids(session.active_messages()) == ["u1", "b1"]
    # Switch back to the first answer: the active leaf is the newest leaf beneath it.
    assert await session.set_active_leaf("a1") == "a2"
    assert ids(session.active_messages()) == ["u1", "a1", "u2", "a2"]
    assert session.latest_leaf_id == "b1"
    reopened = await make_session()
    assert reopened.active_leaf_id == "a2"
    # A new append continues the active branch and becomes the active (and newest) leaf.
    await reopened.append(user("u3"))
    assert reopened.parent_of("u3") == "a2"
    assert reopened.active_leaf_id == reopened.latest_leaf_id == "u3"
    again = await make_session()
    assert again.active_leaf_id == "u3"


async def test_set_active_leaf_none_returns_to_the_newest(session: Session) -> None:
    await session.append_many([user("u1"), assistant("a1")])
    await session.append(assistant("b1"), "u1")
    await session.set_active_leaf("a1")
    assert session.active_leaf_id == "a1"
    assert await session.set_active_leaf(None) == "b1"
    with pytest.raises(KeyError):
        await session.set_active_leaf("nope")


async def test_delete_reparents_children(session: Session) -> None:
    await session.append_many([user("u1"), assistant("a1"), user("u2")])
    assert await session.delete("a1")
    assert session.parent_of("u2") == "u1"
    assert ids(session.active_messages()) == ["u1", "u2"]
    assert await session.delete("a1") is False
    assert ids(await session.get_history()) == ["u1", "u2"]


async def test_delete_of_the_leaf_moves_the_view_to_the_next_newest(session: Session) -> None:
    await session.append_many([user("u1"), assistant("a1")])
    await session.delete("a1")
    assert session.active_leaf_id == "u1"


async def test_clear_wipes_everything_of_this_agent_only(make_session: MakeSession, store: Store) -> None:
    mine = await make_session("mine")
    other = await make_session("other")
    await mine.append_many(conversation(2))
    await other.append_many(conversation(2))
    await mine.add_compaction("summary", "u0", "a0")
    await mine.clear()
    assert len(mine) == 0 and mine.active_messages() == []
    assert await mine.search("question") == []
    assert len(await other.search("question")) == 2
    again = await make_session("mine")
    assert len(again) == 0
    assert len(await make_session("other")) == 4
    await again.append(user("fresh"))
    assert ids(again.active_messages()) == ["fresh"]


async def test_reopen_rebuilds_the_same_tree(make_session: MakeSession) -> None:
    session = await make_session()
    await session.append_many(conversation(5))
    await session.append(assistant("alt"), "u2")
    reopened = await make_session()
    assert len(reopened) == len(session)
    assert ids(reopened.active_messages()) == ids(session.active_messages())
    assert reopened.branch_ids("u2") == ["a2", "alt"]
    await reopened.append(user("next"))
    assert reopened.parent_of("next") == "alt"


async def test_append_many_skips_existing_ids_but_keeps_chaining(session: Session) -> None:
    await session.append(user("u1"))
    inserted = await session.append_many([user("u1"), assistant("a1")])
    assert inserted == ["a1"]
    assert session.parent_of("a1") == "u1"


async def test_agents_do_not_see_each_others_messages(make_session: MakeSession) -> None:
    a = await make_session("a")
    b = await make_session("b")
    await a.append(user("same-id", "from a"))
    await b.append(user("same-id", "from b"))
    assert (await a.get_message("same-id"))["parts"][0]["text"] == "from a"
    assert (await b.get_message("same-id"))["parts"][0]["text"] == "from b"


async def test_listeners_hear_writes(session: Session) -> None:
    events = []
    remove = session.add_listener(lambda e: events.append((e.kind, e.data.get("id"))))
    await session.append(user("u1"))
    await session.upsert(user("u1", "edited"))
    await session.delete("u1")
    await session.clear()
    kinds = [k for k, _ in events if k != "status"]
    assert kinds == ["append", "update", "delete", "clear"]
    remove()
    await session.append(user("u2"))
    assert ("append", "u2") not in events


async def test_a_failing_listener_does_not_break_writes(session: Session) -> None:
    def boom(event: object) -> None:
        raise RuntimeError("listener bug")

    session.add_listener(boom)
    await session.append(user("u1"))
    assert "u1" in session


async def test_append_many_through_an_existing_message_on_another_branch(session: Session) -> None:
    await session.append_many([user("u1"), assistant("a1"), user("u2")])
    await session.append(assistant("b1"), "u1")
    inserted = await session.append_many([user("n1"), assistant("a1"), user("n2")], "b1")
    assert inserted == ["n1", "n2"]
    assert session.parent_of("n2") == "a1"  # the chain continued from the stored message
    assert ids(session.active_messages()) == ["u1", "a1", "n2"]


async def test_writes_are_sanitized(session: Session) -> None:
    message = {
        "id": "a1",
        "role": "assistant",
        "parts": [
            {"type": "reasoning", "text": ""},
            {"type": "text", "text": "hi", "providerMetadata": {"openai": {"itemId": "msg_123"}}},
        ],
    }
    await session.append(message)
    assert (await session.get_message("a1"))["parts"] == [{"type": "text", "text": "hi"}]
    with pytest.raises(ValueError):
        await session.append("not a message")  # type: ignore[arg-type]


async def test_upsert_of_the_cached_dict_changed_in_place_is_written(make_session: MakeSession) -> None:
    session = await make_session()
    await session.append_many([user("u1"), assistant("a1", "draft")])
    live = session.get("a1")
    live["parts"][0]["text"] = "mutated in place"  # a misuse, but an upsert must still persist it
    await session.upsert(live)
    reopened = await make_session()
    assert (await reopened.get_message("a1"))["parts"][0]["text"] == "mutated in place"


async def test_active_messages_json_follows_every_change(session: Session) -> None:
    """The JSON of the window (what a transcript frame carries) reuses each message's encoding only while the
    message is unchanged: upserts, new messages, branch switches and clears all show."""
    await session.append_many(conversation(3))
    assert json.loads(session.active_messages_json()) == session.active_messages()
    await session.upsert(assistant("a1", "rewritten — ünïcode"))
    assert json.loads(session.active_messages_json()) == session.active_messages()
    assert "rewritten — ünïcode" in session.active_messages_json()
    await session.append(user("u9", "after"))
    await session.append(user("side", "a branch"), "a0")
    assert json.loads(session.active_messages_json()) == session.active_messages()
    assert ids(json.loads(session.active_messages_json())) == ["u0", "a0", "side"]
    await session.set_active_leaf("u9")
    assert json.loads(session.active_messages_json())[-1]["id"] == "u9"
    await session.clear()
    assert session.active_messages_json() == "[]"
