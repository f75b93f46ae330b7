"""``run_turn`` and its shortcuts: wait ≡ save_messages, submit ≡ submit_messages, stream ≡ chat,
``continue_last_turn``, validation and the nesting guard."""

from __future__ import annotations

from typing import Any

import pytest

from ponder import AgentHost
from ponder.testing import ScriptedModel, reply, stall
from ponder.think import ChatResult, SubmissionInspection, Think


class Runner(Think):
    model: Any = None

    def get_model(self) -> Any:
        return type(self).model


def make(model: Any) -> type[Runner]:
    return type("Runner", (Runner,), {"model": model})


def roles(agent: Any) -> list[str]:
    return [m["role"] for m in agent.messages]


def text_of(message: dict[str, Any]) -> str:
    return "".join(p.get("text", "") for p in message["parts"] if p["type"] == "text")


class Callbacks:
    """A ``chat()`` callback object that records which end it was told about."""

    def __init__(self) -> None:
        self.calls: list[str] = []
        self.text = ""
        self.result: ChatResult | None = None
        self.error: str | None = None

    def on_start(self, info: dict[str, Any]) -> None:
        self.calls.append("start")

    def on_event(self, chunk: dict[str, Any]) -> None:
        if self.calls[-1] != "event":
            self.calls.append("event")
        self.text += chunk.get("delta", "") if chunk["type"] == "text-delta" else ""

    def on_done(self, result: ChatResult) -> None:
        self.calls.append("done")
        self.result = result

    def on_error(self, text: str) -> None:
        self.calls.append("error")
        self.error = text

    def on_interrupted(self) -> None:
        self.calls.append("interrupted")


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


async def test_chat_stall_calls_on_interrupted_and_the_answer_is_recovered(host: AgentHost) -> None:
    model = ScriptedModel([reply("Hello", stall(10), "never"), " world."])
    cls = type("Runner", (Runner,), {"model": model, "chat_stream_stall_timeout": 0.2})
    responses: list[ChatResult] = []

    class Hooked(cls):  # type: ignore[valid-type, misc]
        async def on_chat_response(self, result: ChatResult) -> None:
            responses.append(result)

    agent = await host.get_agent(Hooked, "a")
    callbacks = Callbacks()
    result = await agent.chat("hi", callbacks)
    # Neither done nor error: the stalled turn was handed to recovery.
    assert callbacks.calls == ["start", "event", "interrupted"]
    assert result.status == "recovering" and callbacks.text == "Hello"
    assert result.message is not None and text_of(result.message) == "Hello"
    await agent.wait_until_idle()
    # The bounded continuation finished the same message; chat() did not wait for it.
    assert roles(agent) == ["user", "assistant"]
    assert agent.messages[-1]["id"] == result.message["id"]
    assert text_of(agent.messages[-1]) == "Hello world."
    assert callbacks.text == "Hello"  # the continuation's chunks are not this call's
    # on_chat_response reports the outcome once, from the continuation.
    assert [(r.status, r.continuation) for r in responses] == [("completed", True)]


async def test_chat_stall_with_no_budget_left_calls_on_error_with_the_terminal_message(
    host: AgentHost,
) -> None:
    model = ScriptedModel([reply("Hello", stall(10), "never")])
    attrs = {
        "model": model,
        "chat_stream_stall_timeout": 0.2,
        "chat_recovery": {"max_attempts": 0, "terminal_message": "Gave up."},
    }
    agent = await host.get_agent(type("Runner", (Runner,), attrs), "a")
    callbacks = Callbacks()
    result = await agent.chat("hi", callbacks)
    assert callbacks.calls == ["start", "event", "error"]
    assert result.status == "error" and callbacks.error == "Gave up." and result.error == "Gave up."
    await agent.wait_until_idle()
    assert model.calls == 1  # nothing was scheduled
    assert text_of(agent.messages[-1]) == "HelloGave up."


async def test_chat_stall_without_on_interrupted_falls_back_to_on_done(host: AgentHost) -> None:
    model = ScriptedModel([reply("Hi", stall(10), "never"), " there."])
    cls = type("Runner", (Runner,), {"model": model, "chat_stream_stall_timeout": 0.2})
    agent = await host.get_agent(cls, "a")
    done: list[ChatResult] = []

    class OnlyDone:
        def on_done(self, result: ChatResult) -> None:
            done.append(result)

    result = await agent.chat("hi", OnlyDone())
    assert done == [result] and result.status == "recovering"
    await agent.wait_until_idle()
    assert text_of(agent.messages[-1]) == "Hi there."


async def test_chat_stall_declined_by_on_chat_recovery_calls_on_error(host: AgentHost) -> None:
    model = ScriptedModel([reply("Hello", stall(10), "never")])

    class Declines(Runner):
        async def on_chat_recovery(self, ctx: Any) -> str:
            return "persist"

    cls = type("Declines", (Declines,), {"model": model, "chat_stream_stall_timeout": 0.2})
    agent = await host.get_agent(cls, "a")
    callbacks = Callbacks()
    result = await agent.chat("hi", callbacks)
    assert callbacks.calls == ["start", "event", "error"]
    assert result.status == "error" and callbacks.error is not None and "silent" in callbacks.error
    await agent.wait_until_idle()
    assert model.calls == 1 and text_of(agent.messages[-1]) == "Hello"  # the partial is kept, not continued
