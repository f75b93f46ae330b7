"""Durable storage: one SQL store for a whole host, every row scoped by agent id."""

from . import _schema as _schema  # registers the runtime's own tables
from ._handle import Storage
from ._migrations import Migration, register_migrations, registered_migrations
from ._open import DEFAULT_STORE_URL, create_store, resolve_store_url
from ._sqlite import SQLiteStore
from ._store import IntegrityError, Params, Row, Store, StoreError

__all__ = [
    "DEFAULT_STORE_URL",
    "IntegrityError",
    "Migration",
    "Params",
    "Row",
    "SQLiteStore",
    "Storage",
    "Store",
    "StoreError",
    "create_store",
    "register_migrations",
    "registered_migrations",
    "resolve_store_url",
]
