"""Row-level reads and writes of the sessions tables (no tree logic, no caching).

Why this module exists: the session's tree code should read like tree code. Everything that knows how a
message is laid out in rows — the message row plus its continuation chunks plus its FTS entry, written in one
transaction — lives here, so the one place that could split a message inconsistently is small and tested.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from ..storage import Row, Store
from ._rows import EncodedMessage, parse_json, paused_gc
from ._search import fts_delete, fts_insert

__all__ = ["MessageIO", "NewRow"]

_BATCH = 400

# A wake reads every message's metadata and a window of bodies. Fetched row by row, 10,000 messages cost
# 10,000 Python row dicts and 10,000 JSON parses; aggregated in SQL they arrive as one JSON document
# (metadata) and one JSON array made by joining the stored texts (bodies), each parsed in one call.
_METADATA_SQL = {
    "sqlite": (
        "SELECT json_group_array(json_array(id, parent_id, seq, role, content_bytes, content_chunks,"
        " token_estimate)) AS rows FROM (SELECT id, parent_id, seq, role, content_bytes, content_chunks,"
        " token_estimate FROM ponder_session_messages WHERE agent_id = ? ORDER BY seq)"
    ),
    "postgres": (
        "SELECT json_agg(json_build_array(id, parent_id, seq, role, content_bytes, content_chunks,"
        " token_estimate) ORDER BY seq)::text AS rows FROM ponder_session_messages WHERE agent_id = ?"
    ),
}
_BODIES_SQL = {
    "sqlite": (
        "SELECT json_group_array(id) AS ids, '[' || group_concat(content, ',') || ']' AS body"
        " FROM (SELECT id, content FROM ponder_session_messages WHERE agent_id = ? AND content_chunks = 0"
        " AND {where} ORDER BY seq)"
    ),
    "postgres": (
        "SELECT json_agg(id ORDER BY seq)::text AS ids, '[' || string_agg(content, ',' ORDER BY seq) || ']'"
        " AS body FROM ponder_session_messages WHERE agent_id = ? AND content_chunks = 0 AND {where}"
    ),
}


@dataclass(slots=True)
class NewRow:
    """A message about to be inserted."""

    id: str
    parent_id: str | None
    seq: int
    role: str
    encoded: EncodedMessage
    created_at: float


class MessageIO:
    """Reads and writes one agent's message rows."""

    def __init__(self, store: Store, agent_id: str) -> None:
        self.store = store
        self.agent_id = agent_id

    # -- reads -------------------------------------------------------------------------------------

    def _dialect(self) -> str:
        return "postgres" if self.store.dialect == "postgres" else "sqlite"

    async def metadata(self) -> list[list[Any]]:
        """Every message's ``[id, parent_id, seq, role, bytes, chunks, tokens]``, oldest first (no bodies)."""
        row = await self.store.fetch_one(_METADATA_SQL[self._dialect()], (self.agent_id,))
        if not row or not row["rows"]:
            return []
        with paused_gc():
            return parse_json(row["rows"])  # type: ignore[no-any-return]

    async def _chunks(self, ids: Sequence[str]) -> dict[str, list[str]]:
        out: dict[str, list[str]] = {}
        for start in range(0, len(ids), _BATCH):
            batch = ids[start : start + _BATCH]
            marks = ",".join("?" * len(batch))
            rows = await self.store.fetch_all(
                "SELECT id, idx, content FROM ponder_session_message_chunks"
                f" WHERE agent_id = ? AND id IN ({marks}) ORDER BY id, idx",
                (self.agent_id, *batch),
            )
            for row in rows:
                out.setdefault(row["id"], []).append(row["content"])
        return out

    async def _assemble(self, rows: Iterable[Row]) -> dict[str, str]:
        texts: dict[str, str] = {}
        split: list[str] = []
        for row in rows:
            texts[row["id"]] = row["content"]
            if row["content_chunks"]:
                split.append(row["id"])
        if split:
            chunks = await self._chunks(split)
            for message_id in split:
                texts[message_id] = texts[message_id] + "".join(chunks.get(message_id, ()))
        return texts

    async def load_texts(self, ids: Sequence[str]) -> dict[str, str]:
        """The stored JSON text of each message in ``ids`` (reassembled from its chunks), byte for byte."""
        texts: dict[str, str] = {}
        for start in range(0, len(ids), _BATCH):
            batch = ids[start : start + _BATCH]
            marks = ",".join("?" * len(batch))
            rows = await self.store.fetch_all(
                "SELECT id, content, content_chunks FROM ponder_session_messages"
                f" WHERE agent_id = ? AND id IN ({marks})",
                (self.agent_id, *batch),
            )
            texts.update(await self._assemble(rows))
        return texts

    async def load_range(self, from_seq: int) -> tuple[list[str], list[Any]]:
        """Ids and parsed bodies of the unsplit messages with ``seq >= from_seq``, in ``seq`` order (one scan).

        A wake whose window is one branch wants exactly these rows, in this order: it can pair them with its
        nodes by position instead of building a dict of 10,000 entries.
        """
        row = await self.store.fetch_one(
            _BODIES_SQL[self._dialect()].format(where="seq >= ?"), (self.agent_id, from_seq)
        )
        if not row or not row["body"]:
            return [], []
        with paused_gc():
            return parse_json(row["ids"]), parse_json(row["body"])

    async def load_messages(self, ids: Sequence[str], *, from_seq: int | None = None) -> dict[str, Any]:
        """The stored messages with these ids, parsed (split messages reassembled first).

        With ``from_seq`` the unsplit bodies are read by one range scan over ``seq >= from_seq`` (cheaper than
        keyed lookups when ``ids`` is most of that range) and rows not in ``ids`` are dropped.
        """
        if not ids:
            return {}
        wanted = set(ids)
        out: dict[str, Any] = {}
        sql = _BODIES_SQL[self._dialect()]
        if from_seq is not None:
            batches: list[tuple[str, tuple[Any, ...]]] = [
                (sql.format(where="seq >= ?"), (self.agent_id, from_seq))
            ]
        else:
            batches = []
            for start in range(0, len(ids), _BATCH):
                batch = ids[start : start + _BATCH]
                marks = ",".join("?" * len(batch))
                batches.append((sql.format(where=f"id IN ({marks})"), (self.agent_id, *batch)))
        for query, params in batches:
            row = await self.store.fetch_one(query, params)
            if row and row["body"]:
                with paused_gc():
                    pairs = zip(parse_json(row["ids"]), parse_json(row["body"]), strict=True)
                    out.update((key, message) for key, message in pairs if key in wanted)
        split = [message_id for message_id in ids if message_id not in out]
        for message_id, text in (await self.load_texts(split)).items():
            out[message_id] = parse_json(text)
        return out

    async def may_hold_media(self, ids: Sequence[str]) -> set[str]:
        """The ids among ``ids`` whose stored text mentions inline data (a cheap scan, no JSON parsing).

        Split messages are always included (only their first slice is scanned here).
        """
        found: set[str] = set()
        for start in range(0, len(ids), _BATCH):
            batch = ids[start : start + _BATCH]
            marks = ",".join("?" * len(batch))
            rows = await self.store.fetch_all(
                "SELECT id FROM ponder_session_messages"
                f" WHERE agent_id = ? AND id IN ({marks}) AND (content_chunks > 0"
                " OR content LIKE '%\"data:%' OR content LIKE '%\"data\":\"%')",
                (self.agent_id, *batch),
            )
            found.update(row["id"] for row in rows)
        return found

    async def content_hash(self, message_id: str) -> str | None:
        row = await self.store.fetch_one(
            "SELECT content_hash FROM ponder_session_messages WHERE agent_id = ? AND id = ?",
            (self.agent_id, message_id),
        )
        return None if row is None else str(row["content_hash"])

    # -- writes (call inside a transaction) -----------------------------------------------------------

    async def insert(self, rows: Sequence[NewRow]) -> None:
        """Insert message rows, their continuation chunks and their FTS entries."""
        store, agent = self.store, self.agent_id
        await store.execute_many(
            "INSERT INTO ponder_session_messages (agent_id, id, seq, parent_id, role, content,"
            " content_chunks, content_bytes, token_estimate, content_hash, created_at)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            [
                (
                    agent,
                    row.id,
                    row.seq,
                    row.parent_id,
                    row.role,
                    row.encoded.slices[0],
                    len(row.encoded.slices) - 1,
                    row.encoded.size,
                    row.encoded.tokens,
                    row.encoded.hash,
                    row.created_at,
                )
                for row in rows
            ],
        )
        chunks = [
            (agent, row.id, idx, piece)
            for row in rows
            for idx, piece in enumerate(row.encoded.slices[1:], start=1)
        ]
        if chunks:
            await store.execute_many(
                "INSERT INTO ponder_session_message_chunks (agent_id, id, idx, content) VALUES (?, ?, ?, ?)",
                chunks,
            )
        for row in rows:
            if row.encoded.search_text:
                sql, params = fts_insert(
                    store.dialect, agent, row.id, row.role, row.encoded.search_text, row.seq
                )
                await store.execute(sql, params)

    async def rewrite(self, message_id: str, seq: int, role: str, encoded: EncodedMessage) -> None:
        """Replace one message's body in place (row, chunks, FTS entry)."""
        store, agent = self.store, self.agent_id
        await store.execute(fts_delete(store.dialect), (agent, message_id))
        await store.execute(
            "UPDATE ponder_session_messages SET role = ?, content = ?, content_chunks = ?, content_bytes = ?,"
            " token_estimate = ?, content_hash = ? WHERE agent_id = ? AND id = ?",
            (
                role,
                encoded.slices[0],
                len(encoded.slices) - 1,
                encoded.size,
                encoded.tokens,
                encoded.hash,
                agent,
                message_id,
            ),
        )
        await store.execute(
            "DELETE FROM ponder_session_message_chunks WHERE agent_id = ? AND id = ?", (agent, message_id)
        )
        if len(encoded.slices) > 1:
            await store.execute_many(
                "INSERT INTO ponder_session_message_chunks (agent_id, id, idx, content) VALUES (?, ?, ?, ?)",
                [(agent, message_id, idx, piece) for idx, piece in enumerate(encoded.slices[1:], start=1)],
            )
        if encoded.search_text:
            sql, params = fts_insert(store.dialect, agent, message_id, role, encoded.search_text, seq)
            await store.execute(sql, params)

    async def delete(self, message_id: str, new_parent: str | None) -> None:
        """Delete one message (row, chunks, FTS, overlays touching it); its children move to ``new_parent``."""
        store, agent = self.store, self.agent_id
        await store.execute(
            "UPDATE ponder_session_messages SET parent_id = ? WHERE agent_id = ? AND parent_id = ?",
            (new_parent, agent, message_id),
        )
        await store.execute(fts_delete(store.dialect), (agent, message_id))
        await store.execute(
            "DELETE FROM ponder_session_message_chunks WHERE agent_id = ? AND id = ?", (agent, message_id)
        )
        await store.execute(
            "DELETE FROM ponder_session_messages WHERE agent_id = ? AND id = ?", (agent, message_id)
        )
        await store.execute(
            "DELETE FROM ponder_session_compactions WHERE agent_id = ? AND"
            " (from_message_id = ? OR to_message_id = ?)",
            (agent, message_id, message_id),
        )

    # -- metadata rows --------------------------------------------------------------------------------

    async def meta(self) -> dict[str, Any]:
        rows = await self.store.fetch_all(
            "SELECT key, value FROM ponder_session_meta WHERE agent_id = ?", (self.agent_id,)
        )
        return {row["key"]: json.loads(row["value"]) for row in rows}

    async def put_meta(self, key: str, value: Any) -> None:
        await self.store.execute(
            "INSERT INTO ponder_session_meta (agent_id, key, value) VALUES (?, ?, ?)"
            " ON CONFLICT (agent_id, key) DO UPDATE SET value = excluded.value",
            (self.agent_id, key, json.dumps(value)),
        )

    async def delete_meta(self, key: str) -> None:
        await self.store.execute(
            "DELETE FROM ponder_session_meta WHERE agent_id = ? AND key = ?", (self.agent_id, key)
        )


def now() -> float:
    return time.time()
