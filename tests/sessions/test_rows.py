"""Row safety: messages over the row budget continue in chunk rows and come back byte for byte."""

from __future__ import annotations

import json
import random

import pytest

from ponder.sessions import ROW_BUDGET_BYTES, Session, estimate_message_tokens, estimate_tokens
from ponder.sessions._rows import encode_message, message_search_text, split_utf8
from ponder.storage import Store

from .conftest import MakeSession
from .helpers import user


def _dumps(value: object) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def test_split_never_cuts_inside_a_character() -> None:
    text = "aé€😀" * 1000
    data = text.encode()
    for budget in (4, 5, 7, 64, 1000):
        slices = split_utf8(data, budget)
        assert "".join(slices) == text
        assert all(len(s.encode()) <= budget for s in slices)
    with pytest.raises(ValueError):
        split_utf8(data, 3)


def test_small_messages_use_one_row() -> None:
    encoded = encode_message(user("u1", "hi"))
    assert encoded.slices == (encoded.json_text,)
    assert encoded.size == len(encoded.json_text.encode())


def test_row_budget_is_one_and_a_half_mebibytes() -> None:
    assert ROW_BUDGET_BYTES == 1_572_864


async def test_a_5_mib_message_round_trips_byte_for_byte(make_session: MakeSession, store: Store) -> None:
    session = await make_session()
    rng = random.Random(5)
    alphabet = 'abcdefghij ñé€😀"\\\n'
    body = "".join(rng.choices(alphabet, k=5 * 1024 * 1024 * 2 // 3))
    message = {
        "id": "big",
        "role": "assistant",
        "parts": [
            {"type": "text", "text": body},
            {
                "type": "tool-x",
                "toolCallId": "c1",
                "state": "output-available",
                "input": {},
                "output": body[:1000],
            },
        ],
        "metadata": {"k": [1, 2.5, None, True]},
    }
    original = _dumps(message)
    assert len(original.encode()) > 5 * 1024 * 1024
    await session.append(message)

    row = await store.fetch_one(
        "SELECT content, content_chunks, content_bytes FROM ponder_session_messages WHERE id = 'big'"
    )
    assert row is not None and row["content_chunks"] >= 3
    assert len(row["content"].encode()) <= ROW_BUDGET_BYTES
    chunks = await store.fetch_all(
        "SELECT idx, content FROM ponder_session_message_chunks WHERE id = 'big' ORDER BY idx"
    )
    assert [c["idx"] for c in chunks] == list(range(1, row["content_chunks"] + 1))
    assert all(len(c["content"].encode()) <= ROW_BUDGET_BYTES for c in chunks)
    stored = row["content"] + "".join(c["content"] for c in chunks)
    assert stored.encode() == original.encode()  # nothing truncated, byte for byte
    assert row["content_bytes"] == len(original.encode())

    reopened = await make_session()  # a cold read reassembles it
    assert _dumps(await reopened.get_message("big")) == original
    assert _dumps(reopened.active_messages()[0]) == original


async def test_shrinking_a_split_message_drops_its_chunks(session: Session, store: Store) -> None:
    await session.append(user("m", "x" * (ROW_BUDGET_BYTES * 2)))
    await session.upsert(user("m", "small"))
    assert await store.fetch_all("SELECT * FROM ponder_session_message_chunks") == []
    assert (await session.get_message("m"))["parts"][0]["text"] == "small"


async def test_a_custom_row_budget_splits_earlier(make_session: MakeSession, store: Store) -> None:
    session = await make_session(row_budget=100)
    message = user("m", "word " * 100)
    await session.append(message)
    chunks = await store.fetch_all("SELECT idx FROM ponder_session_message_chunks")
    assert len(chunks) >= 5
    reopened = await make_session(row_budget=100)
    assert await reopened.get_message("m") == message


async def test_lone_surrogates_are_stored_escaped(session: Session) -> None:
    message = user("m", "broken \ud800 text")
    await session.append(message)
    assert await session.get_message("m") == message


def test_token_estimates() -> None:
    assert estimate_tokens("") == 0
    assert estimate_tokens("abcd" * 10) == 10
    assert estimate_tokens("a b c d e f g h i j") == 13  # words × 1.3 wins for short words
    image = {
        "id": "i",
        "role": "user",
        "parts": [{"type": "file", "mediaType": "image/png", "url": "data:…"}],
    }
    assert estimate_message_tokens(image) == 4 + 1600
    assert estimate_message_tokens({"id": "x", "role": "user"}) == 4


def test_search_text_is_the_text_parts() -> None:
    message = {
        "id": "m",
        "role": "assistant",
        "parts": [
            {"type": "reasoning", "text": "secret thoughts"},
            {"type": "text", "text": "one"},
            {"type": "tool-x", "toolCallId": "c", "state": "output-available", "output": "tool text"},
            {"type": "text", "text": "two"},
        ],
    }
    assert message_search_text(message) == "one\ntwo"
