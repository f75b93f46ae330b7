"""``Context``: an agent's assembled prompt blocks and its frozen, persisted system prompt.

Why this module exists: the system prompt is the head of every model request, so if it changes on every memory
write the provider's prompt cache never hits. ``Context`` renders the prompt once, stores the exact string in
the agent's rows, and hands the same bytes back on every turn and after every cold wake. Block writes go
straight to their providers but leave the frozen text alone until the owner calls ``rebuild()`` (on
compaction, history clear). Blocks marked ``when_changed="remind"`` are the exception: their new value reaches
the model as a reminder riding after the cached prefix, and is folded into the prompt at the next rebuild.
"""

from __future__ import annotations

import hashlib
import json
import re
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from typing import Any, Literal

from ..storage import Store
from ._blocks import ContextBlock, ContextBlockError, block_kind, estimate_tokens, maybe_await, merge_blocks
from ._render import BlockState, render_section, render_system_prompt, usage_text
from ._skills import skill_unloaded_marker

__all__ = ["REMINDER_PREAMBLE", "Context", "StoredBlockProvider", "UnloadCallback", "entry_key"]

REMINDER_PREAMBLE = (
    "These context blocks changed after the system prompt was written. "
    "Their current values below replace the ones in the system prompt."
)
_SEARCH_LIMIT = 10

#: ``fn(label, key)`` (sync or async), called on every unload to rewrite the skill's earlier ``load_context``
#: result in the owner's transcript (see :meth:`Context.set_unload_callback`).
UnloadCallback = Callable[[str, str], Awaitable[None] | None]


class StoredBlockProvider:
    """Writable memory in the agent's own rows, keyed by ``(agent_id, label)``; the default provider."""

    __slots__ = ("agent_id", "label", "store")

    def __init__(self, store: Store, agent_id: str, label: str) -> None:
        self.store = store
        self.agent_id = agent_id
        self.label = label

    def __repr__(self) -> str:
        return f"StoredBlockProvider(agent_id={self.agent_id!r}, label={self.label!r})"

    async def get(self) -> str:
        row = await self.store.fetch_one(
            "SELECT content FROM ponder_context_blocks WHERE agent_id = ? AND label = ?",
            (self.agent_id, self.label),
        )
        return "" if row is None else str(row["content"])

    async def set(self, content: str) -> None:
        await self.store.execute(
            "INSERT INTO ponder_context_blocks (agent_id, label, content, updated_at) VALUES (?, ?, ?, ?) "
            "ON CONFLICT (agent_id, label) DO UPDATE SET content = excluded.content, updated_at = excluded.updated_at",
            (self.agent_id, self.label, content, time.time()),
        )


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text[:60].lower()).strip("-")


def _fnv1a_base36(text: str) -> str:
    value = 0x811C9DC5
    for byte in text.encode():
        value = ((value ^ byte) * 0x01000193) & 0xFFFFFFFF
    digits = "0123456789abcdefghijklmnopqrstuvwxyz"
    out = ""
    while True:
        value, rem = divmod(value, 36)
        out = digits[rem] + out
        if value == 0:
            return out


def entry_key(content: str, title: str | None = None) -> str:
    """Key of a keyed (searchable) write: slug of the title, else slug of the content + FNV-1a hash."""
    if title and _slug(title):
        return _slug(title)
    return f"{_slug(content) or 'entry'}-{_fnv1a_base36(content)}"


def _hit_text(hit: Any) -> str:
    if isinstance(hit, Mapping):
        key, content = hit.get("key"), hit.get("content", "")
        return f"[{key}]\n{content}" if key is not None else str(content)
    if isinstance(hit, tuple) and len(hit) == 2:
        return f"[{hit[0]}]\n{hit[1]}"
    return str(hit)


