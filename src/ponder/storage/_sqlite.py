"""SQLite store: the embedded default, one WAL database file for a whole host.

Statements run synchronously on the event loop thread. That is deliberate: SQLite in WAL mode
answers the small keyed statements ponder issues in microseconds, far less than handing each one to
a worker thread would cost, and it keeps every statement of a transaction on one connection. With
``synchronous=NORMAL`` a committed transaction survives a ``kill -9`` of the process (it is in the
WAL); only a power loss can drop the last commits.

Transactions span awaits, so they take an asyncio lock: while one task holds a transaction, other
tasks' statements wait for it instead of landing inside it.
"""

from __future__ import annotations

import asyncio
import logging
import os
import sqlite3
import time
from collections.abc import AsyncIterator, Iterable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from ._migrations import registered_migrations, split_script
from ._store import IntegrityError, Params, Row, StoreError

__all__ = ["SQLiteStore"]

logger = logging.getLogger("ponder.storage")


def _dict_factory(cursor: sqlite3.Cursor, row: tuple[Any, ...]) -> Row:
    return {column[0]: value for column, value in zip(cursor.description, row, strict=True)}


class SQLiteStore:
    """A :class:`~ponder.storage.Store` on one SQLite file (or ``":memory:"``)."""

    dialect = "sqlite"

    def __init__(self, path: str | os.PathLike[str], *, busy_timeout: float = 10.0) -> None:
        self.path = str(path)
        self.url = "sqlite:///:memory:" if self.path == ":memory:" else f"sqlite:///{self.path}"
        self.busy_timeout = busy_timeout
        self._conn: sqlite3.Connection | None = None
        self._lock = asyncio.Lock()
        self._tx_owner: asyncio.Task[Any] | None = None
        self._migrated: set[tuple[str, int]] = set()

    def __repr__(self) -> str:
        return f"SQLiteStore({self.path!r})"

    # -- lifecycle -------------------------------------------------------------------------------

    async def open(self) -> None:
        if self._conn is not None:
            return
        if self.path != ":memory:":
            parent = Path(self.path).parent
            try:
                parent.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise StoreError(f"cannot create the store directory {parent}: {exc}") from exc
        try:
            conn = sqlite3.connect(
                self.path, isolation_level=None, check_same_thread=False, timeout=self.busy_timeout
            )
            conn.row_factory = _dict_factory
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=NORMAL")
            conn.execute("PRAGMA foreign_keys=ON")
        except sqlite3.Error as exc:
            raise StoreError(f"cannot open the SQLite store at {self.path}: {exc}") from exc
        self._conn = conn
        await self.migrate()

    async def close(self) -> None:
        conn, self._conn = self._conn, None
        if conn is None:
            return
        async with self._lock:
            try:
                conn.execute("PRAGMA wal_checkpoint(PASSIVE)")
            except sqlite3.Error:  # another process may hold the WAL; closing is still safe
                pass
            conn.close()

    async def migrate(self) -> int:
        conn = self._connection()
        pending = [m for m in registered_migrations() if (m.component, m.version) not in self._migrated]
        if not pending:
            return 0
        applied = 0
        async with self._locked():
            conn.execute(
                "CREATE TABLE IF NOT EXISTS ponder_migrations ("
                " component TEXT NOT NULL, version INTEGER NOT NULL, applied_at REAL NOT NULL,"
                " PRIMARY KEY (component, version))"
            )
            done = {(r["component"], r["version"]) for r in conn.execute("SELECT * FROM ponder_migrations")}
            for migration in pending:
                key = (migration.component, migration.version)
                if key not in done:
                    conn.execute("BEGIN IMMEDIATE")
                    try:
                        # Re-check inside the write lock: another process may have migrated meanwhile.
                        row = conn.execute(
                            "SELECT 1 FROM ponder_migrations WHERE component = ? AND version = ?", key
                        ).fetchone()
                        if row is None:
                            for statement in split_script(migration.script_for(self.dialect)):
                                conn.execute(statement)
                            conn.execute(
                                "INSERT INTO ponder_migrations (component, version, applied_at) VALUES (?, ?, ?)",
                                (*key, time.time()),
                            )
                            applied += 1
                            logger.debug("applied migration %s#%s", *key)
                        conn.execute("COMMIT")
                    except BaseException:
                        conn.execute("ROLLBACK")
                        raise
                self._migrated.add(key)
        return applied

    # -- statements ------------------------------------------------------------------------------

    def _connection(self) -> sqlite3.Connection:
        if self._conn is None:
            raise StoreError("the store is not open; call `await store.open()` first")
        return self._conn

    def _in_own_transaction(self) -> bool:
        return self._tx_owner is not None and self._tx_owner is asyncio.current_task()

    @asynccontextmanager
    async def _locked(self) -> AsyncIterator[None]:
        if self._in_own_transaction():
            yield
            return
        async with self._lock:
            yield

    def _run(self, method: str, sql: str, params: Any) -> Any:
        conn = self._connection()
        try:
            if method == "many":
                return conn.executemany(sql, params)
            cursor = conn.execute(sql, params)
            if method == "all":
                return cursor.fetchall()
            if method == "one":
                return cursor.fetchone()
            return cursor.rowcount
        except sqlite3.IntegrityError as exc:
            raise IntegrityError(str(exc)) from exc

    async def _call(self, method: str, sql: str, params: Any) -> Any:
        # Outside a transaction nothing awaits between check and statement, so no lock is needed
        # unless another task is inside a transaction right now.
        if self._lock.locked() and not self._in_own_transaction():
            async with self._lock:
                return self._run(method, sql, params)
        return self._run(method, sql, params)

    async def execute(self, sql: str, params: Params = ()) -> int:
        return await self._call("execute", sql, params)

    async def execute_many(self, sql: str, rows: Iterable[Params]) -> None:
        async with self.transaction():
            self._run("many", sql, rows)

    async def fetch_all(self, sql: str, params: Params = ()) -> list[Row]:
        return await self._call("all", sql, params)

    async def fetch_one(self, sql: str, params: Params = ()) -> Row | None:
        return await self._call("one", sql, params)

    @asynccontextmanager
    async def transaction(self) -> AsyncIterator[None]:
        if self._in_own_transaction():  # nested: join the outer transaction
            yield
            return
        conn = self._connection()
        async with self._lock:
            self._tx_owner = asyncio.current_task()
            conn.execute("BEGIN IMMEDIATE")
            try:
                yield
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            else:
                conn.execute("COMMIT")
            finally:
                self._tx_owner = None
