"""Context blocks: what a block declares, what its provider can do, and how blocks from two hooks merge.

Why this module exists: the system prompt is assembled from labelled blocks (an identity, a memory the model
may rewrite, a skill catalog, a search index summary). What the model may do with a block depends only on
which methods its provider has, so kinds are decided by duck typing (like upstream ``agents/context``) and the
protocols below document the shapes. Provider methods may be sync or async.
"""

from __future__ import annotations

import inspect
import math
import re
from collections.abc import Awaitable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Literal, Protocol, TypeVar, runtime_checkable

__all__ = [
    "BlockKind",
    "ContextBlock",
    "ContextBlockError",
    "ContextProvider",
    "SearchableContextProvider",
    "SkillContextProvider",
    "WhenChanged",
    "WritableContextProvider",
    "block_kind",
    "estimate_tokens",
    "merge_blocks",
]

WhenChanged = Literal["rebuild", "remind"]
BlockKind = Literal["readonly", "writable", "skill", "searchable"]

_LABEL = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,99}$")
_T = TypeVar("_T")


class ContextBlockError(ValueError):
    """A block operation was refused (unknown label, read-only block, over ``max_tokens``...).

    The message is written for the model: the generated tools surface it verbatim as a tool error.
    """


@runtime_checkable
class ContextProvider(Protocol):
    """Read-only: ``get()`` returns the block's current text (sync or async)."""

    def get(self) -> str | Awaitable[str]: ...


@runtime_checkable
class WritableContextProvider(Protocol):
    """Writable: ``get()`` plus ``set(content)`` replacing the whole text."""

    def get(self) -> str | Awaitable[str]: ...

    def set(self, content: str) -> Awaitable[None] | None: ...


@runtime_checkable
class SkillContextProvider(Protocol):
    """Skill-like: ``get()`` lists what can be loaded; ``load(key)`` returns one entry's full text (or
    ``None`` when there is no such key); ``unload(key)`` forgets it (optional)."""

    def get(self) -> str | Awaitable[str]: ...

    def load(self, key: str) -> str | Awaitable[str | None] | None: ...


@runtime_checkable
class SearchableContextProvider(Protocol):
    """Searchable: ``get()`` is a summary; ``search(query)`` returns ranked hits (strings, ``(key, content)``
    pairs or ``{"key", "content"}`` dicts); an optional ``set(key, content)`` indexes a keyed entry."""

    def get(self) -> str | Awaitable[str]: ...

    def search(self, query: str) -> Any: ...


def block_kind(provider: object | None) -> BlockKind:
    """The kind a provider's methods make it; ``None`` (stored memory) is writable."""
    if provider is None:
        return "writable"
    if callable(getattr(provider, "search", None)):
        return "searchable"
    if callable(getattr(provider, "load", None)):
        return "skill"
    if callable(getattr(provider, "set", None)):
        return "writable"
    if callable(getattr(provider, "get", None)):
        return "readonly"
    raise TypeError(f"a context provider needs a get() method, got {provider!r}")


@dataclass(slots=True)
class ContextBlock:
    """One labelled section of the system prompt, in declaration order.

    ``provider`` is ``None`` for writable memory stored in the agent's rows. ``max_tokens`` bounds what the
    model may write (and shows usage in the header). ``when_changed="remind"`` keeps the frozen prompt as it
    is when the value changes and tells the model through a reminder instead; ``"rebuild"`` (the default;
    ``"wait"`` is accepted as upstream's name) waits for the next rebuild.
    """

    label: str
    description: str | None = None
    max_tokens: int | None = None
    provider: Any = None
    when_changed: WhenChanged = "rebuild"

    def __post_init__(self) -> None:
        if not isinstance(self.label, str) or not _LABEL.match(self.label):
            raise ValueError(
                f"context block label {self.label!r} must be 1-100 characters of letters, digits, '_', '.' or '-'"
            )
        if self.description is not None and not isinstance(self.description, str):
            raise ValueError(f"context block {self.label!r}: description must be a string")
        if self.max_tokens is not None and (
            isinstance(self.max_tokens, bool) or not isinstance(self.max_tokens, int) or self.max_tokens < 1
        ):
            raise ValueError(f"context block {self.label!r}: max_tokens must be a positive integer")
        if self.when_changed == "wait":  # type: ignore[comparison-overlap]
            self.when_changed = "rebuild"
        if self.when_changed not in ("rebuild", "remind"):
            raise ValueError(
                f"context block {self.label!r}: when_changed must be 'rebuild' or 'remind', got {self.when_changed!r}"
            )
        block_kind(self.provider)  # fails early on an object without get()

    @property
    def kind(self) -> BlockKind:
        return block_kind(self.provider)

    @property
    def writable(self) -> bool:
        """Whether ``set_context`` may write it: stored memory, a ``set`` provider, or a searchable with ``set``."""
        kind = self.kind
        return kind == "writable" or (kind == "searchable" and callable(getattr(self.provider, "set", None)))

    @classmethod
    def from_config(cls, config: ContextBlock | Mapping[str, Any]) -> ContextBlock:
        """A block from a ``ContextBlock`` or a config dict (snake_case or upstream camelCase keys)."""
        if isinstance(config, ContextBlock):
            return config
        if not isinstance(config, Mapping):
            raise TypeError(f"a context block is a ContextBlock or a dict, got {config!r}")
        aliases = {"maxTokens": "max_tokens", "whenChanged": "when_changed"}
        values = {aliases.get(key, key): value for key, value in config.items()}
        unknown = set(values) - {"label", "description", "max_tokens", "provider", "when_changed"}
        if unknown:
            raise ValueError(f"unknown context block option(s): {', '.join(sorted(unknown))}")
        if "label" not in values:
            raise ValueError("a context block needs a label")
        return cls(**values)


def estimate_tokens(text: str) -> int:
    """Provider-neutral token estimate, ``ceil(max(chars / 4, words × 1.3))`` (upstream's formula).

    Deliberately simple and deterministic: it only drives headers and ``max_tokens`` checks, and the same text
    must always render the same bytes.
    """
    if not text:
        return 0
    return math.ceil(max(len(text) / 4, len(text.split()) * 1.3))


def merge_blocks(
    primary: Iterable[ContextBlock | Mapping[str, Any]],
    legacy: Iterable[ContextBlock | Mapping[str, Any]] = (),
) -> list[ContextBlock]:
    """``configure_context()`` blocks first, then blocks declared the older session way (§8.1).

    A label appears once: a primary block wins over a legacy one; within each list the first wins.
    """
    merged: dict[str, ContextBlock] = {}
    for source in (primary, legacy):
        for item in source:
            block = ContextBlock.from_config(item)
            merged.setdefault(block.label, block)
    return list(merged.values())


async def maybe_await(value: _T | Awaitable[_T]) -> _T:
    """Providers may be sync or async; await only what needs it."""
    if inspect.isawaitable(value):
        return await value
    return value
