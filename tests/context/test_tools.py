"""The tools generated from blocks: schemas, tool errors the model sees, and nothing changed on refusal."""

from __future__ import annotations

import pytest

from ponder.context import Context, ContextBlock, context_tools
from ponder.storage import Store
from ponder.tools import Tool, ToolContext, ToolInputError

from .test_context import Index, ReadOnly, Skills


def ctx_for(name: str) -> ToolContext:
    return ToolContext(agent=None, tool_call_id="call-1", tool_name=name)


def labels(tool: Tool) -> list[str]:
    prop = tool.parameters["properties"]["label"]
    return prop["enum"] if "enum" in prop else [prop["const"]]  # one label → pydantic emits "const"


def by_name(tools: list[Tool]) -> dict[str, Tool]:
    return {t.name: t for t in tools}


async def test_only_the_tools_the_blocks_call_for(store: Store) -> None:
    assert context_tools(Context(store, "a", [ContextBlock("soul", provider=ReadOnly("x"))])) == []
    tools = by_name(
        context_tools(
            Context(
                store,
                "a",
                [
                    ContextBlock("soul", provider=ReadOnly("x")),
                    ContextBlock("memory", max_tokens=10),
                    ContextBlock("skills", provider=Skills()),
                    ContextBlock("notes", provider=Index()),
                ],
            )
        )
    )
    assert set(tools) == {"set_context", "load_context", "unload_context", "search_context"}
    params = tools["set_context"].parameters
    assert params["properties"]["label"]["enum"] == ["memory", "notes"]
    assert params["properties"]["mode"]["enum"] == ["replace", "append"]
    assert "title" in params["properties"]
    assert labels(tools["search_context"]) == ["notes"]
    assert labels(tools["load_context"]) == ["skills"]


async def test_set_context_without_searchable_has_no_title(store: Store) -> None:
    (set_context,) = context_tools(Context(store, "a", [ContextBlock("memory", max_tokens=10)]))
    assert set(set_context.parameters["properties"]) == {"label", "content", "mode"}
    assert set_context.parameters["required"] == ["label", "content"]
    assert labels(set_context) == ["memory"] and set_context.description


async def test_set_context_writes_and_reports_usage(store: Store) -> None:
    context = Context(store, "a", [ContextBlock("memory", max_tokens=10)])
    (set_context,) = context_tools(context)
    out = await set_context.invoke({"label": "memory", "content": "abcdefgh"}, ctx_for("set_context"))
    assert out == "Written to memory. Usage: 20% (2/10 tokens)"
    assert await context.read("memory") == "abcdefgh"


async def test_set_context_over_limit_is_a_tool_error_and_writes_nothing(store: Store) -> None:
    context = Context(store, "a", [ContextBlock("memory", max_tokens=10)])
    (set_context,) = context_tools(context)
    await set_context.invoke({"label": "memory", "content": "keep"}, ctx_for("set_context"))
    with pytest.raises(ToolInputError, match=r'Block "memory" exceeds max_tokens: 25 > 10'):
        await set_context.invoke({"label": "memory", "content": "x" * 100}, ctx_for("set_context"))
    assert await context.read("memory") == "keep"


async def test_readonly_label_is_rejected_by_the_schema(store: Store) -> None:
    context = Context(store, "a", [ContextBlock("soul", provider=ReadOnly("x")), ContextBlock("memory")])
    (set_context,) = context_tools(context)
    with pytest.raises(ToolInputError, match="label"):
        await set_context.invoke({"label": "soul", "content": "evil"}, ctx_for("set_context"))
    assert await context.read("soul") == "x"


async def test_readonly_block_refused_even_when_called_directly(store: Store) -> None:
    context = Context(store, "a", [ContextBlock("soul", provider=ReadOnly("x")), ContextBlock("memory")])
    (set_context,) = context_tools(context)
    with pytest.raises(ToolInputError, match="readonly"):
        await set_context.fn(label="soul", content="evil")


async def test_load_unload_and_search_tools(store: Store) -> None:
    skills, index = Skills(), Index()
    index.set("k1", "green tea")
    context = Context(
        store, "a", [ContextBlock("skills", provider=skills), ContextBlock("notes", provider=index)]
    )
    tools = by_name(context_tools(context))
    load = tools["load_context"]
    assert await load.invoke({"label": "skills", "key": "pdf"}, ctx_for("load_context")) == "PDF skill body"
    with pytest.raises(ToolInputError, match='No entry "nope"'):
        await load.invoke({"label": "skills", "key": "nope"}, ctx_for("load_context"))
    unload = tools["unload_context"]
    assert await unload.invoke({"label": "skills", "key": "pdf"}, ctx_for("x")) == "[skill unloaded: pdf]"
    search = tools["search_context"]
    assert await search.invoke({"label": "notes", "query": "tea"}, ctx_for("x")) == "[k1]\ngreen tea"
    assert await search.invoke({"label": "notes", "query": "coffee"}, ctx_for("x")) == "No results found."
    keyed = tools["set_context"]
    out = await keyed.invoke({"label": "notes", "content": "oolong tea", "title": "Oolong"}, ctx_for("x"))
    assert out == 'Indexed "oolong" in notes.' and index.entries["oolong"] == "oolong tea"
