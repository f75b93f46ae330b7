"""Loaded skills and the transcript: the loaded set, the unload callback, and the history helpers."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from ponder.context import (
    Context,
    ContextBlock,
    ContextBlockError,
    context_tools,
    loaded_skills_in_history,
    reclaim_skill_result,
    skill_unloaded_marker,
)
from ponder.storage import Store
from ponder.tools import ToolContext, ToolInputError


class Skills:
    def __init__(self) -> None:
        self.events: list[str] = []

    def get(self) -> str:
        return "- pdf: read PDFs\n- xls: read spreadsheets"

    def load(self, key: str) -> str | None:
        return {"pdf": "PDF body", "xls": "XLS body"}.get(key)

    def unload(self, key: str) -> None:
        self.events.append(f"provider unload {key}")


def part(tool: str, label: str, key: str, output: Any, state: str = "output-available") -> dict[str, Any]:
    return {
        "type": f"tool-{tool}",
        "toolCallId": f"{tool}-{label}-{key}-{output!s:.8}",
        "state": state,
        "input": {"label": label, "key": key},
        "output": output,
    }


def assistant(*parts: dict[str, Any], id: str = "a") -> dict[str, Any]:
    return {"id": id, "role": "assistant", "parts": [{"type": "step-start"}, *parts]}


def test_the_marker() -> None:
    assert skill_unloaded_marker("pdf") == "[skill unloaded: pdf]"


def test_loaded_skills_replay_the_transcript_in_order() -> None:
    history = [
        {"id": "u", "role": "user", "parts": [{"type": "text", "text": "load_context pdf"}]},
        assistant(
            part("load_context", "skills", "pdf", "PDF body"),
            part("load_context", "skills", "xls", "XLS body"),
        ),
        assistant(part("unload_context", "skills", "pdf", "[skill unloaded: pdf]"), id="b"),
        assistant(
            part("load_context", "skills", "doc", "[skill unloaded: doc]"),  # rewritten: not loaded
            part("load_context", "skills", "csv", None, state="output-error"),  # failed: not loaded
            part("load_context", "other", "pdf", "other body"),
            {
                "type": "dynamic-tool",
                "toolName": "load_context",
                "toolCallId": "d1",
                "state": "output-available",
                "input": {"label": "skills", "key": "pdf"},
                "output": "PDF body again",
            },
            id="c",
        ),
        assistant(part("load_context", "skills", "ppt", "partial", state="input-available"), id="d"),
    ]
    assert loaded_skills_in_history(history) == {"skills": ["xls", "pdf"], "other": ["pdf"]}
    assert loaded_skills_in_history([]) == {}


def test_reclaim_rewrites_every_matching_result_and_nothing_else() -> None:
    message = assistant(
        part("load_context", "skills", "pdf", "PDF body"),
        part("load_context", "skills", "xls", "XLS body"),
        part("load_context", "other", "pdf", "other body"),
        {"type": "text", "text": "PDF body"},
        part("load_context", "skills", "pdf", "PDF body loaded again"),
    )
    expected = copy.deepcopy(message)
    expected["parts"][1]["output"] = expected["parts"][5]["output"] = "[skill unloaded: pdf]"
    assert reclaim_skill_result(message, "skills", "pdf") is True
    assert message == expected
    assert reclaim_skill_result(message, "skills", "pdf") is False  # already rewritten
    user = {"id": "u", "role": "user", "parts": [part("load_context", "skills", "pdf", "PDF body")]}
    assert reclaim_skill_result(user, "skills", "pdf") is False


async def test_unload_refuses_a_key_that_is_not_loaded(store: Store) -> None:
    skills = Skills()
    ctx = Context(store, "a1", [ContextBlock("skills", provider=skills)])
    with pytest.raises(ContextBlockError, match=r'"pdf" is not loaded in skills \(loaded: none\)'):
        await ctx.unload_skill("skills", "pdf")
    await ctx.load_skill("skills", "xls")
    with pytest.raises(ContextBlockError, match=r"loaded: xls"):
        await ctx.unload_skill("skills", "pdf")
    assert skills.events == [] and ctx.loaded_skills("skills") == ["xls"]


async def test_the_unload_callback_runs_before_the_provider_and_a_failure_keeps_the_skill(
    store: Store,
) -> None:
    skills = Skills()
    ctx = Context(store, "a1", [ContextBlock("skills", provider=skills)])
    await ctx.load_skill("skills", "pdf")

    async def failing(label: str, key: str) -> None:
        skills.events.append(f"callback {label}:{key}")
        raise RuntimeError("store down")

    ctx.set_unload_callback(failing)
    with pytest.raises(RuntimeError):
        await ctx.unload_skill("skills", "pdf")
    assert ctx.loaded_skills("skills") == ["pdf"] and skills.events == ["callback skills:pdf"]

    ctx.set_unload_callback(lambda label, key: skills.events.append(f"sync callback {label}:{key}"))
    assert await ctx.unload_skill("skills", "pdf") == "[skill unloaded: pdf]"
    assert skills.events[1:] == ["sync callback skills:pdf", "provider unload pdf"]
    assert ctx.loaded_skills("skills") == []


async def test_restore_and_clear_the_loaded_set(store: Store) -> None:
    ctx = Context(
        store,
        "a1",
        [ContextBlock("skills", provider=Skills()), ContextBlock("memory")],
    )
    ctx.restore_loaded_skills({"skills": ["pdf", "xls", "pdf"], "memory": ["x"], "gone": ["y"]})
    assert ctx.loaded_skills("skills") == ["pdf", "xls"]
    assert ctx.loaded_skills("memory") == [] and ctx.loaded_skills("gone") == []
    assert await ctx.unload_skill("skills", "pdf") == "[skill unloaded: pdf]"  # restored keys unload
    ctx.clear_loaded_skills()
    assert ctx.loaded_skills("skills") == []
    ctx.restore_loaded_skills({"skills": ["xls"]})
    assert ctx.remove_block("skills")
    assert ctx.loaded_skills("skills") == []


async def test_the_unload_tool_reports_a_key_that_is_not_loaded(store: Store) -> None:
    ctx = Context(store, "a1", [ContextBlock("skills", provider=Skills())])
    tools = {t.name: t for t in context_tools(ctx)}
    call = ToolContext(None, "c1", "unload_context", "r1")
    with pytest.raises(ToolInputError, match='"pdf" is not loaded in skills'):
        await tools["unload_context"].invoke({"label": "skills", "key": "pdf"}, call)
    await tools["load_context"].invoke({"label": "skills", "key": "pdf"}, call)
    assert (
        await tools["unload_context"].invoke({"label": "skills", "key": "pdf"}, call)
        == "[skill unloaded: pdf]"
    )
