"""The context tables: writable block contents, the frozen prompt, reminder bookkeeping and the config row.

Why this module exists: the frozen system prompt must survive a cold wake byte for byte (providers cache on an
identical prefix), so it is a row, not process memory; block memory written by the model is a row too, keyed by
``(agent_id, label)`` like every other per-agent table. Everything here is plain SQL shared by SQLite and
PostgreSQL (``ON CONFLICT ... DO UPDATE`` upserts, ``TEXT`` and ``REAL`` columns).
"""

from __future__ import annotations

from ..storage import Migration, register_migrations

__all__ = ["CONTEXT_MIGRATIONS"]

_TABLES = """
CREATE TABLE IF NOT EXISTS ponder_context_blocks (
    agent_id TEXT NOT NULL,
    label TEXT NOT NULL,
    content TEXT NOT NULL,
    updated_at {real} NOT NULL,
    PRIMARY KEY (agent_id, label)
);
CREATE TABLE IF NOT EXISTS ponder_context_prompts (
    agent_id TEXT NOT NULL PRIMARY KEY,
    prompt TEXT NOT NULL,
    fingerprint TEXT NOT NULL,
    created_at {real} NOT NULL
);
CREATE TABLE IF NOT EXISTS ponder_context_reminded (
    agent_id TEXT NOT NULL,
    label TEXT NOT NULL,
    section TEXT NOT NULL,
    PRIMARY KEY (agent_id, label)
);
CREATE TABLE IF NOT EXISTS ponder_context_config (
    agent_id TEXT NOT NULL PRIMARY KEY,
    config TEXT NOT NULL,
    updated_at {real} NOT NULL
)
"""

CONTEXT_MIGRATIONS = (
    Migration(
        component="context",
        version=1,
        sql=_TABLES.format(real="REAL"),
        # PostgreSQL's REAL is 4 bytes: too coarse for time.time().
        postgres=_TABLES.format(real="DOUBLE PRECISION"),
    ),
)

register_migrations(*CONTEXT_MIGRATIONS)
