"""``Session``: one agent's message tree — append-only, branchable, searchable, windowed in memory.

Why this module exists: the transcript is the one structure every turn reads and writes, so it must be cheap
at any length and must never lose history. Messages are rows linked by ``parent_id`` (DESIGN.md invariant 1):
a write touches only the message it adds or updates, regeneration adds a sibling, compaction adds an
overlay. In memory the session keeps *metadata* for every message (id, parent, seq, size, token estimate)
and *bodies* only for a window at the end of the active path that fits ``hydration_byte_budget`` — so a
wake costs one metadata scan plus the window, an append costs O(1), and a 40 MiB history does not become a
40 MiB object. Everything else is read from the store on demand.

The active path runs from the root to the *active leaf*: the newest message (highest ``seq``) unless a
client switched branches with :meth:`Session.set_active_leaf`, which is persisted. Any new message becomes
the active leaf (it continues the active branch by default, or starts the branch it was appended to).

Transport-neutral: the session knows nothing of frames or connections; it reports what happened to
listeners (:meth:`Session.add_listener`) and Think turns that into ``cf_agent_session`` frames.
"""

from __future__ import annotations

import asyncio
import copy
import logging
import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from itertools import accumulate
from typing import Any

from ..chat import sanitize_message
from ..storage import Store
from ._compaction import Compaction
from ._eviction import AttachmentSink, MediaEviction, StoreAttachmentSink
from ._io import MessageIO, NewRow, now
from ._node import Node as _Node
from ._rows import (
    ROW_BUDGET_BYTES,
    EncodedMessage,
    encode_json,
    encode_message,
    parse_json,
    paused_gc,
)
from ._search import fts_clear, search_messages
from ._session_extras import SessionExtras
from ._views import SessionViews

__all__ = ["DEFAULT_HYDRATION_BYTE_BUDGET", "HydrationInfo", "Session", "SessionEvent"]

logger = logging.getLogger("ponder.sessions")

DEFAULT_HYDRATION_BYTE_BUDGET = 32 * 1024 * 1024
_ACTIVE_LEAF = "active_leaf"
_OMITTED: Any = object()


@dataclass(frozen=True, slots=True)
class SessionEvent:
    """Something that changed: ``kind`` is append, update, delete, clear, branch, compact, status,
    compaction_error, media_evicted or hydration_windowed; ``data`` holds the details."""

    kind: str
    data: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class HydrationInfo:
    """What the last wake loaded: ``truncated`` when the window is shorter than the active path."""

    truncated: bool
    total_bytes: int
    hydrated_bytes: int
    hydrated_messages: int
    path_length: int
    budget_bytes: float


