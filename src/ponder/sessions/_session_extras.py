"""The session's background work: compaction (manual and automatic), media eviction, and status.

Why this module exists: these three share one shape — decide cheaply after each write whether work is due,
then do it off the write path, bounded, and report through the session's listeners — and none of them is
needed to read or append. Keeping them apart from the tree code keeps both halves small. ``Session``
inherits this mixin; the attributes declared under ``TYPE_CHECKING`` are the tree internals it relies on.
"""

from __future__ import annotations

import hashlib
import logging
import math
import uuid
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ._compaction import CompactFunction, Compaction
from ._eviction import EvictionResult, evict_message_media, eviction_cutoff
from ._io import now
from ._rows import EncodedMessage, encode_message, parse_json

if TYPE_CHECKING:
    import asyncio

    from ._eviction import AttachmentSink, MediaEviction
    from ._io import MessageIO
    from ._node import Node as _Node

__all__ = ["SessionExtras"]

logger = logging.getLogger("ponder.sessions")

ErrorHandler = Callable[[BaseException], Any]


class SessionExtras:
    """Compaction, media eviction and status for :class:`~ponder.sessions.Session` (a mixin)."""

    if TYPE_CHECKING:
        agent_id: str
        store: Any
        row_budget: int
        truncation_step: float
        media_eviction: MediaEviction | None
        attachments: AttachmentSink
        _io: MessageIO
        _lock: asyncio.Lock
        _nodes: dict[str, _Node]
        _path: list[_Node]
        _pos: dict[str, int]
        _overlays: list[Compaction]
        _listeners: list[Any]

        def _emit(self, kind: str, **data: Any) -> None: ...
        def _invalidate_view(self, position: int | None = None) -> None: ...
        def _spawn(self, coro: Any) -> None: ...
        def token_estimate(self) -> int: ...
        async def _write_body(self, node: _Node, role: str, encoded: EncodedMessage) -> None: ...
        async def get_history(
            self, leaf_id: str | None = None, *, compacted: bool = False
        ) -> list[dict[str, Any]]: ...

    def __init__(self) -> None:
        self._compact_fn: CompactFunction | None = None
        self._compact_threshold: int | None = None
        self._compaction_error_handler: ErrorHandler | None = None
        self._compacting = False
        self._compact_noop_at: int | None = None
        #: Context blocks declared the older way (``with_context``); Think merges them after its
        #: ``configure_context()`` blocks (``ponder.context.merge_blocks``).
        self.context_blocks: list[dict[str, Any]] = []
        self._clear_extras()

    def _clear_extras(self) -> None:
        self._media_candidates: set[str] = set()
        self._evicting = False
        self._evict_again = False
        self._compact_noop_at = None

    # -- configuration (chainable, for Think's ``configure_session``) ------------------------------------

    def on_compaction(self, fn: CompactFunction) -> Any:
        """Use ``fn`` (e.g. :func:`create_compact_function`) to compact; returns the session for chaining."""
        self._compact_fn = fn
        return self

    def with_context(self, label: str, **options: Any) -> Any:
        """Declare a prompt context block (the older session way; prefer Think's ``configure_context()``).

        ``options`` are those of ``ponder.context.ContextBlock`` (``description``, ``max_tokens``, ``provider``,
        ``when_changed``). Returns the session for chaining.
        """
        self.context_blocks.append({"label": label, **options})
        return self

    def compact_after(self, tokens: int) -> Any:
        """Compact in the background once the active path's estimated tokens exceed ``tokens``.

        Checked after every write. Set it well above a summary plus the recent messages a compaction keeps,
        or every append compacts again.
        """
        if tokens <= 0:
            raise ValueError("compact_after() needs a positive token threshold")
        self._compact_threshold = int(tokens)
        return self

    def on_compaction_error(self, handler: ErrorHandler) -> Any:
        """Call ``handler(error)`` when an automatic compaction fails (it is logged and reported either way)."""
        self._compaction_error_handler = handler
        return self

    # -- status ------------------------------------------------------------------------------------------

    def status(self) -> dict[str, Any]:
        """``{"phase": "idle" | "compacting", "tokenEstimate": n, "tokenThreshold": n | None}``."""
        return {
            "phase": "compacting" if self._compacting else "idle",
            "tokenEstimate": self.token_estimate(),
            "tokenThreshold": self._compact_threshold,
        }

    def status_frame(self) -> dict[str, Any]:
        """The ``cf_agent_session`` frame Think broadcasts after writes."""
        return {"type": "cf_agent_session", **self.status()}

    @staticmethod
    def error_frame(error: BaseException | str) -> dict[str, Any]:
        """The ``cf_agent_session_error`` frame for a failed automatic compaction."""
        return {"type": "cf_agent_session_error", "error": str(error)}

    def _emit_status(self) -> None:
        if self._listeners:
            self._emit("status", **self.status())

    def _after_write(self) -> None:
        """Cheap checks after every write: is a compaction or an eviction pass due? Then report status."""
        self._emit_status()
        self._maybe_compact()
        self._maybe_evict()

    # -- compaction ----------------------------------------------------------------------------------------

    async def add_compaction(self, summary: str, from_message_id: str, to_message_id: str) -> Compaction:
        """Store an overlay: reading the path for the model shows ``summary`` instead of the span.

        ``from_message_id`` must be ``to_message_id`` or one of its ancestors. Nothing else changes.
        """
        async with self._lock:
            if from_message_id not in self._nodes or to_message_id not in self._nodes:
                raise KeyError(f"unknown message id in span {from_message_id!r} … {to_message_id!r}")
            node: _Node | None = self._nodes[to_message_id]
            seen: set[str] = set()
            while node is not None and node.id != from_message_id and node.id not in seen:
                seen.add(node.id)
                node = self._nodes.get(node.parent_id) if node.parent_id is not None else None
            if node is None or node.id != from_message_id:
                raise ValueError(f"{from_message_id!r} is not on the path to {to_message_id!r}")
            seq = max((o.seq for o in self._overlays), default=0) + 1
            overlay = Compaction(uuid.uuid4().hex, seq, summary, from_message_id, to_message_id, now())
            await self.store.execute(
                "INSERT INTO ponder_session_compactions (agent_id, id, seq, summary, from_message_id,"
                " to_message_id, created_at) VALUES (?, ?, ?, ?, ?, ?, ?)",
                (
                    self.agent_id,
                    overlay.id,
                    overlay.seq,
                    summary,
                    from_message_id,
                    to_message_id,
                    overlay.created_at,
                ),
            )
            self._overlays.append(overlay)
            self._invalidate_view()
        self._emit("compact", id=overlay.id, from_message_id=from_message_id, to_message_id=to_message_id)
        return overlay

    async def compact(self) -> Compaction | None:
        """Run the compaction function over the active path now; store and return the overlay it asks for.

        Returns ``None`` when there is no function, another compaction is running, or the function finds
        nothing to compact. Errors propagate (automatic compaction reports them instead).
        """
        if self._compact_fn is None or self._compacting:
            return None
        self._compacting = True
        self._emit_status()
        try:
            view = await self.get_history(compacted=True)
            plan = await self._compact_fn(view)
            if plan is None:
                self._compact_noop_at = len(self._path)
                return None
            return await self.add_compaction(plan.summary, plan.from_message_id, plan.to_message_id)
        finally:
            self._compacting = False
            self._emit_status()

    def _maybe_compact(self) -> None:
        threshold = self._compact_threshold
        if self._compact_fn is None or threshold is None or self._compacting:
            return
        if self._compact_noop_at == len(self._path) or self.token_estimate() <= threshold:
            return
        self._spawn(self._auto_compact())

    async def _auto_compact(self) -> None:
        try:
            await self.compact()
        except Exception as exc:
            logger.exception("%r: automatic compaction failed", self)
            self._emit("compaction_error", error=str(exc))
            if self._compaction_error_handler is not None:
                try:
                    result = self._compaction_error_handler(exc)
                    if hasattr(result, "__await__"):
                        await result
                except Exception:
                    logger.exception("%r: the compaction error handler failed", self)

    # -- media eviction ------------------------------------------------------------------------------------

    def _note_media(self, message_id: str, encoded: EncodedMessage) -> None:
        policy = self.media_eviction
        if policy is None:
            return
        text = encoded.json_text
        if encoded.size >= policy.min_part_bytes and ('"data:' in text or '"data":"' in text):
            self._media_candidates.add(message_id)
        else:
            self._media_candidates.discard(message_id)

    def _seed_media_candidates(self) -> None:
        """After a wake: any large message on the active path may hold media (bodies are not read here)."""
        policy = self.media_eviction
        if policy is not None:
            self._media_candidates.update(n.id for n in self._path if n.size >= policy.min_part_bytes)

    def _aged_candidates(self) -> list[str]:
        policy = self.media_eviction
        if policy is None or not self._media_candidates:
            return []
        cutoff = eviction_cutoff(len(self._path), policy, self.truncation_step)
        aged = [(self._pos.get(i, math.inf), i) for i in self._media_candidates]
        return [i for position, i in sorted(aged) if position < cutoff]

    def _maybe_evict(self) -> None:
        if self.media_eviction is None or not self._media_candidates:
            return
        if self._evicting:
            self._evict_again = True
            return
        if self._aged_candidates():
            self._evicting = True
            self._spawn(self._eviction_loop())

    def schedule_media_eviction(self) -> None:
        """Start a background eviction pass now if aged media is waiting (passes chain while a backlog remains)."""
        self._maybe_evict()

    async def _eviction_loop(self) -> None:
        try:
            while True:
                self._evict_again = False
                result = await self.evict_media()
                if not ((result.more and result.scanned) or self._evict_again):
                    break
        except Exception:
            logger.exception("%r: media eviction pass failed; a later write retries it", self)
        finally:
            self._evicting = False

    async def evict_media(self) -> EvictionResult:
        """One bounded eviction pass over aged messages of the active path (see ``MediaEviction``).

        Bytes are written to :attr:`attachments` before the row is rewritten; a message that changed while
        its files were written is left for a later pass. Rows are rewritten without an update event; a
        ``media_evicted`` event reports the pass. A second pass over the same messages does nothing.
        """
        policy = self.media_eviction
        result = EvictionResult()
        if policy is None:
            return result
        aged = self._aged_candidates()
        if aged:  # rows without any inline data (long texts, say) are dropped without being parsed
            possible = await self._io.may_hold_media(aged)
            self._media_candidates.difference_update(i for i in aged if i not in possible)
            aged = [i for i in aged if i in possible]
        batch = aged[: policy.max_rows_per_pass]
        result.more = len(aged) > len(batch)
        for message_id in batch:
            if message_id not in self._nodes:
                self._media_candidates.discard(message_id)
                continue
            result.scanned += 1
            text = (await self._io.load_texts([message_id])).get(message_id)
            if text is None:
                self._media_candidates.discard(message_id)
                continue
            message, files = evict_message_media(parse_json(text), policy.min_part_bytes)
            if not files:
                self._media_candidates.discard(message_id)
                continue
            for file in files:
                await self.attachments.write_bytes(file.path, file.data, media_type=file.media_type)
            expected = hashlib.sha256(text.encode("utf-8")).hexdigest()
            async with self._lock:
                node = self._nodes.get(message_id)
                if node is None or await self._io.content_hash(message_id) != expected:
                    continue  # changed while the files were written: a later pass looks again
                await self._write_body(node, node.role, encode_message(message, row_budget=self.row_budget))
            self._media_candidates.discard(message_id)
            result.messages += 1
            result.parts += len(files)
            result.bytes += sum(len(file.data) for file in files)
            result.paths.extend(file.path for file in files)
        if result.messages:
            self._emit(
                "media_evicted",
                messages=result.messages,
                parts=result.parts,
                bytes=result.bytes,
                paths=list(result.paths),
            )
        return result
