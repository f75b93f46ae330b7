"""The model's view of a session: overlays applied, older messages truncated, conversions cached.

Why this module exists: every turn sends the model the conversation so far. Rebuilding that from scratch
each turn — applying overlays, truncating, converting UI messages to model messages — costs time in
proportion to the history, and a long conversation would pay it on every turn. Here the truncated form and
the converted model messages of each stored message are cached on its node and dropped only when that
message changes, so a turn reuses everything that did not change. The cut itself moves in steps
(``_truncate``), so the prompt prefix stays byte-identical for provider prompt caching. ``Session``
inherits this mixin; the attributes declared under ``TYPE_CHECKING`` are the tree internals it reads.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..models import ModelMessage, ui_messages_to_model_messages
from ._compaction import Compaction, plan_spans, summary_message
from ._node import Node
from ._rows import estimate_message_tokens, paused_gc
from ._truncate import MAX_TOOL_OUTPUT_CHARS, truncate_message, truncation_cutoff

__all__ = ["SessionViews"]

_Item = Node | dict[str, Any]
"""A stored message, or the synthetic summary message of an overlay."""


@dataclass(slots=True)
class _PrefixCache:
    """The converted model messages of the active window's items before the truncation cutoff.

    Between two moves of the cutoff those items do not change (appends only add items after it), so a
    turn reuses this list and converts only the few items after the cutoff. A write to a cached message,
    a new overlay, a branch switch or a moved window start drops it.
    """

    step: float
    window_start: int
    items: int = 0
    """How many items (from the window start) ``flat`` covers; always a truncation cutoff."""
    boundary: int = 0
    """The path index just after the last covered item."""
    flat: list[ModelMessage] = field(default_factory=list)


class SessionViews:
    """``read_model_view``, ``read_model_messages`` and ``token_estimate`` for ``Session`` (a mixin)."""

    if TYPE_CHECKING:
        truncation_step: float
        _nodes: dict[str, Node]
        _path: list[Node]
        _pos: dict[str, int]
        _prefix: list[int]
        _window_start: int
        _overlays: list[Compaction]
        _view_cache: _PrefixCache | None

        def _walk(self, leaf_id: str) -> list[Node]: ...
        async def _bodies(self, nodes: list[Node]) -> list[dict[str, Any]]: ...

    def _compose(
        self, nodes: list[Node], start: int, positions: Mapping[str, int] | None = None
    ) -> list[_Item]:
        """``nodes[start:]`` with overlays applied.

        ``nodes`` is a path from the root; a span may begin before ``start`` (its summary then comes first).
        ``positions`` may index a longer path that ``nodes`` is a prefix of; spans ending beyond ``nodes``
        do not apply.
        """
        if not self._overlays:
            return list(nodes[start:])
        if positions is None:
            positions = {node.id: index for index, node in enumerate(nodes)}
        items: list[_Item] = []
        index = start
        for span_start, span_end, overlay in plan_spans(positions, self._overlays):
            if span_end < start or span_end >= len(nodes):
                continue
            items.extend(nodes[index:span_start])
            items.append(summary_message(overlay))
            index = span_end + 1
        items.extend(nodes[index:])
        return items

    async def _model_items(self, leaf_id: str | None, step: float | None) -> tuple[list[_Item], int]:
        """The composed items the model sees and the truncation cutoff among them."""
        step = self.truncation_step if step is None else step
        if leaf_id is None and not self._path:
            return [], 0
        position = len(self._path) - 1 if leaf_id is None else self._pos.get(leaf_id, -1)
        if position >= self._window_start:  # the active path, or a prefix of it (a regeneration's anchor)
            items = self._compose(self._path[: position + 1], self._window_start, self._pos)
        else:
            if leaf_id is None or leaf_id not in self._nodes:
                raise KeyError(f"unknown message id {leaf_id!r}")
            nodes = self._walk(leaf_id)
            bodies = await self._bodies(nodes)
            loaded = [
                Node(n.id, n.parent_id, n.seq, n.role, n.size, n.tokens, body)
                for n, body in zip(nodes, bodies, strict=True)
            ]
            items = self._compose(loaded, 0)
        return items, truncation_cutoff(len(items), step)

    @staticmethod
    def _ui_form(item: _Item, cut: bool) -> dict[str, Any]:
        if not isinstance(item, Node):
            return truncate_message(item) if cut else item
        message = item.message
        assert message is not None, "a message of the hydrated window has no body"
        if not cut:
            return message
        if item.model_form is None:
            # A message whose whole JSON fits within the smallest limit has nothing to cut.
            small = item.size <= MAX_TOOL_OUTPUT_CHARS
            item.model_form = message if small else truncate_message(message)
        return item.model_form

    async def read_model_view(
        self, leaf_id: str | None = None, *, truncation_step: float | None = None
    ) -> list[dict[str, Any]]:
        """The UI messages the model should see, oldest first: overlays applied, older messages truncated.

        For the active path — or a ``leaf_id`` on it, such as the user message a regenerated answer replies
        to — this is the hydrated window up to that message (no store reads); for any other ``leaf_id``
        the full path to it. Older messages — before a cutoff that moves in steps of ``truncation_step``
        (default: the session's) — have text over 10,000 characters and tool outputs over 500 cut; the
        last 4 are never cut. Returned dicts may be shared with the cache: treat them as read-only.
        """
        items, cutoff = await self._model_items(leaf_id, truncation_step)
        return [self._ui_form(item, index < cutoff) for index, item in enumerate(items)]

    def _converted(self, item: _Item, cut: bool) -> list[ModelMessage]:
        if not isinstance(item, Node):
            return ui_messages_to_model_messages([self._ui_form(item, cut)])
        cache = item.converted
        if cache is None:
            cache = item.converted = {}
        converted = cache.get(cut)
        if converted is None:
            converted = cache[cut] = ui_messages_to_model_messages([self._ui_form(item, cut)])
        return converted

    def _invalidate_view(self, position: int | None = None) -> None:
        """Drop the prefix cache (when ``position`` is given: only if that path index is inside it)."""
        cache = self._view_cache
        if cache is not None and (position is None or position < cache.boundary):
            self._view_cache = None

    def _item_end(self, item: _Item) -> int:
        """The path index just after an item of the active path (after the span, for a summary)."""
        if isinstance(item, Node):
            return self._pos[item.id] + 1
        return self._pos[item["metadata"]["compaction"]["toMessageId"]] + 1

    async def read_model_messages(
        self, leaf_id: str | None = None, *, truncation_step: float | None = None
    ) -> list[ModelMessage]:
        """:meth:`read_model_view` converted with ``ui_messages_to_model_messages`` — what a turn sends.

        Each stored message is converted once per form (whole, truncated) until it changes, and for the
        active path the converted messages before the truncation cutoff are kept as one list, so a turn
        costs the conversion of the few messages after the cutoff plus one list copy, however long the
        history. The returned list is new, but the message objects in it are shared with the cache:
        build new ones instead of changing them. Raises ``ValueError`` for a malformed message.
        """
        step = self.truncation_step if truncation_step is None else truncation_step
        if leaf_id is not None and leaf_id != (self._path[-1].id if self._path else None):
            items, cutoff = await self._model_items(leaf_id, step)
            return [m for index, item in enumerate(items) for m in self._converted(item, index < cutoff)]
        if not self._path:
            return []
        cache = self._view_cache
        if cache is None or cache.step != step or cache.window_start != self._window_start:
            cache = self._view_cache = _PrefixCache(step, self._window_start, boundary=self._window_start)
        tail = self._compose(self._path, cache.boundary, self._pos)
        cutoff = truncation_cutoff(cache.items + len(tail), step)
        grow = cutoff - cache.items
        if grow < 0:  # cannot happen while the cache is valid; rebuild rather than trust it
            self._view_cache = None
            return await self.read_model_messages(truncation_step=truncation_step)
        if grow > 256:
            # A wake converts the whole window at once: one call, without filling each message's own
            # conversion cache (only needed again if this prefix cache is dropped).
            with paused_gc():
                forms = [self._ui_form(item, True) for item in tail[:grow]]
                cache.flat.extend(ui_messages_to_model_messages(forms))
        elif grow:
            for item in tail[:grow]:
                cache.flat.extend(self._converted(item, True))
        if grow:
            cache.items = cutoff
            cache.boundary = self._item_end(tail[grow - 1])
        out = list(cache.flat)
        for item in tail[grow:]:
            out.extend(self._converted(item, False))
        return out

    def token_estimate(self) -> int:
        """Estimated prompt tokens of the active path with overlays applied (what ``compact_after`` checks)."""
        total = self._prefix[-1]
        for start, end, overlay in plan_spans(self._pos, self._overlays) if self._overlays else ():
            total -= self._prefix[end + 1] - self._prefix[start]
            total += estimate_message_tokens(summary_message(overlay))
        return total
