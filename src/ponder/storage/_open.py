"""Turning a store URL (``--store``, ``PONDER_STORE``) into a :class:`Store`."""

from __future__ import annotations

import os
from pathlib import Path

from ._sqlite import SQLiteStore
from ._store import Store, StoreError

__all__ = ["DEFAULT_STORE_URL", "create_store", "resolve_store_url"]

DEFAULT_STORE_URL = "sqlite:///.ponder/ponder.sqlite3"


def resolve_store_url(url: str | None = None) -> str:
    """The explicit URL, else ``PONDER_STORE``, else the embedded default under ``./.ponder``."""
    return url or os.environ.get("PONDER_STORE") or DEFAULT_STORE_URL


def create_store(url: str | os.PathLike[str] | Store | None = None) -> Store:
    """Build (but do not open) the store a URL names.

    ``sqlite:///relative/path``, ``sqlite:////absolute/path``, ``sqlite:///:memory:`` and plain file
    paths name SQLite stores; ``postgresql://…`` names PostgreSQL.
    """
    if url is not None and not isinstance(url, str | os.PathLike):
        return url
    text = resolve_store_url(os.fspath(url) if url is not None else None)
    if text.startswith("sqlite://"):
        path = text[len("sqlite://") :]
        if not path.startswith("/"):
            raise StoreError(
                f"invalid SQLite store URL {text!r}: use sqlite:///relative.db or sqlite:////abs.db"
            )
        path = path[1:]
        if path in ("", ":memory:"):
            return SQLiteStore(":memory:")
        return SQLiteStore(Path(path))
    if text.startswith(("postgres://", "postgresql://")):
        raise StoreError(
            "PostgreSQL stores are not available in this version of ponder yet; "
            "use a SQLite store (sqlite:///path/to/file.sqlite3)"
        )
    if "://" in text or text.startswith("sqlite:"):
        raise StoreError(f"unknown store URL scheme in {text!r}; expected sqlite:///path")
    return SQLiteStore(Path(text))
