"""Context blocks, the frozen prompt, reminders and the snapshot."""

from __future__ import annotations

from typing import Any

import pytest

from ponder.context import (
    REMINDER_PREAMBLE,
    RULE,
    BlockState,
    Context,
    ContextBlock,
    ContextBlockError,
    block_kind,
    estimate_tokens,
    merge_blocks,
    render_system_prompt,
)
from ponder.storage import Store


class ReadOnly:
    def __init__(self, value: str) -> None:
        self.value = value

    def get(self) -> str:
        return self.value


class AsyncWritable:
    def __init__(self) -> None:
        self.value = ""

    async def get(self) -> str:
        return self.value

    async def set(self, content: str) -> None:
        self.value = content


class Skills:
    def __init__(self) -> None:
        self.unloaded: list[str] = []

    def get(self) -> str:
        return "- pdf: read PDFs"

    def load(self, key: str) -> str | None:
        return "PDF skill body" if key == "pdf" else None

    def unload(self, key: str) -> None:
        self.unloaded.append(key)


class Index:
    def __init__(self) -> None:
        self.entries: dict[str, str] = {}

    def get(self) -> str:
        return f"{len(self.entries)} entries indexed."

    def search(self, query: str) -> list[tuple[str, str]]:
        return [(k, v) for k, v in self.entries.items() if query.lower() in v.lower()]

    def set(self, key: str, content: str) -> None:
        self.entries[key] = content


def blocks() -> list[ContextBlock]:
    return [
        ContextBlock("soul", provider=ReadOnly("You are kind.")),
        ContextBlock("memory", description="Learned facts", max_tokens=100),
    ]


def test_estimate_tokens() -> None:
    assert estimate_tokens("") == 0
    assert estimate_tokens("abcd") == 2  # one word × 1.3 → 2 beats 4/4
    assert estimate_tokens("x" * 400) == 100


def test_block_kinds_by_duck_typing() -> None:
    assert block_kind(None) == "writable"
    assert block_kind(ReadOnly("")) == "readonly"
    assert block_kind(AsyncWritable()) == "writable"
    assert block_kind(Skills()) == "skill"
    assert block_kind(Index()) == "searchable"
    with pytest.raises(TypeError):
        block_kind(object())


@pytest.mark.parametrize(
    "kwargs",
    [
        {"label": ""},
        {"label": "has space"},
        {"label": "m", "max_tokens": 0},
        {"label": "m", "max_tokens": True},
        {"label": "m", "when_changed": "later"},
    ],
)
def test_bad_block_declarations(kwargs: dict[str, Any]) -> None:
    with pytest.raises(ValueError):
        ContextBlock(**kwargs)


def test_wait_is_an_alias_and_camelcase_config() -> None:
    block = ContextBlock.from_config({"label": "d", "maxTokens": 5, "whenChanged": "wait"})
    assert (block.max_tokens, block.when_changed) == (5, "rebuild")
    with pytest.raises(ValueError, match="unknown"):
        ContextBlock.from_config({"label": "d", "size": 5})


def test_render_is_deterministic_and_laid_out() -> None:
    states = [
        BlockState("soul", None, "You are kind.", 4, None, "readonly", False),
        BlockState("empty", None, "", 0, None, "readonly", False),
        BlockState("memory", "Learned facts", "x" * 220, 55, 100, "writable", True),
    ]
    prompt = render_system_prompt("Base.", states)
    assert prompt == (
        f"Base.\n\n{RULE}\nSOUL [readonly]\n{RULE}\nYou are kind.\n\n"
        f"{RULE}\nMEMORY (Learned facts) [55% — 55/100 tokens] [writable]\n{RULE}\n{'x' * 220}"
    )
    assert render_system_prompt("Base.", states) == prompt
    assert render_system_prompt("", []) == ""


def test_merge_blocks_primary_first_and_wins() -> None:
    merged = merge_blocks(
        [ContextBlock("memory", description="new")],
        [
            {"label": "memory", "description": "old"},
            {"label": "soul"},
            {"label": "soul", "description": "dup"},
        ],
    )
    assert [(b.label, b.description) for b in merged] == [("memory", "new"), ("soul", None)]


