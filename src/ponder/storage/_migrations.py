"""Versioned schema migrations, registered by each layer and applied when a store opens.

Every layer that owns tables (the runtime, chat, sessions, ...) registers its migrations here at import
time under its own *component* name. A store applies whatever it has not applied yet, in version order,
each migration in its own transaction, and records it in ``ponder_migrations``. Because components are
independent, a new layer can add tables without touching the others, and a store that is opened by an
older process never sees half of a migration.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Migration", "register_migrations", "registered_migrations"]


@dataclass(frozen=True, slots=True)
class Migration:
    """One schema step: ``sql`` is a ``;``-separated script in the common SQL dialect.

    ``postgres`` overrides ``sql`` on PostgreSQL where the dialects differ (types, virtual tables).
    """

    component: str
    version: int
    sql: str
    postgres: str | None = None

    def script_for(self, dialect: str) -> str:
        if dialect == "postgres" and self.postgres is not None:
            return self.postgres
        return self.sql


_registry: dict[tuple[str, int], Migration] = {}


def register_migrations(*migrations: Migration) -> None:
    """Add migrations to the process-wide registry (idempotent for identical migrations)."""
    for migration in migrations:
        key = (migration.component, migration.version)
        existing = _registry.get(key)
        if existing is not None and existing != migration:
            raise ValueError(
                f"migration {migration.component}#{migration.version} is already registered with other SQL; "
                "give the new one a higher version number"
            )
        _registry[key] = migration


def registered_migrations() -> list[Migration]:
    """All registered migrations, ordered by component then version."""
    return [_registry[key] for key in sorted(_registry)]


def split_script(script: str) -> list[str]:
    """Split a migration script into statements (our scripts never put ``;`` inside literals)."""
    return [statement.strip() for statement in script.split(";") if statement.strip()]
