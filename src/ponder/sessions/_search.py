"""Full-text search over an agent's messages, and the ``search_history`` tool.

Why this module exists: once compaction and hydration windows keep old messages out of the prompt, the
model (and the user) still need a way back to them. Search indexes each message's text parts — SQLite FTS5
with the ``porter unicode61`` tokenizer (PostgreSQL: a ``tsvector`` with a GIN index) — scoped to one agent.

A query is always one quoted phrase: the user's or model's text can never inject FTS operators (``NEAR``,
``OR``, column filters), and a query the engine still rejects returns no results instead of an error.
Results are ranked among the most recent :data:`RANK_CANDIDATES` matches (by bm25's term-frequency and
length factor, which orders a single-phrase query exactly as bm25 does): ranking every match of a common
word over 100,000 messages costs tens of milliseconds, the newest few hundred rank in about one, and for
recall in a conversation recent matches are the ones that matter.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from ..storage import Store
from ..tools import Tool, tool

if TYPE_CHECKING:
    from ._session import Session

__all__ = ["RANK_CANDIDATES", "search_history_tool", "search_messages"]

logger = logging.getLogger("ponder.sessions")

RANK_CANDIDATES = 200
MAX_LIMIT = 100
_TOOL_PREVIEW_CHARS = 600


def fts_phrase(query: str) -> str:
    """``query`` as one FTS5 phrase: wrapped in double quotes, inner quotes doubled."""
    return '"' + query.replace('"', '""') + '"'


def fts_insert(
    dialect: str, agent_id: str, message_id: str, role: str, content: str, seq: int
) -> tuple[str, tuple[Any, ...]]:
    """The statement and parameters that index one message's text."""
    if dialect == "postgres":
        return (
            "INSERT INTO ponder_session_fts (agent_id, id, role, content, seq) VALUES (?, ?, ?, ?, ?)"
            " ON CONFLICT (agent_id, id) DO UPDATE SET role = excluded.role, content = excluded.content",
            (agent_id, message_id, role, content, seq),
        )
    # The FTS rowid is the message row's rowid, so later updates and deletes are keyed, not scans.
    return (
        "INSERT INTO ponder_session_fts (rowid, agent_id, id, role, content)"
        " SELECT rowid, agent_id, id, ?, ? FROM ponder_session_messages WHERE agent_id = ? AND id = ?",
        (role, content, agent_id, message_id),
    )


def fts_delete(dialect: str) -> str:
    """Drop one message's index entry: params ``(agent_id, id)``."""
    if dialect == "postgres":
        return "DELETE FROM ponder_session_fts WHERE agent_id = ? AND id = ?"
    return (
        "DELETE FROM ponder_session_fts WHERE rowid ="
        " (SELECT rowid FROM ponder_session_messages WHERE agent_id = ? AND id = ?)"
    )


def fts_clear(dialect: str) -> str:
    """Drop an agent's whole index: params ``(agent_id,)``."""
    if dialect == "postgres":
        return "DELETE FROM ponder_session_fts WHERE agent_id = ?"
    return (
        "DELETE FROM ponder_session_fts WHERE rowid IN"
        " (SELECT rowid FROM ponder_session_messages WHERE agent_id = ?)"
    )


# The newest matches, each with its phrase hits marked (highlight() only tokenizes that one row). FTS5's
# bm25() is not used: for every query it scans the whole doclist of each phrase to count documents (its
# IDF), which costs milliseconds for a common word over 100,000 messages. A query is a single phrase, so
# its IDF is the same for every candidate, and ranking by bm25's term-frequency and length factor alone
# gives bm25's order.
_SQLITE_SEARCH = """
SELECT id, role, content, highlight(ponder_session_fts, 3, char(57344), '') AS marked
FROM ponder_session_fts
WHERE ponder_session_fts MATCH ? AND agent_id = ? ORDER BY rowid DESC LIMIT ?
"""
_HIT = "\ue000"
_K1 = 1.2
_B = 0.75

_POSTGRES_SEARCH = """
SELECT id, role, content FROM (
    SELECT id, role, content, tsv FROM ponder_session_fts
    WHERE agent_id = ? AND tsv @@ phraseto_tsquery('english', ?) ORDER BY seq DESC LIMIT ?
) recent ORDER BY ts_rank(tsv, phraseto_tsquery('english', ?)) DESC LIMIT ?
"""


async def search_messages(store: Store, agent_id: str, query: str, limit: int = 10) -> list[dict[str, Any]]:
    """Messages of ``agent_id`` whose text contains ``query`` as a phrase: ``[{id, role, content}]``, best first."""
    limit = max(1, min(int(limit), MAX_LIMIT))
    text = " ".join(str(query).split())
    if not text:
        return []
    try:
        if store.dialect == "postgres":
            rows = await store.fetch_all(
                _POSTGRES_SEARCH, (agent_id, text, max(RANK_CANDIDATES, limit), text, limit)
            )
        else:
            candidates = await store.fetch_all(
                _SQLITE_SEARCH, (fts_phrase(text), agent_id, max(RANK_CANDIDATES, limit))
            )
            rows = _rank(candidates)[:limit]
    except Exception as exc:  # a query the engine cannot parse is "no results", never an error
        logger.debug("search for %r failed: %s", text, exc)
        return []
    return [{"id": row["id"], "role": row["role"], "content": row["content"]} for row in rows]


def _rank(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Order candidates (newest first) by bm25's per-document factor; ties keep the newest first."""
    if len(rows) < 2:
        return rows
    lengths = [max(1, len(row["content"].split())) for row in rows]
    average = sum(lengths) / len(lengths)
    scored = []
    for index, (row, length) in enumerate(zip(rows, lengths, strict=True)):
        hits = max(1, str(row["marked"] or "").count(_HIT))
        score = hits * (_K1 + 1) / (hits + _K1 * (1 - _B + _B * length / average))
        scored.append((-score, index, row))
    scored.sort(key=lambda item: (item[0], item[1]))
    return [row for _, _, row in scored]


def search_history_tool(session: Session, *, name: str = "search_history", default_limit: int = 5) -> Tool:
    """A tool that lets the model search this conversation's whole stored history (all branches)."""

    async def search_history(query: str, limit: int = default_limit) -> str:
        """Search earlier messages of this conversation, including ones no longer in your context.

        Args:
            query: Words or a phrase to look for (matched as a phrase, with stemming).
            limit: How many matching messages to return (1-20).
        """
        results = await session.search(query, limit=max(1, min(limit, 20)))
        if not results:
            return "No results found."
        blocks = []
        for result in results:
            content = result["content"]
            if len(content) > _TOOL_PREVIEW_CHARS:
                content = (
                    content[:_TOOL_PREVIEW_CHARS] + f"... [{len(content) - _TOOL_PREVIEW_CHARS} more chars]"
                )
            blocks.append(f"[{result['role']} {result['id']}]\n{content}")
        return "\n\n".join(blocks)

    return tool(name=name)(search_history)