async def test_frozen_prompt_is_byte_identical_after_cold_wake(store: Store) -> None:
    ctx = Context(store, "a1", blocks(), base_prompt="Base prompt.")
    await ctx.set_block("memory", "likes tea")
    first = await ctx.frozen_prompt()
    assert first.startswith("Base prompt.\n\n") and "likes tea" in first

    await ctx.set_block("memory", "likes coffee")  # written, but the prompt stays frozen
    assert await ctx.read("memory") == "likes coffee"
    assert await ctx.frozen_prompt() == first

    woken = Context(store, "a1", blocks(), base_prompt="Base prompt.")
    assert await woken.frozen_prompt() == first  # byte for byte, despite the newer memory

    rebuilt = await woken.rebuild()
    assert "likes coffee" in rebuilt and rebuilt != first
    assert await Context(store, "a1", blocks(), base_prompt="Base prompt.").frozen_prompt() == rebuilt
    assert await woken.refresh_system_prompt() == rebuilt


async def test_other_agents_do_not_share_blocks_or_prompts(store: Store) -> None:
    a = Context(store, "a", blocks())
    b = Context(store, "b", blocks())
    await a.set_block("memory", "secret of a")
    assert await b.read("memory") == ""
    assert "secret of a" not in await b.frozen_prompt()


async def test_changed_declaration_renders_anew_on_wake(store: Store) -> None:
    first = await Context(store, "a1", blocks(), base_prompt="One.").frozen_prompt()
    second = await Context(store, "a1", blocks(), base_prompt="Two.").frozen_prompt()
    assert first.startswith("One.") and second.startswith("Two.")


async def test_set_block_over_max_tokens_is_refused_and_changes_nothing(store: Store) -> None:
    ctx = Context(store, "a1", blocks())
    await ctx.set_block("memory", "short")
    with pytest.raises(ContextBlockError, match=r'Block "memory" exceeds max_tokens: 101 > 100'):
        await ctx.set_block("memory", "x" * 404)
    with pytest.raises(ContextBlockError, match="exceeds max_tokens"):
        await ctx.set_block("memory", "y" * 398, mode="append")
    assert await ctx.read("memory") == "short"


async def test_append_and_usage(store: Store) -> None:
    ctx = Context(store, "a1", blocks())
    assert await ctx.set_block("memory", "a" * 40) == "Written to memory. Usage: 10% (10/100 tokens)"
    assert (
        await ctx.set_block("memory", "b" * 39, mode="append")
        == "Written to memory. Usage: 20% (20/100 tokens)"
    )
    assert await ctx.read("memory") == "a" * 40 + "\n" + "b" * 39


async def test_unknown_and_readonly_blocks_refused(store: Store) -> None:
    ctx = Context(store, "a1", blocks())
    with pytest.raises(ContextBlockError, match="readonly"):
        await ctx.set_block("soul", "evil")
    with pytest.raises(ContextBlockError, match="Unknown context block"):
        await ctx.set_block("nope", "x")
    assert await ctx.read("soul") == "You are kind."


async def test_duplicate_label_and_remove(store: Store) -> None:
    ctx = Context(store, "a1", blocks())
    with pytest.raises(ValueError, match="twice"):
        ctx.add_block({"label": "soul"})
    ctx.add_blocks([{"label": "soul"}, {"label": "notes"}])
    assert [b.label for b in ctx.blocks] == ["soul", "memory", "notes"]
    assert ctx.remove_block("notes") and not ctx.remove_block("notes")


async def test_skills_load_and_unload(store: Store) -> None:
    skills = Skills()
    ctx = Context(store, "a1", [ContextBlock("skills", provider=skills)])
    assert await ctx.load_skill("skills", "pdf") == "PDF skill body"
    assert ctx.loaded_skills("skills") == ["pdf"]
    with pytest.raises(ContextBlockError, match='No entry "xls"'):
        await ctx.load_skill("skills", "xls")
    assert await ctx.unload_skill("skills", "pdf") == "[skill unloaded: pdf]"
    assert skills.unloaded == ["pdf"] and ctx.loaded_skills("skills") == []
    assert "[loadable]" in await ctx.frozen_prompt()
    with pytest.raises(ContextBlockError):
        await ctx.set_block("skills", "x")


