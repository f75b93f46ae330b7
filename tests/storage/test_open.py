from __future__ import annotations

from pathlib import Path

import pytest

from ponder.storage import DEFAULT_STORE_URL, SQLiteStore, StoreError, create_store, resolve_store_url


def test_default_store_is_under_dot_ponder(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PONDER_STORE", raising=False)
    assert resolve_store_url() == DEFAULT_STORE_URL
    store = create_store()
    assert isinstance(store, SQLiteStore)
    assert Path(store.path) == Path(".ponder/ponder.sqlite3")


def test_environment_variable_then_explicit_url_win(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PONDER_STORE", "sqlite:///from-env.db")
    assert create_store().path == "from-env.db"  # type: ignore[attr-defined]
    assert create_store("sqlite:////abs/explicit.db").path == "/abs/explicit.db"  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("url", "path"),
    [
        ("sqlite:///rel/x.db", "rel/x.db"),
        ("sqlite:////tmp/x.db", "/tmp/x.db"),
        ("sqlite:///:memory:", ":memory:"),
        ("plain/file.sqlite3", "plain/file.sqlite3"),
    ],
)
def test_sqlite_urls(url: str, path: str) -> None:
    store = create_store(url)
    assert isinstance(store, SQLiteStore)
    assert str(store.path) == path


def test_store_objects_pass_through() -> None:
    store = SQLiteStore(":memory:")
    assert create_store(store) is store


@pytest.mark.parametrize("url", ["mysql://x/y", "sqlite:relative"])
def test_bad_urls_say_what_is_expected(url: str) -> None:
    with pytest.raises(StoreError, match="sqlite:///"):
        create_store(url)


def test_postgres_url_explains_it_is_not_available_yet() -> None:
    with pytest.raises(StoreError, match="SQLite"):
        create_store("postgresql://localhost/db")


async def test_unwritable_location_is_a_clear_error(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    with pytest.raises(StoreError, match="cannot"):
        await SQLiteStore(blocker / "sub" / "x.db").open()
