"""The runtime's own tables: agents (with their state), key-value rows, schedules and fibers.

Every table is keyed by ``agent_id`` so one database holds every agent of a host, and one agent's
rows are reachable only through a handle scoped to its id.
"""

from __future__ import annotations

from ._migrations import Migration, register_migrations

CORE_MIGRATIONS = (
    Migration(
        component="core",
        version=1,
        sql="""
        CREATE TABLE IF NOT EXISTS ponder_agents (
            agent_id TEXT PRIMARY KEY,
            class_name TEXT NOT NULL,
            name TEXT NOT NULL,
            parent_id TEXT,
            state TEXT,
            created_at REAL NOT NULL
        );
        CREATE TABLE IF NOT EXISTS ponder_kv (
            agent_id TEXT NOT NULL,
            key TEXT NOT NULL,
            value TEXT NOT NULL,
            PRIMARY KEY (agent_id, key)
        );
        CREATE TABLE IF NOT EXISTS ponder_schedules (
            id TEXT PRIMARY KEY,
            agent_id TEXT NOT NULL,
            callback TEXT NOT NULL,
            payload TEXT NOT NULL,
            kind TEXT NOT NULL,
            due_at REAL NOT NULL,
            cron TEXT,
            created_at REAL NOT NULL
        );
        CREATE INDEX IF NOT EXISTS ponder_schedules_due ON ponder_schedules (due_at);
        CREATE INDEX IF NOT EXISTS ponder_schedules_agent ON ponder_schedules (agent_id);
        CREATE TABLE IF NOT EXISTS ponder_fibers (
            id TEXT PRIMARY KEY,
            agent_id TEXT NOT NULL,
            name TEXT NOT NULL,
            snapshot TEXT,
            created_at REAL NOT NULL
        );
        CREATE INDEX IF NOT EXISTS ponder_fibers_agent ON ponder_fibers (agent_id)
        """,
    ),
)

register_migrations(*CORE_MIGRATIONS)
