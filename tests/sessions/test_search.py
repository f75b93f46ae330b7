"""Search: FTS5 (porter unicode61) over message text, per agent, phrase-only, never an error."""

from __future__ import annotations

import pytest

from ponder.sessions import Session, search_history_tool
from ponder.tools import ToolContext

from .conftest import MakeSession
from .helpers import assistant, conversation, ids, user


async def test_finds_messages_by_word(session: Session) -> None:
    await session.append_many(
        [user("u1", "What is the weather in Lisbon?"), assistant("a1", "Sunny and warm in Lisbon.")]
    )
    results = await session.search("lisbon")
    assert sorted(r["id"] for r in results) == ["a1", "u1"]
    assert {r["role"] for r in results} == {"user", "assistant"}
    assert results[0]["content"] in ("What is the weather in Lisbon?", "Sunny and warm in Lisbon.")


async def test_porter_stemming(session: Session) -> None:
    await session.append(user("u1", "I was running through the forests"))
    assert ids(await session.search("runs")) == ["u1"]
    assert ids(await session.search("forest")) == ["u1"]


async def test_queries_are_phrases(session: Session) -> None:
    await session.append_many([user("u1", "red apple pie"), user("u2", "apple red pie")])
    assert ids(await session.search("red apple")) == ["u1"]


@pytest.mark.parametrize(
    "query",
    [
        "apple OR pie",
        "NEAR(apple pie)",
        'apple" OR "pie',
        "content:apple",
        "apple*",
        "-apple",
        '"',
        "(((",
        "AND",
        "",
        "   ",
        "\x00",
        "^apple",
    ],
)
async def test_operators_cannot_be_injected_and_bad_queries_return_nothing(
    session: Session, query: str
) -> None:
    await session.append_many([user("u1", "apple"), user("u2", "pie"), user("u3", "content apple")])
    results = await session.search(query)
    # Only a literal phrase match may come back, never the OR / NEAR / prefix / column-filter expansion.
    for result in results:
        assert "apple" in result["content"]
    if query in ("apple OR pie", "NEAR(apple pie)", 'apple" OR "pie', "AND", "", "   ", '"', "((("):
        assert results == []


async def test_search_is_scoped_to_the_agent(make_session: MakeSession) -> None:
    a = await make_session("a")
    b = await make_session("b")
    await a.append(user("x", "zebra"))
    await b.append(user("y", "zebra"))
    assert ids(await a.search("zebra")) == ["x"]
    assert ids(await b.search("zebra")) == ["y"]


async def test_index_follows_updates_and_deletes(session: Session) -> None:
    await session.append(user("u1", "alpha"))
    await session.upsert(user("u1", "beta"))
    assert await session.search("alpha") == []
    assert ids(await session.search("beta")) == ["u1"]
    await session.delete("u1")
    assert await session.search("beta") == []


async def test_search_covers_every_branch_and_the_limit(session: Session) -> None:
    await session.append(user("u1", "kiwi"))
    await session.append(assistant("a1", "kiwi one"))
    await session.append(assistant("a2", "kiwi two"), "u1")
    assert sorted(ids(await session.search("kiwi"))) == ["a1", "a2", "u1"]
    assert len(await session.search("kiwi", limit=2)) == 2
    assert len(await session.search("kiwi", limit=0)) == 1  # clamped to at least one


async def test_search_history_tool(session: Session) -> None:
    await session.append_many([user("u1", "my locker code is 4711"), assistant("a1", "noted")])
    tool = search_history_tool(session)
    assert tool.name == "search_history"
    assert set(tool.parameters["properties"]) == {"query", "limit"}
    ctx = ToolContext(agent=None, tool_call_id="c1", tool_name="search_history")
    found = await tool.invoke({"query": "locker code"}, ctx)
    assert "[user u1]" in found and "4711" in found
    assert await tool.invoke({"query": "nothing like this"}, ctx) == "No results found."


async def test_finds_a_word_from_message_1_of_10000(session: Session) -> None:
    messages = conversation(5_000)
    messages[0] = user("u0", "the secret password is xylophone")
    await session.append_many(messages)
    assert len(session) == 10_000
    assert ids(await session.search("xylophone")) == ["u0"]
    assert len(await session.search("answer number")) == 10


async def test_ranking_prefers_more_hits_then_newer(session: Session) -> None:
    await session.append_many(
        [
            user("once-old", "mango and other fruit in a long sentence here"),
            user("thrice", "mango mango mango"),
            user("once-new", "mango and other fruit in a long sentence here"),
        ]
    )
    assert ids(await session.search("mango")) == ["thrice", "once-new", "once-old"]
