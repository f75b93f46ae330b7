"""Tools generated from context blocks: ``set_context``, ``load_context``/``unload_context``, ``search_context``.

Why this module exists: the model edits its memory, loads skills and searches indexes through ordinary tools,
and what it may touch is decided by the blocks (the ``label`` argument is an enum of the eligible labels, so
the schema itself tells the model which blocks exist). A refused operation raises ``ToolInputError`` with a
message for the model, which the turn loop turns into a tool error result; nothing is written.

No ``from __future__ import annotations`` here on purpose: the tool functions are closures whose annotations
(a ``Literal`` built from the labels) must be real objects for ``@tool`` to read.
"""

from collections.abc import Awaitable
from typing import Any, Literal

from ..tools import Tool, ToolInputError, tool
from ._blocks import ContextBlockError
from ._context import Context

__all__ = ["context_tools"]


async def _model_facing(call: Awaitable[str]) -> str:
    """Run a block operation; a refusal (``ContextBlockError``) becomes a tool error the model reads."""
    try:
        return await call
    except ContextBlockError as exc:
        raise ToolInputError(str(exc)) from None


def _labels(labels: list[str]) -> Any:
    return Literal[tuple(labels)]  # type: ignore[valid-type]


def context_tools(context: Context) -> list[Tool]:
    """The tools the current blocks call for (call again after adding or removing blocks).

    ``set_context`` when a block is writable; ``load_context`` and ``unload_context`` when a block is
    skill-like; ``search_context`` when a block is searchable.
    """
    blocks = context.blocks
    writable = [b.label for b in blocks if b.writable]
    skills = [b.label for b in blocks if b.kind == "skill"]
    searchable = [b.label for b in blocks if b.kind == "searchable"]
    tools: list[Tool] = []

    if writable:
        WritableLabel = _labels(writable)

        async def write(label: str, content: str, mode: str, title: str | None) -> str:
            return await _model_facing(context.set_block(label, content, mode, title=title))  # type: ignore[arg-type]

        if any(context.get_block(label).kind == "searchable" for label in writable):

            async def set_context(
                label: WritableLabel,  # type: ignore[valid-type]
                content: str,
                mode: Literal["replace", "append"] = "replace",
                title: str | None = None,
            ) -> str:
                """Write to a context block of your system prompt (memory that persists across conversations).

                The system prompt you see does not change until it is rebuilt; the write is stored at once.

                Args:
                    label: Which block to write.
                    content: The text to write.
                    mode: "replace" overwrites the block; "append" adds a new line at its end.
                    title: For a searchable block, a short title used as the entry's key.
                """
                return await write(label, content, mode, title)

        else:

            async def set_context(  # type: ignore[misc]
                label: WritableLabel,  # type: ignore[valid-type]
                content: str,
                mode: Literal["replace", "append"] = "replace",
            ) -> str:
                """Write to a context block of your system prompt (memory that persists across conversations).

                The system prompt you see does not change until it is rebuilt; the write is stored at once.

                Args:
                    label: Which block to write.
                    content: The text to write.
                    mode: "replace" overwrites the block; "append" adds a new line at its end.
                """
                return await write(label, content, mode, None)

        tools.append(tool(set_context))

    if skills:
        SkillLabel = _labels(skills)

        async def load_context(label: SkillLabel, key: str) -> str:  # type: ignore[valid-type]
            """Load one entry listed in a loadable context block; its full text is returned.

            Args:
                label: The loadable block.
                key: The entry to load, as listed in the block.
            """
            return await _model_facing(context.load_skill(label, key))

        async def unload_context(label: SkillLabel, key: str) -> str:  # type: ignore[valid-type]
            """Unload an entry you loaded earlier and no longer need, to free context.

            Args:
                label: The loadable block.
                key: The entry to unload.
            """
            return await _model_facing(context.unload_skill(label, key))

        tools += [tool(load_context), tool(unload_context)]

    if searchable:
        SearchLabel = _labels(searchable)

        async def search_context(label: SearchLabel, query: str) -> str:  # type: ignore[valid-type]
            """Search a searchable context block; returns the best matches.

            Args:
                label: The searchable block.
                query: Words to look for.
            """
            return await _model_facing(context.search(label, query))

        tools.append(tool(search_context))

    return tools
