"""``run_turn`` and its shortcuts: wait ≡ save_messages, submit ≡ submit_messages, stream ≡ chat,
``continue_last_turn``, validation and the nesting guard."""

from __future__ import annotations

from typing import Any

import pytest

from ponder import AgentHost
from ponder.testing import ScriptedModel
from ponder.think import ChatResult, SubmissionInspection, Think


class Runner(Think):
    model: Any = None

    def get_model(self) -> Any:
        return type(self).model


def make(model: Any) -> type[Runner]:
    return type("Runner", (Runner,), {"model": model})


def roles(agent: Any) -> list[str]:
    return [m["role"] for m in agent.messages]


async def test_wait_mode_is_save_messages(host: AgentHost) -> None:
    agent = await host.get_agent(make(ScriptedModel(["one", "two"])), "a")
    result = await agent.run_turn("hi")
    assert isinstance(result, ChatResult) and result.status == "completed"
    assert result.message is not None and result.message["id"] == agent.messages[-1]["id"]
    second = await agent.run_turn(lambda current: [*current[-1:], {"id": "u2", "role": "user", "parts": []}])
    assert second.status == "completed" and roles(agent) == ["user", "assistant", "user", "assistant"]


async def test_submit_mode_returns_the_stored_submission(host: AgentHost) -> None:
    agent = await host.get_agent(make(ScriptedModel(["queued reply"])), "a")
    sub = await agent.run_turn("later", mode="submit", idempotency_key="k", metadata={"a": 1})
    assert isinstance(sub, SubmissionInspection) and sub.accepted and sub.idempotency_key == "k"
    done = await agent.wait_for_submission(sub.submission_id, timeout=5)
    assert done is not None and done.status == "completed"
    assert roles(agent) == ["user", "assistant"]


async def test_stream_mode_is_chat(host: AgentHost) -> None:
    agent = await host.get_agent(make(ScriptedModel(["streamed words here"])), "a")
    chunks: list[dict[str, Any]] = []
    result = await agent.run_turn("hi", mode="stream", callback=chunks.append)
    assert result.status == "completed"
    deltas = "".join(c.get("delta", "") for c in chunks if c["type"] == "text-delta")
    assert deltas == "streamed words here"


async def test_empty_input_skips_and_validation(host: AgentHost) -> None:
    model = ScriptedModel([])
    agent = await host.get_agent(make(model), "a")
    assert (await agent.run_turn([])).status == "skipped"
    assert (await agent.run_turn(None)).status == "skipped"
    assert model.calls == 0
    with pytest.raises(ValueError, match="mode"):
        await agent.run_turn("x", mode="later")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="not both"):
        await agent.run_turn("x", continuation=True)
    with pytest.raises(ValueError, match="submitted"):
        await agent.run_turn(continuation=True, mode="submit")
    with pytest.raises(ValueError, match="mode='submit'"):
        await agent.run_turn("x", idempotency_key="k")
    with pytest.raises(ValueError):
        await agent.run_turn([], mode="submit")
    with pytest.raises(ValueError, match="function"):
        await agent.run_turn(lambda current: current, mode="submit")
    assert agent.messages == [] and await agent.list_submissions() == []


async def test_continue_last_turn(host: AgentHost) -> None:
    model = ScriptedModel(["First part.", " Second part."])
    agent = await host.get_agent(make(model), "a")
    skipped = await agent.continue_last_turn()
    assert skipped.status == "skipped" and skipped.continuation and skipped.request_id == ""
    await agent.save_messages("go")
    result = await agent.run_turn(continuation=True)
    assert result.status == "completed" and result.continuation
    assert roles(agent) == ["user", "assistant"]  # the same assistant message grew
    text = "".join(p.get("text", "") for p in agent.messages[-1]["parts"] if p["type"] == "text")
    assert "First part." in text and "Second part." in text


async def test_continue_last_turn_body_defaults_to_last_body(host: AgentHost) -> None:
    seen: list[dict[str, Any]] = []

    class BodyRunner(Runner):
        async def before_turn(self, ctx: Any) -> None:
            seen.append(dict(ctx.body))

    cls = type("BodyRunner", (BodyRunner,), {"model": ScriptedModel(default="ok")})
    agent = await host.get_agent(cls, "a")
    await agent._config.set("body", {"locale": "pt"})
    await agent.save_messages("hi")
    await agent.continue_last_turn()
    await agent.continue_last_turn({"locale": "en"})
    assert seen[-2:] == [{"locale": "pt"}, {"locale": "en"}]


async def test_concurrent_waits_queue_in_order(host: AgentHost) -> None:
    import asyncio

    agent = await host.get_agent(make(ScriptedModel(default="ok", chunk_delay=0.005)), "a")
    results = await asyncio.gather(*(agent.save_messages(f"m{i}") for i in range(4)))
    assert all(r.status == "completed" for r in results)
    users = [m["parts"][0]["text"] for m in agent.messages if m["role"] == "user"]
    assert users == ["m0", "m1", "m2", "m3"]