class Context:
    """The prompt context of one agent: blocks in declaration order, bound to a store and an agent id.

    ``base_prompt`` is put above the blocks. Construct it once per live agent (it is cheap); a new ``Context``
    on the same store and agent id after a restart reuses the stored frozen prompt byte for byte, unless the
    declaration itself (base prompt, labels, descriptions, limits, kinds) changed — then it renders anew.
    """

    def __init__(
        self,
        store: Store,
        agent_id: str,
        blocks: Iterable[ContextBlock | Mapping[str, Any]] = (),
        base_prompt: str = "",
    ) -> None:
        self.store = store
        self.agent_id = agent_id
        self.base_prompt = base_prompt
        self._blocks: dict[str, ContextBlock] = {}
        self._providers: dict[str, Any] = {}
        self._initialised: set[str] = set()
        self._frozen: str | None = None
        self._loaded_skills: dict[str, list[str]] = {}
        self._on_unload: UnloadCallback | None = None
        for block in blocks:
            self.add_block(block)

    def __repr__(self) -> str:
        return f"Context(agent_id={self.agent_id!r}, blocks={list(self._blocks)!r})"

    # -- blocks --------------------------------------------------------------------------------------

    @property
    def blocks(self) -> list[ContextBlock]:
        """The declared blocks, in prompt order."""
        return list(self._blocks.values())

    def get_block(self, label: str) -> ContextBlock:
        block = self._blocks.get(label)
        if block is None:
            known = ", ".join(self._blocks) or "none"
            raise ContextBlockError(f'Unknown context block "{label}". Known blocks: {known}.')
        return block

    def add_block(self, block: ContextBlock | Mapping[str, Any]) -> ContextBlock:
        """Declare a block at the end (it shows in the prompt after the next ``rebuild()``)."""
        block = ContextBlock.from_config(block)
        if block.label in self._blocks:
            raise ValueError(f"context block {block.label!r} is declared twice")
        self._blocks[block.label] = block
        self._providers[block.label] = (
            block.provider
            if block.provider is not None
            else StoredBlockProvider(self.store, self.agent_id, block.label)
        )
        return block

    def add_blocks(self, blocks: Iterable[ContextBlock | Mapping[str, Any]]) -> None:
        """Add the blocks whose labels are new (``merge_blocks`` semantics: what is declared already wins)."""
        for block in merge_blocks((), blocks):
            if block.label not in self._blocks:
                self.add_block(block)

    def remove_block(self, label: str) -> bool:
        """Forget a block (the frozen prompt keeps it until the next ``rebuild()``)."""
        self._providers.pop(label, None)
        self._initialised.discard(label)
        self._loaded_skills.pop(label, None)
        return self._blocks.pop(label, None) is not None

    async def _provider(self, label: str) -> Any:
        provider = self._providers[label]
        if label not in self._initialised:
            init = getattr(provider, "init", None)
            if callable(init):
                await maybe_await(init(label))
            self._initialised.add(label)
        return provider

    async def read(self, label: str) -> str:
        """A block's current content, straight from its provider."""
        self.get_block(label)
        provider = await self._provider(label)
        content = await maybe_await(provider.get())
        return "" if content is None else str(content)

    async def state(self, label: str) -> BlockState:
        block = self.get_block(label)
        content = await self.read(label)
        return BlockState(
            label=block.label,
            description=block.description,
            content=content,
            tokens=estimate_tokens(content),
            max_tokens=block.max_tokens,
            kind=block.kind,
            writable=block.writable,
            when_changed=block.when_changed,
        )

    async def states(self) -> list[BlockState]:
        return [await self.state(label) for label in list(self._blocks)]

    async def snapshot(self) -> list[dict[str, Any]]:
        """Every block as it is now: label, description, content, tokens, max_tokens, writable, kind, when_changed."""
        return [state.as_dict() for state in await self.states()]

    # -- writes --------------------------------------------------------------------------------------

    async def set_block(
        self,
        label: str,
        content: str,
        mode: Literal["replace", "append"] = "replace",
        *,
        title: str | None = None,
    ) -> str:
        """Write a block through its provider; return the usage line the model sees.

        Refused (``ContextBlockError``, nothing written) for read-only and skill blocks and when the result
        would exceed ``max_tokens``. A searchable block gets a keyed entry (``set(key, content)``). The frozen
        prompt is not touched.
        """
        block = self.get_block(label)
        if not block.writable:
            raise ContextBlockError(f'Block "{label}" is {block.kind} and cannot be written.')
        if mode not in ("replace", "append"):
            raise ContextBlockError(f"mode must be 'replace' or 'append', got {mode!r}")
        provider = await self._provider(label)
        if block.kind == "searchable":
            key = entry_key(content, title)
            await maybe_await(provider.set(key, content))
            return f'Indexed "{key}" in {label}.'
        new = content
        if mode == "append":
            current = await self.read(label)
            new = f"{current}\n{content}" if current else content
        tokens = estimate_tokens(new)
        if block.max_tokens is not None and tokens > block.max_tokens:
            raise ContextBlockError(
                f'Block "{label}" exceeds max_tokens: {tokens} > {block.max_tokens}. Nothing was written; '
                "shorten the content or replace the block with a condensed version."
            )
        await maybe_await(provider.set(new))
        return f"Written to {label}. Usage: {usage_text(tokens, block.max_tokens)}"

    async def load_skill(self, label: str, key: str) -> str:
        """Load one entry of a skill-like block; its text is returned to the model as the tool result."""
        block = self.get_block(label)
        if block.kind != "skill":
            raise ContextBlockError(f'Block "{label}" has nothing to load (it is {block.kind}).')
        provider = await self._provider(label)
        content = await maybe_await(provider.load(key))
        if content is None:
            raise ContextBlockError(f'No entry "{key}" in {label}.')
        loaded = self._loaded_skills.setdefault(label, [])
        if key not in loaded:
            loaded.append(key)
        return str(content)

    async def unload_skill(self, label: str, key: str) -> str:
        """Unload a loaded entry; returns the marker text ``[skill unloaded: <key>]``.

        The unload callback runs first (it rewrites the earlier ``load_context`` result in the transcript, so
        the text stops reaching the model), then the provider's ``unload(key)`` when it has one. Refused
        (``ContextBlockError``, nothing changes) when the key is not loaded — after a restart the owner restores
        the loaded set from the transcript (:meth:`restore_loaded_skills`) so skills loaded before it count.
        """
        block = self.get_block(label)
        if block.kind != "skill":
            raise ContextBlockError(f'Block "{label}" has nothing to unload (it is {block.kind}).')
        loaded = self._loaded_skills.get(label, [])
        if key not in loaded:
            listed = ", ".join(loaded) or "none"
            raise ContextBlockError(f'"{key}" is not loaded in {label} (loaded: {listed}).')
        if self._on_unload is not None:
            await maybe_await(self._on_unload(label, key))
        provider = await self._provider(label)
        unload = getattr(provider, "unload", None)
        if callable(unload):
            await maybe_await(unload(key))
        if key in loaded:
            loaded.remove(key)
        return skill_unloaded_marker(key)

    def set_unload_callback(self, callback: UnloadCallback | None) -> None:
        """Call ``callback(label, key)`` on every unload (before the provider's ``unload``): the owner of the
        transcript rewrites the skill's ``load_context`` result there (``reclaim_skill_result``)."""
        self._on_unload = callback

    def loaded_skills(self, label: str) -> list[str]:
        """The keys of ``label`` loaded now, in load order."""
        return list(self._loaded_skills.get(label, []))

    def restore_loaded_skills(self, loaded: Mapping[str, Iterable[str]]) -> None:
        """Replace the loaded set, ``{label: [key, …]}`` — after a restart, from the transcript
        (``loaded_skills_in_history``). Labels that are not declared skill blocks are ignored."""
        self._loaded_skills = {}
        for label, keys in loaded.items():
            block = self._blocks.get(label)
            if block is None or block.kind != "skill":
                continue
            unique = list(dict.fromkeys(keys))
            if unique:
                self._loaded_skills[label] = unique

    def clear_loaded_skills(self) -> None:
        """Forget every loaded skill (the owner's transcript was cleared)."""
        self._loaded_skills = {}

    async def search(self, label: str, query: str) -> str:
        """Search a searchable block: the top 10 hits as ``[key]`` + content, or ``No results found.``."""
        block = self.get_block(label)
        if block.kind != "searchable":
            raise ContextBlockError(f'Block "{label}" is not searchable (it is {block.kind}).')
        provider = await self._provider(label)
        hits = await maybe_await(provider.search(query))
        if isinstance(hits, str):
            return hits or "No results found."
        rendered = [_hit_text(hit) for hit in list(hits or [])[:_SEARCH_LIMIT]]
        return "\n\n".join(rendered) if rendered else "No results found."

    # -- the frozen prompt ---------------------------------------------------------------------------

    def _fingerprint(self) -> str:
        declaration = [
            self.base_prompt,
            [
                [b.label, b.description, b.max_tokens, block_kind(b.provider), b.when_changed]
                for b in self.blocks
            ],
        ]
        encoded = json.dumps(declaration, ensure_ascii=False, separators=(",", ":"))
        return hashlib.sha256(encoded.encode()).hexdigest()

    async def render(self) -> str:
        """Render the prompt from the providers as they are now (nothing is stored)."""
        return render_system_prompt(self.base_prompt, await self.states())

    async def frozen_prompt(self) -> str:
        """The system prompt every turn sends: rendered once, persisted, and reused byte for byte.

        On a cold wake the stored string is returned unless the declaration changed since it was written.
        """
        if self._frozen is not None:
            return self._frozen
        row = await self.store.fetch_one(
            "SELECT prompt, fingerprint FROM ponder_context_prompts WHERE agent_id = ?", (self.agent_id,)
        )
        if row is not None and row["fingerprint"] == self._fingerprint():
            self._frozen = str(row["prompt"])
            return self._frozen
        return await self.rebuild()

    async def rebuild(self) -> str:
        """Re-read every provider, re-render and overwrite the stored prompt; pending reminders are folded in.

        The owner calls this on compaction and on history clear — the moments the prefix changes anyway.
        """
        prompt = await self.render()
        async with self.store.transaction():
            await self.store.execute(
                "INSERT INTO ponder_context_prompts (agent_id, prompt, fingerprint, created_at) VALUES (?, ?, ?, ?) "
                "ON CONFLICT (agent_id) DO UPDATE SET prompt = excluded.prompt, "
                "fingerprint = excluded.fingerprint, created_at = excluded.created_at",
                (self.agent_id, prompt, self._fingerprint(), time.time()),
            )
            await self.store.execute(
                "DELETE FROM ponder_context_reminded WHERE agent_id = ?", (self.agent_id,)
            )
        self._frozen = prompt
        return prompt

    refresh_system_prompt = rebuild

    async def clear(self) -> None:
        """Delete this agent's stored block memory, prompt and reminders (history clear, agent destroy)."""
        async with self.store.transaction():
            for table in ("ponder_context_blocks", "ponder_context_prompts", "ponder_context_reminded"):
                await self.store.execute(f"DELETE FROM {table} WHERE agent_id = ?", (self.agent_id,))
        self._frozen = None

    # -- reminders -----------------------------------------------------------------------------------

    @staticmethod
    def _contains_section(prompt: str, section: str) -> bool:
        # A section is delimited by the blank line before it and the next block's rule (or the end) after it.
        return f"\n\n{section}\n\n" in f"\n\n{prompt}\n\n"

    async def _changed_sections(self) -> list[tuple[str, str]]:
        frozen = await self.frozen_prompt()
        changed: list[tuple[str, str]] = []
        for block in self.blocks:
            if block.when_changed != "remind":
                continue
            section = render_section(await self.state(block.label))
            if section is not None:
                changed.append((block.label, section))
        return [(label, s) for label, s in changed if not self._contains_section(frozen, s)]

    async def reminder(self) -> str | None:
        """The reminder for every remind block whose current value differs from the frozen prompt (not consumed).

        This is upstream's rule: it repeats on every turn until a rebuild. ``take_reminders()`` is the
        tell-once variant.
        """
        changed = await self._changed_sections()
        return self._reminder_text([section for _, section in changed])

    async def take_reminders(self) -> str | None:
        """The reminder to inject after the cached prefix on this turn, each change told once.

        A remind block is reported when its current section differs from what the model was last told: the
        frozen prompt, or the last reminder for that label (persisted, so a restart does not repeat it). The
        bookkeeping is reset by ``rebuild()``, which folds the values into the prompt.
        """
        remind = [b for b in self.blocks if b.when_changed == "remind"]
        if not remind:
            return None
        frozen = await self.frozen_prompt()
        rows = await self.store.fetch_all(
            "SELECT label, section FROM ponder_context_reminded WHERE agent_id = ?", (self.agent_id,)
        )
        told = {str(row["label"]): str(row["section"]) for row in rows}
        sections: list[str] = []
        updates: list[tuple[str, str, str]] = []
        for block in remind:
            section = render_section(await self.state(block.label))
            if section is None:
                continue
            last = told.get(block.label)
            stale = last != section if last is not None else not self._contains_section(frozen, section)
            if stale:
                sections.append(section)
                updates.append((self.agent_id, block.label, section))
        if updates:
            await self.store.execute_many(
                "INSERT INTO ponder_context_reminded (agent_id, label, section) VALUES (?, ?, ?) "
                "ON CONFLICT (agent_id, label) DO UPDATE SET section = excluded.section",
                updates,
            )
        return self._reminder_text(sections)

    @staticmethod
    def _reminder_text(sections: Sequence[str]) -> str | None:
        if not sections:
            return None
        return "\n\n".join([REMINDER_PREAMBLE, *sections])
