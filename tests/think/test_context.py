"""Think wired to ``ponder.context``: blocks in a frozen system prompt, block tools, reminders, config, and
context-window overflow handling (reactive compact-and-retry, proactive compaction)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from ponder import AgentHost, ContextBlock
from ponder.context import REMINDER_PREAMBLE, ConfigError
from ponder.models import TextContent, ToolMessage, UserMessage
from ponder.sessions import Session, create_compact_function
from ponder.testing import ScriptedModel, error, tool_call
from ponder.think import Think, tool

from .test_sessions import long_pairs, request_texts

OVERFLOW = (
    "This model's maximum context length is 128000 tokens. However, your messages resulted in 130512 tokens. "
    "(code: context_length_exceeded)"
)


def memory_agent(model: ScriptedModel, name: str = "Memo", **attrs: Any) -> type[Think]:
    class Memo(Think):
        def get_model(self) -> Any:
            return type(self).model

        def get_system_prompt(self) -> str:
            return "You are Memo."

        def configure_context(self) -> list[ContextBlock]:
            return [ContextBlock("memory", description="Learned facts", max_tokens=50)]

    Memo.model = model  # type: ignore[attr-defined]
    for key, value in attrs.items():
        setattr(Memo, key, value)
    Memo.__name__ = Memo.__qualname__ = name
    return Memo


def write(content: str, call_id: str | None = None) -> Any:
    return tool_call("set_context", {"label": "memory", "content": content}, id=call_id)


async def started(url: str) -> AgentHost:
    host = AgentHost(url, shutdown_timeout=2.0)
    await host.start()
    return host


async def test_no_blocks_keeps_the_plain_system_prompt_and_no_context_tools(host: Any) -> None:
    model = ScriptedModel(["hi"])

    class Plain(Think):
        def get_model(self) -> Any:
            return model

    agent = await host.get_agent(Plain, "p")
    assert (await agent.run_turn("hello")).status == "completed"
    assert model.requests[0].system == "You are a helpful assistant."
    assert "set_context" not in [t.name for t in model.requests[0].tools]
    assert agent.context.blocks == []


async def test_a_memory_write_shows_only_after_a_rebuild_and_survives_a_restart(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'ctx.sqlite3'}"
    first = ScriptedModel([write("The user likes green tea."), "Noted.", "Hello again."])
    cls = memory_agent(first)
    host = await started(url)
    try:
        agent = await host.get_agent(cls, "m")
        result = await agent.run_turn("remember: I like green tea")
        assert result.status == "completed"
        assert "set_context" in [t.name for t in first.requests[0].tools]
        parts = agent.messages[-1]["parts"]
        assert any(p.get("state") == "output-available" and "Usage:" in str(p.get("output")) for p in parts)
        frozen = first.requests[0].system
        assert frozen.startswith("You are Memo.\n\n") and "MEMORY (Learned facts)" in frozen
        assert "green tea" not in frozen
        assert first.requests[1].system == frozen  # the tool step: same bytes
        await agent.run_turn("hi")
        assert first.requests[2].system == frozen
        assert (await agent.context.snapshot())[0]["content"] == "The user likes green tea."
    finally:
        await host.close()

    second = ScriptedModel(["Back.", "Rebuilt."])
    cls.model = second  # type: ignore[attr-defined]
    host = await started(url)
    try:
        agent = await host.get_agent(cls, "m")
        await agent.run_turn("after restart")
        assert second.requests[0].system == frozen  # byte-identical across the restart
        rebuilt = await agent.refresh_system_prompt()
        assert "The user likes green tea." in rebuilt
        await agent.run_turn("after rebuild")
        assert second.requests[1].system == rebuilt
    finally:
        await host.close()


async def test_a_write_over_max_tokens_is_a_tool_error_and_changes_nothing(host: Any) -> None:
    model = ScriptedModel([write("word " * 200), "Too long, sorry."])
    agent = await host.get_agent(memory_agent(model), "m")
    frozen = await agent.context.frozen_prompt()
    assert (await agent.run_turn("remember a lot")).status == "completed"
    errors = [p for p in agent.messages[-1]["parts"] if p.get("state") == "output-error"]
    assert len(errors) == 1 and "exceeds max_tokens" in errors[0]["errorText"]
    results = [r for m in model.requests[1].messages if isinstance(m, ToolMessage) for r in m.results]
    assert len(results) == 1 and "exceeds max_tokens" in (results[0].error or "")
    assert (await agent.context.snapshot())[0]["content"] == ""
    assert await agent.context.frozen_prompt() == frozen
    assert model.requests[1].system == frozen


class Today:
    value = "Monday"

    def get(self) -> str:
        return Today.value


async def test_a_remind_block_change_is_sent_once_as_a_reminder_and_never_stored(host: Any) -> None:
    Today.value = "Monday"
    model = ScriptedModel(["one", "two", "three"])

    class Dated(Think):
        def get_model(self) -> Any:
            return model

        async def configure_context(self) -> list[ContextBlock]:
            return [ContextBlock("today", provider=Today(), when_changed="remind")]

    agent = await host.get_agent(Dated, "d")
    await agent.run_turn("first")
    frozen = model.requests[0].system
    assert "Monday" in frozen
    assert not any(REMINDER_PREAMBLE in t for t in request_texts(model.requests[0]))

    Today.value = "Tuesday"
    await agent.run_turn("second")
    last = model.requests[1].messages[-1]
    assert isinstance(last, UserMessage)
    texts = [p.text for p in last.content if isinstance(p, TextContent)]
    assert texts[0] == "second" and texts[1].startswith(REMINDER_PREAMBLE) and "Tuesday" in texts[1]
    assert model.requests[1].system == frozen

    await agent.run_turn("third")
    assert not any(REMINDER_PREAMBLE in t for t in request_texts(model.requests[2]))
    assert model.requests[2].system == frozen
    stored = str(await agent.session.get_history())
    assert REMINDER_PREAMBLE not in stored and "Tuesday" not in stored


async def test_session_declared_blocks_are_merged_after_configure_context(host: Any) -> None:
    class Merged(Think):
        def get_model(self) -> Any:
            return ScriptedModel(["ok"])

        def configure_context(self) -> list[ContextBlock]:
            return [ContextBlock("memory", description="primary")]

        def configure_session(self, session: Session) -> None:
            session.with_context("memory", description="legacy").with_context("notes", max_tokens=100)

    agent = await host.get_agent(Merged, "x")
    blocks = agent.context.blocks
    assert [(b.label, b.description) for b in blocks] == [("memory", "primary"), ("notes", None)]


async def test_a_user_tool_named_like_a_context_tool_wins(host: Any) -> None:
    model = ScriptedModel([tool_call("set_context", {"label": "memory", "content": "x"}), "done"])

    @tool
    def set_context(label: str, content: str) -> str:
        """Mine."""
        return "mine"

    cls = memory_agent(model, get_tools=lambda self: [set_context])
    agent = await host.get_agent(cls, "t")
    await agent.run_turn("go")
    outputs = [p.get("output") for p in agent.messages[-1]["parts"] if p.get("toolCallId")]
    assert outputs == ["mine"]
    assert (await agent.context.snapshot())[0]["content"] == ""


async def test_config_survives_a_restart_and_a_bad_value_changes_nothing(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'cfg.sqlite3'}"
    cls = memory_agent(ScriptedModel([]), name="Configured")
    host = await started(url)
    try:
        agent = await host.get_agent(cls, "c")
        assert agent.get_config() == {}
        await agent.configure({"tier": "large", "persona": {"name": "Ada"}})
        with pytest.raises(ConfigError):
            await agent.configure({"bad": {1, 2}})
        copy = agent.get_config()
        copy["tier"] = "mutated"
        assert agent.get_config()["tier"] == "large"
        await agent.clear_messages()
        assert agent.get_config() == {"tier": "large", "persona": {"name": "Ada"}}
    finally:
        await host.close()
    host = await started(url)
    try:
        agent = await host.get_agent(cls, "c")
        assert agent.get_config() == {"tier": "large", "persona": {"name": "Ada"}}
    finally:
        await host.close()


def compacting(model: ScriptedModel, calls: list[int] | None = None, **attrs: Any) -> type[Think]:
    async def summarize(prompt: str) -> str:
        return "SUMMARY of the early conversation."

    stock = create_compact_function(summarize, keep_recent_tokens=200, protect_head=1)

    async def compact(view: list[dict[str, Any]]) -> Any:
        if calls is not None:
            calls.append(len(view))
        return await stock(view)

    class Overflowing(Think):
        def get_model(self) -> Any:
            return model

        def configure_session(self, session: Session) -> None:
            session.on_compaction(compact)

    for key, value in attrs.items():
        setattr(Overflowing, key, value)
    return Overflowing


async def test_reactive_overflow_compacts_once_and_the_turn_succeeds(host: Any) -> None:
    model = ScriptedModel([error(OVERFLOW, status_code=400), "Answered after compaction."])
    cls = compacting(model, context_overflow={"reactive": True})
    agent = await host.get_agent(cls, "r")
    await agent.add_messages(long_pairs(6), broadcast=False)
    result = await agent.run_turn("and now?")
    assert result.status == "completed", result.error
    assert len(agent.session.compactions) == 1
    assert len(model.requests) == 2
    assert any("SUMMARY" in t for t in request_texts(model.requests[1]))
    parts = agent.messages[-1]["parts"]
    assert [p["type"] for p in parts] == ["step-start", "text"]  # the failed step left nothing behind
    assert parts[-1]["text"] == "Answered after compaction."


async def test_reactive_overflow_retries_only_max_retries_times(host: Any) -> None:
    model = ScriptedModel([error(OVERFLOW, status_code=400)] * 3)
    cls = compacting(model, context_overflow={"reactive": True, "max_retries": 1})
    agent = await host.get_agent(cls, "r2")
    await agent.add_messages(long_pairs(6), broadcast=False)
    result = await agent.run_turn("and now?")
    assert result.status == "error" and "context_length_exceeded" in (result.error or "")
    assert len(model.requests) == 2


async def test_reactive_overflow_without_a_compaction_function_is_a_clear_error(host: Any) -> None:
    model = ScriptedModel([error(OVERFLOW, status_code=400)])
    cls = memory_agent(model, name="NoCompaction", context_overflow={"reactive": True})
    agent = await host.get_agent(cls, "n")
    result = await agent.run_turn("hi")
    assert result.status == "error"
    assert "no compaction function" in (result.error or "")
    assert len(model.requests) == 1


async def test_overflow_is_not_handled_when_the_policy_is_off(host: Any) -> None:
    model = ScriptedModel([error(OVERFLOW, status_code=400)])
    agent = await host.get_agent(compacting(model), "off")
    await agent.add_messages(long_pairs(6), broadcast=False)
    result = await agent.run_turn("hi")
    assert result.status == "error" and "context_length_exceeded" in (result.error or "")
    assert agent.session.compactions == []


async def test_a_bad_overflow_policy_fails_at_start(host: Any) -> None:
    cls = memory_agent(ScriptedModel([]), name="BadPolicy", context_overflow={"reactiv": True})
    with pytest.raises(ValueError, match="reactiv"):
        await host.get_agent(cls, "b")


async def test_proactive_compaction_fires_at_the_threshold_at_most_max_compactions_times(host: Any) -> None:
    @tool
    def noop() -> str:
        """Do nothing."""
        return "ok"

    calls: list[int] = []
    model = ScriptedModel([tool_call("noop", {}) for _ in range(4)] + ["done"])
    policy = {"proactive": {"max_input_tokens": 100, "headroom": 0.5, "max_compactions": 2}}
    cls = compacting(model, calls, context_overflow=policy, get_tools=lambda self: [noop])
    agent = await host.get_agent(cls, "p")
    await agent.add_messages(long_pairs(6), broadcast=False)
    result = await agent.run_turn("go")
    assert result.status == "completed", result.error
    assert len(model.requests) == 5
    assert len(calls) == 2  # steps 1 and 2 compact (step 0 has no measurement yet); then the budget is spent
    assert len(agent.session.compactions) == 1  # the second pass found nothing new to compact
    assert any("SUMMARY" in t for t in request_texts(model.requests[1]))
    assert not any("SUMMARY" in t for t in request_texts(model.requests[0]))


async def test_proactive_compaction_stays_below_the_threshold(host: Any) -> None:
    calls: list[int] = []
    model = ScriptedModel(["a", "b"])
    cls = compacting(model, calls, context_overflow={"proactive": {"max_input_tokens": 1_000_000}})
    agent = await host.get_agent(cls, "q")
    await agent.run_turn("one")
    await agent.run_turn("two")
    assert calls == []


async def test_system_prompt_bytes_change_only_at_rebuilds_over_ten_turns(host: Any) -> None:
    script: list[Any] = []
    for turn in range(10):
        script += [write(f"fact {turn}"), f"reply {turn}"]
    model = ScriptedModel(script)

    async def summarize(prompt: str) -> str:
        return "SUMMARY"

    class Ten(Think):
        def get_model(self) -> Any:
            return model

        def configure_context(self) -> list[ContextBlock]:
            return [ContextBlock("memory", max_tokens=500)]

        def configure_session(self, session: Session) -> None:
            session.on_compaction(create_compact_function(summarize, keep_recent_tokens=10, protect_head=1))

    agent = await host.get_agent(Ten, "ten")
    for turn in range(10):
        if turn == 4:
            await agent.refresh_system_prompt()
        if turn == 7:
            assert await agent.session.compact() is not None  # a compaction rebuilds before the next turn
        await agent.run_turn(f"turn {turn} " + "words " * 30)
    systems = [r.system for r in model.requests]
    assert len(systems) == 20
    segments = [systems[0:8], systems[8:14], systems[14:20]]
    for segment in segments:
        assert len(set(segment)) == 1
    assert len({segment[0] for segment in segments}) == 3
    assert "fact" not in segments[0][0]
    assert "fact 3" in segments[1][0] and "fact 4" not in segments[1][0]
    assert "fact 6" in segments[2][0] and "fact 7" not in segments[2][0]


async def test_a_compaction_rebuilds_the_stored_prompt_before_any_next_turn(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'rebuild.sqlite3'}"
    cls = compacting(ScriptedModel([]))
    cls.configure_context = lambda self: [ContextBlock("memory")]  # type: ignore[method-assign]
    host = await started(url)
    try:
        agent = await host.get_agent(cls, "c")
        frozen = await agent.context.frozen_prompt()
        await agent.context.set_block("memory", "remember me")
        await agent.add_messages(long_pairs(6), broadcast=False)
        assert await agent.context.frozen_prompt() == frozen
        assert await agent.session.compact() is not None  # its event rebuilds in the background
    finally:
        await host.close()
    host = await started(url)
    try:
        agent = await host.get_agent(cls, "c")
        assert "remember me" in await agent.context.frozen_prompt()
    finally:
        await host.close()


# -- blocks for clients: the get_context_blocks RPC and ponder_context_blocks frames ----------------------


async def test_clients_get_the_blocks_on_connect_by_rpc_and_live_after_a_write(
    host: Any, connect: Any
) -> None:
    model = ScriptedModel([write("The user likes green tea.", "w1"), "Noted."])
    agent = await host.get_agent(memory_agent(model), "live")
    client = await connect(agent)
    first = await client.transport.wait_for(lambda f: f.get("type") == "ponder_context_blocks")
    assert [(b["label"], b["content"], b["max_tokens"], b["writable"]) for b in first["blocks"]] == [
        ("memory", "", 50, True)
    ]
    assert first["blocks"][0]["description"] == "Learned facts"

    assert (await agent.run_turn("remember: I like green tea")).status == "completed"
    written = await client.transport.wait_for(
        lambda f: f.get("type") == "ponder_context_blocks" and f["blocks"][0]["content"] != ""
    )
    assert written["blocks"][0]["content"] == "The user likes green tea."
    assert written["blocks"][0]["tokens"] > 0
    frames = client.transport.of_type("ponder_context_blocks")
    assert len(frames) == 2

    await client.send({"type": "rpc", "id": "b1", "method": "get_context_blocks", "args": []})
    answer = await client.transport.wait_for(lambda f: f.get("type") == "rpc" and f.get("id") == "b1")
    assert answer["success"] is True
    assert answer["result"] == frames[-1]["blocks"]

    # A direct write (not through the tool) is broadcast too; a refused write sends nothing.
    await agent.context.set_block("memory", "Tea: green.")
    await client.transport.wait_for(
        lambda f: f.get("type") == "ponder_context_blocks" and f["blocks"][0]["content"] == "Tea: green."
    )
    with pytest.raises(ValueError):
        await agent.context.set_block("memory", "word " * 200)
    await client.send({"type": "rpc", "id": "b2", "method": "get_context_blocks", "args": []})
    await client.transport.wait_for(lambda f: f.get("type") == "rpc" and f.get("id") == "b2")
    assert len(client.transport.of_type("ponder_context_blocks")) == 3


async def test_an_agent_without_blocks_sends_no_block_frames(host: Any, connect: Any) -> None:
    class Plain(Think):
        def get_model(self) -> Any:
            return ScriptedModel(["hi"])

    agent = await host.get_agent(Plain, "plain")
    client = await connect(agent)
    await client.send({"type": "rpc", "id": "b1", "method": "get_context_blocks", "args": []})
    answer = await client.transport.wait_for(lambda f: f.get("type") == "rpc" and f.get("id") == "b1")
    assert answer["result"] == []
    assert client.transport.of_type("ponder_context_blocks") == []


# -- skills beyond the hydrated window --------------------------------------------------------------------


class PdfSkill:
    def get(self) -> str:
        return "- pdf: read PDF files"

    def load(self, key: str) -> str | None:
        return "PDF-SKILL-BODY" if key == "pdf" else None


async def test_skills_loaded_outside_the_hydrated_window_are_restored_and_unloaded(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'window.sqlite3'}"
    model = ScriptedModel([tool_call("load_context", {"label": "skills", "key": "pdf"}, id="l1"), "Loaded."])

    class Windowed(Think):
        hydration_byte_budget = 20_000

        def get_model(self) -> Any:
            return model

        def configure_context(self) -> list[ContextBlock]:
            return [ContextBlock("skills", provider=PdfSkill())]

    host = await started(url)
    try:
        agent = await host.get_agent(Windowed, "w")
        assert (await agent.run_turn("load the pdf skill")).status == "completed"
        loaded_in = agent.messages[-1]["id"]
        await agent.add_messages(long_pairs(12, words=400), broadcast=False)
    finally:
        await host.close()

    host = await started(url)
    try:
        agent = await host.get_agent(Windowed, "w")
        assert agent.session.hydration.truncated
        assert loaded_in not in [m["id"] for m in agent.messages]
        assert agent.context.loaded_skills("skills") == ["pdf"]
        assert await agent.context.unload_skill("skills", "pdf") == "[skill unloaded: pdf]"
        stored = await agent.session.get_message(loaded_in)
        assert stored is not None
        outputs = [p["output"] for p in stored["parts"] if p.get("type") == "tool-load_context"]
        assert outputs == ["[skill unloaded: pdf]"]
    finally:
        await host.close()
    host = await started(url)
    try:
        agent = await host.get_agent(Windowed, "w")
        assert agent.context.loaded_skills("skills") == []
    finally:
        await host.close()