class Session(SessionViews, SessionExtras):
    """One agent's messages: a parent-linked tree with an in-memory index and a hydrated window.

    One writer per agent (DESIGN.md invariant 3): create one ``Session`` per live agent and ``await
    open()`` it before use. Message dicts returned by synchronous accessors are the live cache — treat
    them as read-only; async readers return independent copies.
    """

    def __init__(
        self,
        store: Store,
        agent_id: str,
        *,
        hydration_byte_budget: float = DEFAULT_HYDRATION_BYTE_BUDGET,
        hydration_min_messages: int = 4,
        truncation_step: float = 8,
        media_eviction: MediaEviction | bool = True,
        attachments: AttachmentSink | None = None,
        row_budget: int = ROW_BUDGET_BYTES,
    ) -> None:
        self.store = store
        self.agent_id = agent_id
        self.hydration_byte_budget = hydration_byte_budget
        self.hydration_min_messages = max(1, hydration_min_messages)
        self.truncation_step = truncation_step
        if media_eviction is True:
            media_eviction = MediaEviction()
        self.media_eviction: MediaEviction | None = media_eviction or None
        self.attachments: AttachmentSink = attachments or StoreAttachmentSink(store, agent_id)
        self.row_budget = row_budget
        self._io = MessageIO(store, agent_id)
        self._lock = asyncio.Lock()
        self._listeners: list[Callable[[SessionEvent], Any]] = []
        self._tasks: set[asyncio.Task[Any]] = set()
        self._reset()
        self.loaded = False
        SessionExtras.__init__(self)

    def __repr__(self) -> str:
        return f"Session(agent_id={self.agent_id!r}, messages={len(self._nodes)})"

    def _reset(self) -> None:
        self._nodes: dict[str, _Node] = {}
        self._children: dict[str | None, list[str]] = {}
        self._latest: _Node | None = None
        self._pointer: str | None = None
        self._next_seq = 1
        self._overlays: list[Compaction] = []
        self._path: list[_Node] = []
        self._pos: dict[str, int] = {}
        self._prefix: list[int] = [0]
        self._window_start = 0
        self._window_bytes = 0
        self._path_bytes = 0
        self._announced: tuple[int, int] | None = None
        self._view_cache = None

    # -- lifecycle ---------------------------------------------------------------------------------

    async def open(self) -> None:
        """Apply pending migrations, import the legacy Think table once, and hydrate the active window."""
        if self.loaded:
            return
        await self.store.migrate()
        meta = await self._io.meta()
        if not meta.get("legacy_imported"):
            from ._legacy import import_legacy_messages

            await import_legacy_messages(self)
        await self._load(meta)
        self.loaded = True
        self._seed_media_candidates()
        self._after_write()

    async def _load(self, meta: Mapping[str, Any]) -> None:
        self._reset()
        rows = await self.store.fetch_all(
            "SELECT id, seq, summary, from_message_id, to_message_id, created_at"
            " FROM ponder_session_compactions WHERE agent_id = ? ORDER BY seq",
            (self.agent_id,),
        )
        self._overlays = [
            Compaction(
                r["id"], r["seq"], r["summary"], r["from_message_id"], r["to_message_id"], r["created_at"]
            )
            for r in rows
        ]
        nodes, children = self._nodes, self._children
        node: _Node | None = None
        metadata = await self._io.metadata()
        with paused_gc():
            for message_id, parent_id, seq, role, size, _chunks, tokens in metadata:
                node = _Node(message_id, parent_id, seq, role, size, tokens)
                nodes[message_id] = node
                if parent_id in children:
                    children[parent_id].append(message_id)
                else:
                    children[parent_id] = [message_id]
        self._latest = node
        if self._latest is not None:
            self._next_seq = self._latest.seq + 1
        pointer = meta.get(_ACTIVE_LEAF)
        self._pointer = pointer if isinstance(pointer, str) and pointer in self._nodes else None
        await self._rebuild_path(initial=True)

    def release(self) -> None:
        """Forget the in-memory index and bodies (the owner is going away); ``open()`` loads them again."""
        self._reset()
        self.loaded = False

    async def close(self) -> None:
        """Cancel background passes (compaction, eviction); reads and writes keep working."""
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    async def wait_idle(self) -> None:
        """Wait until background compaction and eviction passes (including chained ones) have finished."""
        while self._tasks:
            await asyncio.gather(*list(self._tasks), return_exceptions=True)

    def _spawn(self, coro: Any) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    # -- events ------------------------------------------------------------------------------------

    def add_listener(self, listener: Callable[[SessionEvent], Any]) -> Callable[[], None]:
        """Call ``listener(event)`` after every change; returns a function that removes it."""
        self._listeners.append(listener)
        return lambda: self._listeners.remove(listener) if listener in self._listeners else None

    def _emit(self, kind: str, **data: Any) -> None:
        event = SessionEvent(kind, data)
        for listener in list(self._listeners):
            try:
                listener(event)
            except Exception:
                logger.exception("%r: session listener failed on %s", self, kind)

    # -- reading: index ------------------------------------------------------------------------------

    def __contains__(self, message_id: object) -> bool:
        return message_id in self._nodes

    def __len__(self) -> int:
        return len(self._nodes)

    @property
    def active_leaf_id(self) -> str | None:
        """The leaf of the active path: the switched-to branch, else the newest message."""
        return self._path[-1].id if self._path else None

    @property
    def latest_leaf_id(self) -> str | None:
        """The newest message (highest ``seq``) — always a leaf."""
        return self._latest.id if self._latest else None

    @property
    def path_length(self) -> int:
        """Messages on the whole active path (hydrated or not)."""
        return len(self._path)

    @property
    def hydration(self) -> HydrationInfo:
        """The hydrated window right now: bytes and messages loaded versus the whole active path."""
        return HydrationInfo(
            truncated=self._window_start > 0,
            total_bytes=self._path_bytes,
            hydrated_bytes=self._window_bytes,
            hydrated_messages=len(self._path) - self._window_start,
            path_length=len(self._path),
            budget_bytes=self.hydration_byte_budget,
        )

    @property
    def compactions(self) -> list[Compaction]:
        return list(self._overlays)

    def parent_of(self, message_id: str) -> str | None:
        node = self._nodes.get(message_id)
        return node.parent_id if node else None

    def get(self, message_id: str) -> dict[str, Any] | None:
        """The cached (live, read-only) message when it is in the hydrated window, else ``None``."""
        node = self._nodes.get(message_id)
        return node.message if node else None

    def active_messages(self, last: int | None = None) -> list[dict[str, Any]]:
        """The hydrated window of the active path, oldest first (live dicts: read-only, copy to change).

        ``last=n`` returns only its newest ``n`` messages (without building the whole list).
        """
        start = self._window_start
        if last is not None:
            start = max(start, len(self._path) - max(0, last))
        return [node.message for node in self._path[start:]]  # type: ignore[misc]

    def active_messages_json(self) -> str:
        """:meth:`active_messages` as one compact JSON array text.

        Each message's encoding is kept until the message changes, so a client frame carrying a long
        transcript costs a join, not an encoding of every message, on each turn.
        """
        texts: list[str] = []
        for node in self._path[self._window_start :]:
            cached = node.wire
            if cached is None or cached[0] is not node.message:
                cached = node.wire = (node.message, encode_json(node.message))  # type: ignore[arg-type]
            texts.append(cached[1])
        return "[" + ",".join(texts) + "]"

    def branch_ids(self, message_id: str | None) -> list[str]:
        """Ids of the children of ``message_id`` (``None``: the roots), oldest first."""
        return list(self._children.get(message_id, ()))

    # -- reading: from the store -------------------------------------------------------------------

    async def get_message(self, message_id: str) -> dict[str, Any] | None:
        """One stored message (an independent copy), or ``None``."""
        node = self._nodes.get(message_id)
        if node is None:
            return None
        if node.message is not None:
            return copy.deepcopy(node.message)
        return (await self._io.load_messages([message_id])).get(message_id)

    async def get_latest_leaf(self) -> dict[str, Any] | None:
        """The newest message (an independent copy), or ``None`` when the session is empty."""
        return await self.get_message(self._latest.id) if self._latest else None

    def _walk(self, leaf_id: str) -> list[_Node]:
        chain: list[_Node] = []
        nodes = self._nodes
        node = nodes.get(leaf_id)
        limit = len(nodes)  # a parent cycle (corrupt rows) cannot make this loop forever
        while node is not None and len(chain) < limit:
            chain.append(node)
            parent = node.parent_id
            node = nodes.get(parent) if parent is not None else None
        chain.reverse()
        return chain

    async def _bodies(self, nodes: list[_Node]) -> list[dict[str, Any]]:
        missing = [node.id for node in nodes if node.message is None]
        loaded = await self._io.load_messages(missing) if missing else {}
        return [
            copy.deepcopy(node.message) if node.message is not None else loaded[node.id] for node in nodes
        ]

    async def get_history(
        self, leaf_id: str | None = None, *, compacted: bool = False
    ) -> list[dict[str, Any]]:
        """The full path root → ``leaf_id`` (the active leaf by default), as independent copies.

        Unlike :meth:`active_messages` this is never windowed: messages outside the hydrated window are read
        from the store. With ``compacted=True`` compaction overlays are applied (each span replaced by its
        summary message), which is what a compact function sees.
        """
        if leaf_id is not None and leaf_id not in self._nodes:
            raise KeyError(f"unknown message id {leaf_id!r}")
        nodes = self._path if leaf_id is None or leaf_id == self.active_leaf_id else self._walk(leaf_id)
        if not compacted:
            return await self._bodies(nodes)
        items = self._compose(nodes, 0, self._pos if nodes is self._path else None)
        bodies = iter(await self._bodies([item for item in items if isinstance(item, _Node)]))
        return [next(bodies) if isinstance(item, _Node) else item for item in items]

    async def get_branches(self, message_id: str | None) -> list[dict[str, Any]]:
        """The children of ``message_id`` (regenerated answers are siblings), oldest first, as copies."""
        return await self._bodies([self._nodes[i] for i in self._children.get(message_id, ())])

    async def search(self, query: str, limit: int = 10) -> list[dict[str, Any]]:
        """Messages of this agent (all branches) containing ``query`` as a phrase: ``[{id, role, content}]``.

        Queries are never interpreted as FTS syntax; a query the engine rejects returns ``[]``.
        """
        return await search_messages(self.store, self.agent_id, query, limit)

    # -- the active path and its window -----------------------------------------------------------------

    def _budget(self) -> float:
        budget = self.hydration_byte_budget
        return math.inf if budget is None or budget <= 0 or not math.isfinite(budget) else budget

    async def _rebuild_path(self, *, initial: bool = False) -> None:
        leaf = self._pointer or (self._latest.id if self._latest else None)
        self._path = self._walk(leaf) if leaf else []
        self._pos = {node.id: index for index, node in enumerate(self._path)}
        self._prefix = list(accumulate((node.tokens for node in self._path), initial=0))
        self._invalidate_view()
        await self._hydrate(initial=initial)

    async def _hydrate(self, *, initial: bool) -> None:
        """Choose the window (the longest suffix of the path within the byte budget, ≥ the minimum) and load it."""
        budget = self._budget()
        path = self._path
        start, used = len(path), 0
        while start > 0:
            size = path[start - 1].size
            if used + size > budget and len(path) - start >= self.hydration_min_messages:
                break
            used += size
            start -= 1
        window = path[start:]
        single_branch = len(self._nodes) == len(path)
        in_window = {node.id for node in window} if not (initial and single_branch) else set()
        if not initial:
            for node in self._nodes.values():
                if node.message is not None and node.id not in in_window:
                    node.forget()
        missing = [node for node in window if node.message is None]
        if missing:
            first_seq = missing[0].seq
            off_path = 0
            if not single_branch:
                off_path = sum(
                    n.size for n in self._nodes.values() if n.seq >= first_seq and n.id not in in_window
                )
            wanted_bytes = sum(n.size for n in missing)
            range_scan = off_path <= wanted_bytes // 4 and len(missing) > 50
            wanted = [n.id for n in missing]
            if range_scan and single_branch:
                # One branch: the scan returns exactly the window's rows, in path order (unless a message
                # is split into chunks, which the keyed path below reassembles).
                ids, parsed = await self._io.load_range(first_seq)
                if ids == wanted:
                    for node, message in zip(missing, parsed, strict=True):
                        node.message = message
                    missing = []
            if missing:
                bodies = await self._io.load_messages(wanted, from_seq=first_seq if range_scan else None)
                for node in missing:
                    node.message = bodies[node.id]
        self._window_start = start
        self._window_bytes = used
        self._path_bytes = total = sum(node.size for node in path)
        if start > 0 and self._announced != (total, len(window)):
            self._announced = (total, len(window))
            if initial:
                logger.warning(
                    "%r: the active path holds %d bytes, more than the hydration budget of %s; "
                    "loaded the newest %d of %d messages (get_history() still reads them all)",
                    self,
                    total,
                    self.hydration_byte_budget,
                    len(window),
                    len(path),
                )
            self._emit(
                "hydration_windowed",
                total_bytes=total,
                budget_bytes=self.hydration_byte_budget,
                hydrated_messages=len(window),
            )

    def _trim_window(self) -> None:
        """Keep the cached window within the byte budget as messages are added (never below the minimum)."""
        budget = self._budget()
        path = self._path
        while self._window_bytes > budget and len(path) - self._window_start > self.hydration_min_messages:
            node = path[self._window_start]
            node.forget()
            self._window_bytes -= node.size
            self._window_start += 1

    async def set_active_leaf(self, message_id: str | None) -> str | None:
        """Switch the active path to the branch through ``message_id`` (``None``: back to the newest message).

        The active leaf becomes the newest message in the subtree of ``message_id`` (the message itself when
        it has no children). The choice is persisted and lasts until the next append, which makes the new
        message the active leaf. Returns the new active leaf id.
        """
        async with self._lock:
            if message_id is not None and message_id not in self._nodes:
                raise KeyError(f"unknown message id {message_id!r}")
            leaf = self._newest_in_subtree(message_id) if message_id is not None else None
            if leaf is not None and self._latest is not None and leaf == self._latest.id:
                leaf = None
            if leaf != self._pointer:
                if leaf is None:
                    await self._io.delete_meta(_ACTIVE_LEAF)
                else:
                    await self._io.put_meta(_ACTIVE_LEAF, leaf)
                self._pointer = leaf
                await self._rebuild_path(initial=False)
        self._emit("branch", leaf_id=self.active_leaf_id)
        self._after_write()
        return self.active_leaf_id

    def _newest_in_subtree(self, message_id: str) -> str:
        best = self._nodes[message_id]
        stack = [message_id]
        while stack:
            for child in self._children.get(stack.pop(), ()):
                node = self._nodes[child]
                if not self._children.get(child) and node.seq > best.seq:
                    best = node
                stack.append(child)
        return best.id

    # -- writing ---------------------------------------------------------------------------------------

    def _resolve_parent(self, parent_id: Any) -> str | None:
        if parent_id is _OMITTED:
            return self.active_leaf_id
        if parent_id is not None and parent_id not in self._nodes:
            raise KeyError(f"unknown parent message id {parent_id!r}")
        return parent_id

    @staticmethod
    def _check(message: Mapping[str, Any]) -> str:
        message_id = message.get("id") if isinstance(message, Mapping) else None
        if not isinstance(message_id, str) or not message_id:
            raise ValueError("a message needs a non-empty string 'id'")
        return message_id

    async def append(self, message: Mapping[str, Any], parent_id: Any = _OMITTED) -> bool:
        """Add a message under ``parent_id`` (omitted: the active leaf; ``None``: a new root).

        Idempotent by id: a message whose id is stored already is left as it is and ``False`` is returned.
        Every write is sanitized first (OpenAI's ephemeral item ids dropped, empty reasoning parts removed).
        The new message becomes the active leaf. An unknown explicit parent raises ``KeyError``.
        """
        return bool(await self.append_many([message], parent_id))

    async def append_many(
        self, messages: Iterable[Mapping[str, Any]], parent_id: Any = _OMITTED
    ) -> list[str]:
        """Append messages as a chain (each the child of the one before) in one transaction.

        Messages whose id is already stored are skipped, but the chain continues from them. Returns the
        ids actually inserted.
        """
        items = list(messages)
        for message in items:
            self._check(message)
        items = [sanitize_message(message) for message in items]  # type: ignore[arg-type]
        async with self._lock:
            parent = self._resolve_parent(parent_id)
            rows: list[NewRow] = []
            cached: list[dict[str, Any]] = []
            pending: set[str] = set()
            for message in items:
                message_id = message["id"]
                if message_id in self._nodes or message_id in pending:
                    parent = message_id
                    continue
                encoded = encode_message(message, row_budget=self.row_budget)
                seq = self._next_seq + len(rows)
                role = str(message.get("role", ""))
                rows.append(NewRow(message_id, parent, seq, role, encoded, now()))
                cached.append(parse_json(encoded.json_text))
                pending.add(message_id)
                parent = message_id
            if not rows:
                return []
            async with self.store.transaction():
                await self._io.insert(rows)
                if self._pointer is not None:
                    await self._io.delete_meta(_ACTIVE_LEAF)
            self._next_seq += len(rows)
            await self._index_new(rows, cached)
        for row in rows:
            self._emit("append", id=row.id, parent_id=row.parent_id)
            self._note_media(row.id, row.encoded)
        self._after_write()
        return [row.id for row in rows]

    async def _index_new(self, rows: list[NewRow], cached: list[dict[str, Any]]) -> None:
        first_parent = rows[0].parent_id
        self._pointer = None
        nodes = []
        for row, body in zip(rows, cached, strict=True):
            node = _Node(row.id, row.parent_id, row.seq, row.role, row.encoded.size, row.encoded.tokens, body)
            self._nodes[node.id] = node
            self._children.setdefault(node.parent_id, []).append(node.id)
            nodes.append(node)
        self._latest = nodes[-1]
        anchor = self._pos.get(first_parent) if first_parent is not None else -1
        chained = all(rows[i].parent_id == rows[i - 1].id for i in range(1, len(rows)))
        if anchor is None or anchor + 1 < self._window_start or not chained:
            await self._rebuild_path()  # a branch elsewhere (or below the window): re-plan the window
            return
        if anchor + 1 < len(self._path):
            self._invalidate_view(anchor + 1)
        for dropped in self._path[anchor + 1 :]:  # a regeneration: the old branch leaves the active path
            self._pos.pop(dropped.id, None)
            self._window_bytes -= dropped.size
            self._path_bytes -= dropped.size
            dropped.forget()
        del self._path[anchor + 1 :]
        del self._prefix[anchor + 2 :]
        for node in nodes:
            self._pos[node.id] = len(self._path)
            self._path.append(node)
            self._prefix.append(self._prefix[-1] + node.tokens)
            self._window_bytes += node.size
            self._path_bytes += node.size
        self._trim_window()

    async def upsert(self, message: Mapping[str, Any], parent_id: Any = _OMITTED) -> bool:
        """Update a stored message in place (by id), or append it when it is new. Returns True when new.

        An update whose content is unchanged writes nothing. ``parent_id`` only matters for a new message.
        """
        message_id = self._check(message)
        if message_id not in self._nodes:
            return await self.append(message, parent_id)
        message = sanitize_message(message)  # type: ignore[arg-type]
        encoded = encode_message(message, row_budget=self.row_budget)
        async with self._lock:
            node = self._nodes.get(message_id)
            if node is None:  # deleted meanwhile
                raise KeyError(f"unknown message id {message_id!r}")
            if node.message is not None:
                # The cached dict itself, changed in place by the caller, cannot be compared: write it.
                if node.message is not message and node.message == message:
                    return False
            elif await self._io.content_hash(message_id) == encoded.hash:
                return False
            await self._write_body(node, str(message.get("role", node.role)), encoded)
        self._emit("update", id=message_id)
        self._note_media(message_id, encoded)
        self._after_write()
        return False

    async def _write_body(self, node: _Node, role: str, encoded: EncodedMessage) -> None:
        """Rewrite a message's rows and refresh its node (caller holds the lock)."""
        async with self.store.transaction():
            await self._io.rewrite(node.id, node.seq, role, encoded)
        delta_tokens = encoded.tokens - node.tokens
        delta_bytes = encoded.size - node.size
        node.role, node.size, node.tokens = role, encoded.size, encoded.tokens
        node.invalidate()
        position = self._pos.get(node.id)
        if position is not None:
            self._invalidate_view(position)
        if position is not None:
            if delta_tokens:
                for index in range(position + 1, len(self._prefix)):
                    self._prefix[index] += delta_tokens
            self._path_bytes += delta_bytes
        if node.message is not None or (position is not None and position >= self._window_start):
            node.message = parse_json(encoded.json_text)
            if position is not None and position >= self._window_start:
                self._window_bytes += delta_bytes

    async def delete(self, message_id: str) -> bool:
        """Delete one message (and overlays that start or end at it); its children move up to its parent.

        An explicit, user-requested removal — the only way besides :meth:`clear` that rows disappear.
        """
        async with self._lock:
            node = self._nodes.get(message_id)
            if node is None:
                return False
            on_path = message_id in self._pos
            async with self.store.transaction():
                await self._io.delete(message_id, node.parent_id)
                if self._pointer == message_id:
                    await self._io.delete_meta(_ACTIVE_LEAF)
            if self._pointer == message_id:
                self._pointer = None
            del self._nodes[message_id]
            siblings = self._children.get(node.parent_id, [])
            if message_id in siblings:
                siblings.remove(message_id)
            orphans = self._children.pop(message_id, [])
            for child in orphans:
                self._nodes[child].parent_id = node.parent_id
            if orphans:
                merged = siblings + orphans
                merged.sort(key=lambda i: self._nodes[i].seq)
                self._children[node.parent_id] = merged
            self._overlays = [
                o for o in self._overlays if message_id not in (o.from_message_id, o.to_message_id)
            ]
            self._invalidate_view()
            if self._latest is node:
                self._latest = max(self._nodes.values(), key=lambda n: n.seq, default=None)
            if on_path or self._pointer is None:
                await self._rebuild_path()
        self._emit("delete", id=message_id)
        self._after_write()
        return True

    async def clear(self) -> None:
        """Delete every message, chunk, index entry, overlay and the branch choice of this agent.

        Background compaction and eviction passes are cancelled first. Files already evicted to the
        workspace stay (they belong to the workspace).
        """
        current = asyncio.current_task()
        pending = [task for task in self._tasks if task is not current]
        for task in pending:
            task.cancel()
        await asyncio.gather(*pending, return_exceptions=True)
        async with self._lock:
            store, agent = self.store, self.agent_id
            async with store.transaction():
                await store.execute(fts_clear(store.dialect), (agent,))
                for table in (
                    "ponder_session_message_chunks",
                    "ponder_session_messages",
                    "ponder_session_compactions",
                ):
                    await store.execute(f"DELETE FROM {table} WHERE agent_id = ?", (agent,))
                await self._io.delete_meta(_ACTIVE_LEAF)
            self._reset()
            self._clear_extras()
        self._emit("clear")
        self._emit_status()
