"""Think on ``ponder.sessions``: compaction in a turn, a cache-friendly model input, a windowed wake,
branch switching and search over RPC, session status frames."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from ponder import AgentHost
from ponder.models import TextContent, ToolMessage
from ponder.sessions import Session, create_compact_function, truncation_cutoff
from ponder.testing import ScriptedModel, tool_call
from ponder.think import Think, tool

from .conftest import user


def request_texts(request: Any) -> list[str]:
    texts: list[str] = []
    for message in request.messages:
        if isinstance(message, ToolMessage):
            texts.extend(str(r.output) for r in message.results)
        else:
            texts.extend(p.text for p in getattr(message, "content", ()) if isinstance(p, TextContent))
    return texts


def long_pairs(count: int, words: int = 120) -> list[dict[str, Any]]:
    pairs: list[dict[str, Any]] = []
    for i in range(count):
        pairs.append(user(f"question {i} " + "filler " * words, f"u{i}"))
        pairs.append(
            {"id": f"a{i}", "role": "assistant", "parts": [{"type": "text", "text": f"answer {i} " * words}]}
        )
    return pairs


async def test_compaction_runs_after_a_turn_and_the_next_turn_sees_the_summary(host: Any) -> None:
    prompts: list[str] = []

    async def summarize(prompt: str) -> str:
        prompts.append(prompt)
        return "SUMMARY: the user asked many questions."

    class Compacting(Think):
        model = ScriptedModel(["first reply " * 200, "second reply"])

        def get_model(self) -> Any:
            return type(self).model

        def configure_session(self, session: Session) -> None:
            compact = create_compact_function(summarize, keep_recent_tokens=200, protect_head=1)
            session.on_compaction(compact).compact_after(3_500)

    agent = await host.get_agent(Compacting, "c")
    await agent.add_messages(long_pairs(6), broadcast=False)
    assert agent.session.token_estimate() < 3_500  # below the threshold until the turn's reply
    first = await agent.save_messages("go on")
    assert first.status == "completed"
    assert not any("SUMMARY" in t for t in request_texts(Compacting.model.requests[0]))

    second = await agent.save_messages("and now?")  # waits for the background compaction, bounded
    assert second.status == "completed"
    assert len(prompts) == 1 and "answer 3" in prompts[0]
    texts = request_texts(Compacting.model.requests[1])
    assert any("SUMMARY: the user asked many questions." in t for t in texts)
    assert texts[0].startswith("question 0")  # the protected head stays
    assert not any(t.startswith("answer 3") for t in texts)  # the span is replaced by the summary
    assert texts[-1] == "and now?"
    # Storage keeps every message; only the model's view is compacted.
    assert len(await agent.session.get_history()) == 12 + 4
    assert agent.session.compactions and agent.session.token_estimate() < 3_500


@tool
def fetch_page(n: int) -> str:
    """Fetch a (large) page."""
    return f"page {n}: " + "lorem ipsum dolor sit amet " * 400


async def test_the_model_input_prefix_changes_only_when_the_truncation_cutoff_moves(host: Any) -> None:
    turns = 16
    script: list[Any] = []
    for n in range(turns):
        script += [tool_call("fetch_page", {"n": n}, id=f"call_{n}"), f"read page {n}"]
    cutoffs: list[int] = []

    class Reader(Think):
        model = ScriptedModel(script)
        search_tool = False

        def get_model(self) -> Any:
            return type(self).model

        def get_tools(self) -> Any:
            return [fetch_page]

        async def before_step(self, ctx: Any) -> None:
            cutoffs.append(truncation_cutoff(self.session.path_length, self.truncation_step))

    agent = await host.get_agent(Reader, "r")
    for n in range(turns):
        result = await agent.save_messages(f"read page {n}")
        assert result.status == "completed"
    requests = [[repr(m) for m in r.messages] for r in Reader.model.requests]
    assert len(requests) == 2 * turns == len(cutoffs)
    moves = 0
    for i in range(1, len(requests)):
        before, after = requests[i - 1], requests[i]
        if cutoffs[i] == cutoffs[i - 1]:
            assert after[: len(before)] == before, f"request {i} rewrote the prefix without a cutoff move"
        else:
            moves += 1
            assert after[: len(before)] != before  # the cut rewrote older tool outputs
    assert moves >= 2
    last = request_texts(Reader.model.requests[-1])
    assert any("[truncated" in t for t in last)  # older outputs are cut for the model…
    stored = await agent.session.get_history()
    outputs = [p["output"] for m in stored for p in m["parts"] if p.get("type") == "tool-fetch_page"]
    assert len(outputs) == turns and all(len(o) > 10_000 for o in outputs)  # …never in storage


async def test_branch_switching_and_search_over_rpc(host: Any, connect: Any) -> None:
    class Chat(Think):
        def get_model(self) -> Any:
            return ScriptedModel(["unused"])

    agent = await host.get_agent(Chat, "b")
    await agent.add_messages([user("pick a colour", "u1"), _answer("a1", "blue, like a kingfisher")])
    await agent.add_messages(_answer("a2", "green"), parent_id="u1")
    assert [m["id"] for m in agent.messages] == ["u1", "a2"]
    client = await connect(agent)

    await client.send({"type": "rpc", "id": "c1", "method": "set_active_branch", "args": ["a1"]})
    done = await client.transport.wait_for(lambda f: f.get("type") == "rpc" and f.get("id") == "c1")
    assert done["success"] is True and [m["id"] for m in done["result"]] == ["u1", "a1"]
    frames = client.transport.of_type("cf_agent_chat_messages")
    assert [m["id"] for m in frames[-1]["messages"]] == ["u1", "a1"]
    assert [m["id"] for m in agent.messages] == ["u1", "a1"]
    assert [m["id"] for m in await agent.get_branches("u1")] == ["a1", "a2"]

    await client.send({"type": "rpc", "id": "c2", "method": "search_messages", "args": ["kingfisher"]})
    found = await client.transport.wait_for(lambda f: f.get("type") == "rpc" and f.get("id") == "c2")
    assert [hit["id"] for hit in found["result"]] == ["a1"]

    await client.send({"type": "rpc", "id": "c3", "method": "set_active_branch", "args": ["nope"]})
    bad = await client.transport.wait_for(lambda f: f.get("type") == "rpc" and f.get("id") == "c3")
    assert bad["success"] is False
    assert [m["id"] for m in agent.messages] == ["u1", "a1"]


async def test_session_status_frames_and_the_search_tool(host: Any, connect: Any) -> None:
    model = ScriptedModel([tool_call("search_history", {"query": "kingfisher"}, id="s1"), "Found it."])

    class Chat(Think):
        def get_model(self) -> Any:
            return model

    agent = await host.get_agent(Chat, "s")
    await agent.add_messages([user("a kingfisher flew by", "u0")], broadcast=False)
    client = await connect(agent)
    await client.request("R1", [user("what flew by?", "u1")])
    await client.wait_done("R1")
    assert "search_history" in [t.name for t in model.requests[0].tools]
    part = next(p for p in agent.messages[-1]["parts"] if p.get("toolCallId") == "s1")
    assert "a kingfisher flew by" in part["output"]
    status = client.transport.of_type("cf_agent_session")
    assert status and status[-1]["phase"] == "idle" and status[-1]["tokenEstimate"] > 0


@pytest.mark.slow
async def test_a_40_mib_history_wakes_with_a_windowed_view_and_the_next_turn_works(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'big.sqlite3'}"
    model = ScriptedModel(["still here"])

    class Big(Think):
        def get_model(self) -> Any:
            return model

    big = "x" * (512 * 1024)
    messages = []
    for i in range(40):
        messages.append(user(f"message {i} {big}", f"u{i}"))
        messages.append(_answer(f"a{i}", f"answer {i} {big}"))
    async with AgentHost(url) as host:
        agent = await host.get_agent(Big, "big")
        await agent.add_messages(messages, broadcast=False)
    async with AgentHost(url) as host:  # a cold wake
        agent = await host.get_agent(Big, "big")
        hydration = agent.session.hydration
        assert hydration.truncated and hydration.total_bytes > 40 * 1024 * 1024
        assert hydration.hydrated_bytes <= Big.hydration_byte_budget
        window = len(agent.messages)
        assert 4 <= window < 80
        result = await asyncio.wait_for(agent.save_messages("are you there?"), 30)
        assert result.status == "completed" and result.message["parts"][-1]["text"] == "still here"
        texts = request_texts(model.requests[0])
        assert texts[-1] == "are you there?" and len(texts) <= window + 1
        assert not any(t.startswith("message 0 ") for t in texts)
        assert len(await agent.session.get_history()) == 82


def _answer(message_id: str, text: str) -> dict[str, Any]:
    return {"id": message_id, "role": "assistant", "parts": [{"type": "text", "text": text}]}


async def test_eviction_frees_the_message_index_and_the_next_wake_reads_it_back(tmp_path: Path) -> None:
    model = ScriptedModel(["First answer.", "Second answer."])
    cls = type("Evicted", (Think,), {"get_model": lambda self: model})
    async with AgentHost(f"sqlite:///{tmp_path / 'e.sqlite3'}") as host:
        agent = await host.get_agent(cls, "e")
        await agent.save_messages("one")
        before = agent.messages
        host.idle_timeout = 0.0
        assert host.evict_idle() == 1
        # The evicted instance no longer holds the transcript in memory...
        assert len(agent.session) == 0 and agent.session.active_messages() == []
        # ...and a new instance is built from the store, with the same transcript, and goes on from it.
        host.idle_timeout = 60.0
        again = await host.get_agent(cls, "e")
        assert again is not agent and again.messages == before
        await again.save_messages("two")
        assert [m["role"] for m in again.messages] == ["user", "assistant", "user", "assistant"]
        # An evicted instance someone kept reloads from the store on its next async use instead of failing.
        assert await agent.search_messages("two")
        assert [m["role"] for m in agent.messages] == ["user", "assistant"] * 2