async def test_search_and_keyed_writes(store: Store) -> None:
    index = Index()
    ctx = Context(store, "a1", [ContextBlock("notes", provider=index)])
    assert await ctx.search("notes", "tea") == "No results found."
    assert (
        await ctx.set_block("notes", "Alice likes tea", title="Alice drinks")
        == 'Indexed "alice-drinks" in notes.'
    )
    message = await ctx.set_block("notes", "Bob likes tea too")
    key = message.split('"')[1]
    assert key.startswith("bob-likes-tea-too-")
    assert (
        await ctx.search("notes", "TEA") == f"[alice-drinks]\nAlice likes tea\n\n[{key}]\nBob likes tea too"
    )
    with pytest.raises(ContextBlockError, match="not searchable"):
        await Context(store, "a2", blocks()).search("memory", "x")


async def test_init_runs_once_before_first_read(store: Store) -> None:
    calls: list[str] = []

    class WithInit(ReadOnly):
        def init(self, label: str) -> None:
            calls.append(label)

    ctx = Context(store, "a1", [ContextBlock("soul", provider=WithInit("x"))])
    await ctx.read("soul")
    await ctx.frozen_prompt()
    assert calls == ["soul"]


async def test_snapshot(store: Store) -> None:
    ctx = Context(store, "a1", blocks())
    await ctx.set_block("memory", "x" * 40)
    snap = await ctx.snapshot()
    assert snap[1] == {
        "label": "memory",
        "description": "Learned facts",
        "content": "x" * 40,
        "tokens": 10,
        "max_tokens": 100,
        "writable": True,
        "kind": "writable",
        "when_changed": "rebuild",
    }
    assert snap[0]["writable"] is False


def remind_blocks(today: ReadOnly) -> list[ContextBlock]:
    return [
        ContextBlock("soul", provider=ReadOnly("You are kind.")),
        ContextBlock("today", provider=today, when_changed="remind"),
        ContextBlock("mood", when_changed="remind"),
    ]


async def test_remind_blocks_are_reminded_once_and_folded_at_rebuild(store: Store) -> None:
    today = ReadOnly("2025-01-01")
    ctx = Context(store, "a1", remind_blocks(today))
    frozen = await ctx.frozen_prompt()
    assert f"{RULE}\nMOOD [writable]\n{RULE}\n" in frozen  # a remind block renders even when empty
    assert await ctx.take_reminders() is None

    today.value = "2025-01-02"
    await ctx.set_block("mood", "cheerful")
    assert await ctx.frozen_prompt() == frozen
    reminder = await ctx.take_reminders()
    assert reminder == (
        f"{REMINDER_PREAMBLE}\n\n{RULE}\nTODAY [readonly]\n{RULE}\n2025-01-02\n\n{RULE}\nMOOD [writable]\n{RULE}\ncheerful"
    )
    assert await ctx.reminder() is not None  # upstream's repeating form is still available
    assert await ctx.take_reminders() is None  # told once
    # ... also after a cold wake
    assert await Context(store, "a1", remind_blocks(today)).take_reminders() is None

    await ctx.set_block("mood", "grumpy")
    assert await ctx.take_reminders() == f"{REMINDER_PREAMBLE}\n\n{RULE}\nMOOD [writable]\n{RULE}\ngrumpy"

    rebuilt = await ctx.rebuild()
    assert "2025-01-02" in rebuilt and "grumpy" in rebuilt
    assert await ctx.take_reminders() is None
    assert await ctx.reminder() is None


async def test_reverting_a_remind_value_is_told_too(store: Store) -> None:
    today = ReadOnly("Monday")
    ctx = Context(store, "a1", remind_blocks(today))
    await ctx.frozen_prompt()
    today.value = "Tuesday"
    assert "Tuesday" in (await ctx.take_reminders() or "")
    today.value = "Monday"  # back to the frozen value, but the model was told Tuesday
    assert "Monday" in (await ctx.take_reminders() or "")
    assert await ctx.take_reminders() is None


async def test_rebuild_blocks_never_remind(store: Store) -> None:
    ctx = Context(store, "a1", blocks())
    await ctx.frozen_prompt()
    await ctx.set_block("memory", "new fact")
    assert await ctx.take_reminders() is None


async def test_clear_forgets_everything(store: Store) -> None:
    ctx = Context(store, "a1", blocks())
    await ctx.set_block("memory", "zebra")
    await ctx.frozen_prompt()
    await ctx.clear()
    assert await ctx.read("memory") == ""
    assert "zebra" not in await ctx.frozen_prompt()
