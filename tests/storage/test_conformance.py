"""Behaviour every Store backend must have (see conftest.BACKENDS)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import pytest

from ponder.storage import IntegrityError, Migration, Storage, Store, StoreError, register_migrations
from ponder.storage._migrations import _registry


async def test_open_applies_core_schema_once(store: Store) -> None:
    rows = await store.fetch_all(
        "SELECT component, version FROM ponder_migrations ORDER BY component, version"
    )
    assert {"component": "core", "version": 1} in rows
    assert await store.migrate() == 0  # nothing new: a second run applies nothing
    await store.open()  # idempotent
    assert (
        await store.fetch_all("SELECT component, version FROM ponder_migrations ORDER BY component, version")
        == rows
    )


async def test_statements_before_open_fail_clearly(make_store: Callable[[], Store]) -> None:
    fresh = make_store()
    with pytest.raises(StoreError, match="not open"):
        await fresh.fetch_all("SELECT 1")


async def test_migration_registered_later_is_applied_by_migrate(store: Store) -> None:
    migration = Migration("conformance-test", 1, "CREATE TABLE conformance_extra (agent_id TEXT, v INTEGER)")
    register_migrations(migration)
    try:
        assert await store.migrate() == 1
        await store.execute("INSERT INTO conformance_extra VALUES (?, ?)", ("a", 1))
        assert await store.fetch_one("SELECT v FROM conformance_extra") == {"v": 1}
        assert await store.migrate() == 0
    finally:
        _registry.pop(("conformance-test", 1))


def test_conflicting_migration_registration_is_refused() -> None:
    register_migrations(Migration("conformance-conflict", 1, "SELECT 1"))
    try:
        with pytest.raises(ValueError, match="higher version"):
            register_migrations(Migration("conformance-conflict", 1, "SELECT 2"))
    finally:
        _registry.pop(("conformance-conflict", 1))


async def test_data_and_migrations_survive_reopen(make_persistent_store: Callable[[], Store]) -> None:
    make_store = make_persistent_store
    first = make_store()
    await first.open()
    await Storage(first, "agent-a").put("k", {"v": [1, "two", None]})
    await first.close()
    second = make_store()
    await second.open()
    try:
        assert await Storage(second, "agent-a").get("k") == {"v": [1, "two", None]}
        assert await second.migrate() == 0
    finally:
        await second.close()


async def test_key_value_round_trip(store: Store) -> None:
    kv = Storage(store, "agent-a")
    assert await kv.get("missing") is None
    assert await kv.get("missing", 7) == 7
    await kv.put("greeting", "héllo ✓")
    await kv.put("n", 1)
    await kv.put("n", 2)  # replace
    assert await kv.get("greeting") == "héllo ✓"
    assert await kv.get("n") == 2
    assert await kv.delete("n") is True
    assert await kv.delete("n") is False
    assert await kv.get("n") is None


async def test_list_by_prefix_is_ordered_and_exact(store: Store) -> None:
    kv = Storage(store, "agent-a")
    for key in ["b:2", "a:1", "b:1", "b", "c"]:
        await kv.put(key, key)
    assert list(await kv.list("b:")) == ["b:1", "b:2"]
    assert list(await kv.list()) == ["a:1", "b", "b:1", "b:2", "c"]
    assert await kv.list("%") == {}  # a LIKE wildcard is not a wildcard here


async def test_agents_never_see_each_others_rows(store: Store) -> None:
    alice, bob = Storage(store, "agent/alice"), Storage(store, "agent/bob")
    await alice.put("secret", "a")
    await bob.put("secret", "b")
    assert await alice.get("secret") == "a"
    assert await bob.get("secret") == "b"
    assert await alice.list() == {"secret": "a"}
    await alice.delete("secret")
    assert await bob.get("secret") == "b"


async def test_sql_binds_agent_id_for_named_parameters(store: Store) -> None:
    await store.execute("CREATE TABLE IF NOT EXISTS notes (agent_id TEXT, body TEXT)")
    alice, bob = Storage(store, "alice"), Storage(store, "bob")
    await alice.sql("INSERT INTO notes (agent_id, body) VALUES (:agent_id, :body)", body="from alice")
    await bob.sql("INSERT INTO notes (agent_id, body) VALUES (:agent_id, :body)", body="from bob")
    assert await alice.sql("SELECT body FROM notes WHERE agent_id = :agent_id") == [{"body": "from alice"}]
    assert await bob.sql("SELECT body FROM notes WHERE agent_id = ?", "bob") == [{"body": "from bob"}]
    with pytest.raises(TypeError):
        await alice.sql("SELECT 1 WHERE 1 = ? AND :x = 1", 1, x=1)


async def test_transaction_commits_together(store: Store) -> None:
    kv = Storage(store, "a")
    async with kv.transaction():
        await kv.put("x", 1)
        await kv.put("y", 2)
    assert await kv.list() == {"x": 1, "y": 2}


async def test_transaction_rolls_back_on_error(store: Store) -> None:
    kv = Storage(store, "a")
    await kv.put("x", "before")
    with pytest.raises(RuntimeError):
        async with kv.transaction():
            await kv.put("x", "during")
            await kv.put("y", "during")
            raise RuntimeError("boom")
    assert await kv.list() == {"x": "before"}


async def test_nested_transaction_joins_outer(store: Store) -> None:
    kv = Storage(store, "a")
    with pytest.raises(RuntimeError):
        async with kv.transaction():
            await kv.put("outer", 1)
            async with kv.transaction():
                await kv.put("inner", 1)
            raise RuntimeError("roll back both")
    assert await kv.list() == {}


async def test_other_tasks_do_not_land_inside_a_transaction(store: Store) -> None:
    kv = Storage(store, "a")
    inside = asyncio.Event()
    release = asyncio.Event()

    async def long_transaction() -> None:
        with pytest.raises(RuntimeError):
            async with kv.transaction():
                await kv.put("tx", 1)
                inside.set()
                await release.wait()
                raise RuntimeError("rollback")

    async def outsider() -> None:
        await inside.wait()
        write = asyncio.ensure_future(kv.put("outside", 1))
        await asyncio.sleep(0)
        assert not write.done()  # waits for the transaction instead of joining it
        release.set()
        await write

    await asyncio.gather(long_transaction(), outsider())
    assert await kv.list() == {"outside": 1}  # the rollback did not take the outsider's write with it


async def test_unique_violation_is_a_backend_neutral_error(store: Store) -> None:
    await store.execute("INSERT INTO ponder_kv (agent_id, key, value) VALUES ('a', 'k', '1')")
    with pytest.raises(IntegrityError):
        await store.execute("INSERT INTO ponder_kv (agent_id, key, value) VALUES ('a', 'k', '2')")
    assert await store.fetch_one("SELECT value FROM ponder_kv WHERE agent_id = 'a' AND key = 'k'") == {
        "value": "1"
    }


async def test_execute_many_is_atomic(store: Store) -> None:
    rows = [("a", "k1", "1"), ("a", "k2", "2"), ("a", "k1", "dup")]
    with pytest.raises(IntegrityError):
        await store.execute_many("INSERT INTO ponder_kv (agent_id, key, value) VALUES (?, ?, ?)", rows)
    assert await store.fetch_all("SELECT key FROM ponder_kv WHERE agent_id = 'a'") == []
    await store.execute_many("INSERT INTO ponder_kv (agent_id, key, value) VALUES (?, ?, ?)", rows[:2])
    assert len(await store.fetch_all("SELECT key FROM ponder_kv WHERE agent_id = 'a'")) == 2


async def test_execute_reports_changed_rows(store: Store) -> None:
    kv = Storage(store, "a")
    await kv.put("x", 1)
    assert await store.execute("UPDATE ponder_kv SET value = '2' WHERE agent_id = 'a'") == 1
    assert await store.execute("UPDATE ponder_kv SET value = '2' WHERE agent_id = 'nobody'") == 0
