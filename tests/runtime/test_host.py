from __future__ import annotations

import asyncio

import pytest

from ponder import Agent, AgentHost

from .agents import Notebook, Parent


async def test_one_live_instance_per_name(host: AgentHost) -> None:
    Notebook.starts = 0
    first, second, other = await asyncio.gather(
        host.get_agent(Notebook, "alice"), host.get_agent(Notebook, "alice"), host.get_agent(Notebook, "bob")
    )
    assert first is second
    assert first is not other
    assert Notebook.starts == 2  # on_start once per instance, even when asked concurrently
    assert first.id == "notebook/alice"
    assert first.name == "alice"


async def test_initial_state_is_private_to_each_instance(host: AgentHost) -> None:
    alice = await host.get_agent(Notebook, "alice")
    bob = await host.get_agent(Notebook, "bob")
    alice.state["notes"].append("mutated in memory")
    assert bob.state == {"notes": []}


async def test_state_persists_across_hosts(store_url: str) -> None:
    async with AgentHost(store_url) as first:
        agent = await first.get_agent(Notebook, "alice")
        await agent.add("one")
        await agent.add("two")
    async with AgentHost(store_url) as second:
        again = await second.get_agent(Notebook, "alice")
        assert again.state == {"notes": ["one", "two"]}
        other = await second.get_agent(Notebook, "bob")
        assert other.state == {"notes": []}


async def test_agents_do_not_see_each_others_state_or_rows(host: AgentHost) -> None:
    alice = await host.get_agent(Notebook, "alice")
    bob = await host.get_agent(Notebook, "bob")
    await alice.add("alice's secret")
    await alice.storage.put("private", "alice")
    await bob.storage.put("private", "bob")
    assert bob.state == {"notes": []}
    assert await bob.storage.get("private") == "bob"
    assert await alice.storage.list() == {"private": "alice"}


async def test_idle_instances_are_evicted_and_rebuilt_from_the_store(store_url: str) -> None:
    async with AgentHost(store_url, idle_timeout=3600) as host:
        host.idle_timeout = 0.0  # evict on the next sweep, which this test runs itself
        agent = await host.get_agent(Notebook, "alice")
        await agent.add("kept")
        with agent.keep_alive():
            assert host.evict_idle() == 0  # work in progress keeps it in memory
        assert host.evict_idle() == 1
        assert host.live_agents == []
        rebuilt = await host.get_agent(Notebook, "alice")
        assert rebuilt is not agent
        assert rebuilt.state == {"notes": ["kept"]}


async def test_agents_with_background_work_are_not_evicted(store_url: str) -> None:
    async with AgentHost(store_url, idle_timeout=3600) as host:
        host.idle_timeout = 0.0
        agent = await host.get_agent(Notebook, "alice")
        release = asyncio.Event()
        task = agent.create_task(release.wait())
        assert host.evict_idle() == 0
        release.set()
        await task
        assert host.evict_idle() == 1


async def test_failing_on_start_is_reported_and_retried(host: AgentHost) -> None:
    class Flaky(Agent):
        failures = 1

        async def on_start(self) -> None:
            if type(self).failures:
                type(self).failures -= 1
                raise RuntimeError("cannot start yet")

    with pytest.raises(RuntimeError, match="cannot start yet"):
        await host.get_agent(Flaky, "x")
    assert host.live_agents == []
    assert (await host.get_agent(Flaky, "x")).name == "x"


async def test_sub_agents_have_their_own_storage_and_id(host: AgentHost) -> None:
    parent = await host.get_agent(Parent, "p")
    child = await parent.child("c1")
    assert child.id == "parent/p/sub/child/c1"
    assert child.state == {"role": "child"}
    await child.storage.put("k", "child")
    await parent.storage.put("k", "parent")
    assert await child.storage.get("k") == "child"
    assert await parent.child("c1") is child
    assert await child.get_parent() is parent
    assert await parent.get_parent() is None
    # A stored sub-agent can be woken from its id alone (what recovery does).
    host.evict_idle()
    assert await host.get_agent_by_id(child.id) is child


async def test_unknown_ids_wake_nothing(host: AgentHost) -> None:
    assert await host.get_agent_by_id("nobody/none") is None


def test_registry_refuses_ambiguous_or_reserved_names() -> None:
    class Sub(Agent):
        pass

    host = AgentHost(":memory:")
    with pytest.raises(ValueError, match="reserved"):
        host.register(Sub)

    def make() -> type[Agent]:
        class Clash(Agent):
            pass

        return Clash

    first = make()
    host.register(first)

    class Clash(Agent):
        pass

    with pytest.raises(ValueError, match="rename one"):
        host.register(Clash)
    with pytest.raises(TypeError):
        host.register(object)  # type: ignore[arg-type]


async def test_names_must_be_non_empty(host: AgentHost) -> None:
    with pytest.raises(ValueError, match="non-empty"):
        await host.get_agent(Notebook, "")


async def test_closed_host_cannot_restart(store_url: str) -> None:
    host = AgentHost(store_url)
    await host.start()
    await host.close()
    with pytest.raises(RuntimeError, match="closed"):
        await host.start()
