"""The sessions tables: messages (with continuation rows), overlays, per-agent metadata, FTS, attachments.

Why this module exists: the message tree is the one table every turn writes, so its shape decides what a
turn costs. One row per message keyed by ``(agent_id, id)`` with a per-agent ``seq`` (append order, which is
also what "newest leaf" means); the row carries its serialized size, token estimate and content hash so a
wake can plan its hydration window from metadata alone, without reading message bodies. Bodies larger than
the row budget continue in ``ponder_session_message_chunks``. Compaction never rewrites a message: it adds
a row to ``ponder_session_compactions`` that is applied when the path is read.

Full-text search is the one place where SQLite and PostgreSQL differ: SQLite gets an FTS5 virtual table
(``porter unicode61``), PostgreSQL a plain table with a generated ``tsvector`` column and a GIN index. FTS
rows are maintained by the session code in the same transaction as the message row (no triggers: migration
scripts are split on ``;`` and trigger bodies contain them). On SQLite the FTS rowid is the message row's
rowid, so updating or deleting a message's index entry is a keyed operation rather than a scan.
"""

from __future__ import annotations

from ..storage import Migration, register_migrations

__all__ = ["SESSION_MIGRATIONS"]

_COMMON_TABLES = """
CREATE TABLE IF NOT EXISTS ponder_session_messages (
    agent_id TEXT NOT NULL,
    id TEXT NOT NULL,
    seq {bigint} NOT NULL,
    parent_id TEXT,
    role TEXT NOT NULL,
    content TEXT NOT NULL,
    content_chunks INTEGER NOT NULL DEFAULT 0,
    content_bytes {bigint} NOT NULL,
    token_estimate INTEGER NOT NULL,
    content_hash TEXT NOT NULL,
    created_at {real} NOT NULL,
    PRIMARY KEY (agent_id, id)
);
CREATE INDEX IF NOT EXISTS ponder_session_messages_seq ON ponder_session_messages {seq_index};
CREATE INDEX IF NOT EXISTS ponder_session_messages_parent ON ponder_session_messages (agent_id, parent_id);
CREATE TABLE IF NOT EXISTS ponder_session_message_chunks (
    agent_id TEXT NOT NULL,
    id TEXT NOT NULL,
    idx INTEGER NOT NULL,
    content TEXT NOT NULL,
    PRIMARY KEY (agent_id, id, idx)
);
CREATE TABLE IF NOT EXISTS ponder_session_compactions (
    agent_id TEXT NOT NULL,
    id TEXT NOT NULL,
    seq {bigint} NOT NULL,
    summary TEXT NOT NULL,
    from_message_id TEXT NOT NULL,
    to_message_id TEXT NOT NULL,
    created_at {real} NOT NULL,
    PRIMARY KEY (agent_id, id)
);
CREATE TABLE IF NOT EXISTS ponder_session_meta (
    agent_id TEXT NOT NULL,
    key TEXT NOT NULL,
    value TEXT NOT NULL,
    PRIMARY KEY (agent_id, key)
);
CREATE TABLE IF NOT EXISTS ponder_session_attachments (
    agent_id TEXT NOT NULL,
    path TEXT NOT NULL,
    media_type TEXT,
    size {bigint} NOT NULL,
    data {blob} NOT NULL,
    created_at {real} NOT NULL,
    PRIMARY KEY (agent_id, path)
)
"""

# The seq index covers every metadata column, so a wake's metadata scan never touches the message bodies.
_SQLITE_SEQ_INDEX = "(agent_id, seq, id, parent_id, role, content_bytes, content_chunks, token_estimate)"
_POSTGRES_SEQ_INDEX = (
    "(agent_id, seq) INCLUDE (id, parent_id, role, content_bytes, content_chunks, token_estimate)"
)

_SQLITE_FTS = """;
CREATE VIRTUAL TABLE IF NOT EXISTS ponder_session_fts USING fts5(
    agent_id UNINDEXED, id UNINDEXED, role UNINDEXED, content, tokenize = 'porter unicode61'
)
"""

_POSTGRES_FTS = """;
CREATE TABLE IF NOT EXISTS ponder_session_fts (
    agent_id TEXT NOT NULL,
    id TEXT NOT NULL,
    role TEXT NOT NULL,
    content TEXT NOT NULL,
    seq BIGINT NOT NULL,
    tsv tsvector GENERATED ALWAYS AS (to_tsvector('english', content)) STORED,
    PRIMARY KEY (agent_id, id)
);
CREATE INDEX IF NOT EXISTS ponder_session_fts_tsv ON ponder_session_fts USING GIN (tsv)
"""

SESSION_MIGRATIONS = (
    Migration(
        component="sessions",
        version=1,
        sql=_COMMON_TABLES.format(bigint="INTEGER", real="REAL", blob="BLOB", seq_index=_SQLITE_SEQ_INDEX)
        + _SQLITE_FTS,
        postgres=_COMMON_TABLES.format(
            bigint="BIGINT", real="DOUBLE PRECISION", blob="BYTEA", seq_index=_POSTGRES_SEQ_INDEX
        )
        + _POSTGRES_FTS,
    ),
)

register_migrations(*SESSION_MIGRATIONS)
