"""Rendering the system prompt from a base prompt and block states — deterministic bytes.

Why this module exists: a provider caches on a byte-identical prefix, so the same inputs must always give the
same string. The layout follows upstream ``agents/context``: per block a rule of 46 ``═``, a header, the rule
again, then the content; sections joined by one blank line; the base prompt (when non-empty) comes first.
Header: upper-cased label, `` (description)``, `` [P% — t/max tokens]`` when ``max_tokens`` is set, and one of
`` [searchable]`` / `` [loadable]`` / `` [readonly]`` / `` [writable]``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ._blocks import BlockKind, WhenChanged

__all__ = ["RULE", "BlockState", "render_section", "render_system_prompt", "usage_text"]

RULE = "═" * 46
_MARKERS: dict[str, str] = {
    "searchable": "searchable",
    "skill": "loadable",
    "readonly": "readonly",
    "writable": "writable",
}


@dataclass(frozen=True, slots=True)
class BlockState:
    """A block as read at one moment: what rendering and the snapshot need."""

    label: str
    description: str | None
    content: str
    tokens: int
    max_tokens: int | None
    kind: BlockKind
    writable: bool
    when_changed: WhenChanged = "rebuild"

    def as_dict(self) -> dict[str, object]:
        return {
            "label": self.label,
            "description": self.description,
            "content": self.content,
            "tokens": self.tokens,
            "max_tokens": self.max_tokens,
            "writable": self.writable,
            "kind": self.kind,
            "when_changed": self.when_changed,
        }


def usage_text(tokens: int, max_tokens: int | None) -> str:
    """``45% (495/1100 tokens)`` with a limit, ``495 tokens`` without."""
    if max_tokens is None:
        return f"{tokens} tokens"
    return f"{round(tokens * 100 / max_tokens)}% ({tokens}/{max_tokens} tokens)"


def render_section(block: BlockState) -> str | None:
    """One block's section, or ``None`` for an empty read-only block that is not a reminder block."""
    if not block.content and block.kind == "readonly" and block.when_changed != "remind":
        return None
    header = block.label.upper()
    if block.description:
        header += f" ({block.description})"
    if block.max_tokens is not None:
        percent = round(block.tokens * 100 / block.max_tokens)
        header += f" [{percent}% — {block.tokens}/{block.max_tokens} tokens]"
    header += f" [{_MARKERS[block.kind]}]"
    return f"{RULE}\n{header}\n{RULE}\n{block.content}"


def render_system_prompt(base_prompt: str, blocks: Sequence[BlockState]) -> str:
    """The base prompt at the top, then each block's section in order, joined by blank lines.

    Empty parts are dropped, so no blocks and an empty base prompt give ``""`` (the owner chooses a default).
    """
    parts = [base_prompt] if base_prompt else []
    for block in blocks:
        section = render_section(block)
        if section is not None:
            parts.append(section)
    return "\n\n".join(parts)
