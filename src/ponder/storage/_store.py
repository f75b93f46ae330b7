"""The ``Store`` protocol: the one database a host keeps every agent's rows in.

Callers speak a small async API (``execute`` / ``fetch_all`` / ``fetch_one`` / ``transaction``) with
``?`` positional or ``:name`` named parameters, and the common subset of SQL that SQLite and
PostgreSQL share. A backend translates parameters and dialect details, so the layers above never
know which database they run on.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from contextlib import AbstractAsyncContextManager
from typing import Any, Protocol, runtime_checkable

__all__ = ["IntegrityError", "Params", "Row", "Store", "StoreError"]

Row = dict[str, Any]
Params = Sequence[Any] | Mapping[str, Any]


class StoreError(RuntimeError):
    """A store could not be opened or a statement failed in a way the caller should report."""


class IntegrityError(StoreError):
    """A statement broke a unique or foreign-key constraint (the same on every backend)."""


@runtime_checkable
class Store(Protocol):
    """An async SQL store shared by every agent of a host; rows are scoped by ``agent_id``."""

    url: str
    dialect: str

    async def open(self) -> None:
        """Connect and apply pending migrations. Idempotent."""

    async def close(self) -> None:
        """Checkpoint and disconnect. Idempotent."""

    async def migrate(self) -> int:
        """Apply migrations registered since the last call; return how many ran."""

    async def execute(self, sql: str, params: Params = ()) -> int:
        """Run one statement; return the number of rows it changed."""

    async def execute_many(self, sql: str, rows: Iterable[Params]) -> None:
        """Run one statement once per parameter row, atomically."""

    async def fetch_all(self, sql: str, params: Params = ()) -> list[Row]:
        """Run a query and return every row as a dict."""

    async def fetch_one(self, sql: str, params: Params = ()) -> Row | None:
        """Run a query and return its first row, or ``None``."""

    def transaction(self) -> AbstractAsyncContextManager[None]:
        """A transaction: statements of the current task inside it commit together or not at all."""
