"""``Node``: what the session keeps in memory for one stored message.

Why this module exists: the in-memory index holds a node for every message of an agent (so it must stay
small: metadata only) and, for the hydrated window, the parsed body plus the derived forms a turn needs
(the truncated form and the converted model messages). Keeping the caches on the node ties their lifetime
to the message: a write invalidates exactly the caches of the message it changed.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ["Node"]


@dataclass(slots=True)
class Node:
    id: str
    parent_id: str | None
    seq: int
    role: str
    size: int
    """UTF-8 bytes of the stored JSON (what hydration charges)."""
    tokens: int
    message: dict[str, Any] | None = None
    """The parsed body while the message is in the hydrated window (or was just written)."""
    model_form: dict[str, Any] | None = None
    """The body as the model sees it once older than the truncation cutoff."""
    converted: dict[bool, list[Any]] | None = None
    """Model messages converted from the full (False) and truncated (True) forms."""
    wire: tuple[dict[str, Any], str] | None = None
    """``(message, its compact JSON)``: the encoding a transcript frame reuses while ``message`` is current."""

    def invalidate(self) -> None:
        """The body changed: drop what was derived from it."""
        self.model_form = None
        self.converted = None
        self.wire = None

    def forget(self) -> None:
        """Leave the hydrated window: drop the body and everything derived from it."""
        self.message = None
        self.model_form = None
        self.converted = None
        self.wire = None
