"""Media eviction: aged inline media leaves the conversation for a file, with a marker in its place.

Why this module exists: a screenshot the model has already looked at costs its full size in every later
prompt. Once a message has aged past ``keep_recent_messages`` on the active path, data-URL file parts and
large ``data:`` strings inside tool outputs are written, as raw bytes with their real media type, to
``/workspace/attachments/evicted/<message id>-<n>.<ext>`` and replaced by a marker the model can read —
``[evicted image/png, 812004 bytes; preserved at /workspace/attachments/evicted/m1-0.png]`` — so it can fetch
the file again with a workspace tool when it needs it. Unlike read-time truncation this rewrites the stored
row (it is lossy on purpose and visible to the model), and it happens in bounded background passes.

The bytes go through :class:`AttachmentSink`, a two-method interface the workspace implements; until it
does, :class:`StoreAttachmentSink` keeps them in a per-agent table of the store.
"""

from __future__ import annotations

import base64
import binascii
import math
import re
import time
import urllib.parse
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from ..storage import Store
from ._truncate import KEEP_RECENT_MESSAGES, normalize_step, truncation_cutoff

__all__ = [
    "EVICTED_DIR",
    "AttachmentSink",
    "EvictedFile",
    "EvictionResult",
    "MediaEviction",
    "StoreAttachmentSink",
    "StoredFile",
    "evict_message_media",
    "eviction_cutoff",
]

EVICTED_DIR = "/workspace/attachments/evicted"
_MAX_DEPTH = 8
_MEDIA_OBJECT_TYPES = frozenset({"media", "image", "image-data", "file-data", "file"})


@dataclass(frozen=True, slots=True)
class MediaEviction:
    """Eviction policy. ``keep_recent_messages`` is clamped to at least the 4 messages always kept whole."""

    keep_recent_messages: int = 8
    min_part_bytes: int = 32_768
    max_rows_per_pass: int = 64

    @property
    def keep(self) -> int:
        return max(self.keep_recent_messages, KEEP_RECENT_MESSAGES)


@dataclass(frozen=True, slots=True)
class StoredFile:
    """Bytes read back from an :class:`AttachmentSink`."""

    path: str
    data: bytes
    media_type: str | None = None


@runtime_checkable
class AttachmentSink(Protocol):
    """Where evicted media goes: the agent's workspace implements this (paths are absolute, ``/workspace/…``)."""

    async def write_bytes(self, path: str, data: bytes, *, media_type: str | None = None) -> None:
        """Store ``data`` at ``path`` (creating parents, replacing an existing file)."""

    async def read_bytes(self, path: str) -> StoredFile | None:
        """The file at ``path``, or ``None``."""


class StoreAttachmentSink:
    """An :class:`AttachmentSink` on the store itself (``ponder_session_attachments``), one agent's files."""

    def __init__(self, store: Store, agent_id: str) -> None:
        self.store = store
        self.agent_id = agent_id

    def __repr__(self) -> str:
        return f"StoreAttachmentSink(agent_id={self.agent_id!r})"

    async def write_bytes(self, path: str, data: bytes, *, media_type: str | None = None) -> None:
        await self.store.execute(
            "INSERT INTO ponder_session_attachments (agent_id, path, media_type, size, data, created_at)"
            " VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (agent_id, path) DO UPDATE SET"
            " media_type = excluded.media_type, size = excluded.size, data = excluded.data",
            (self.agent_id, path, media_type, len(data), bytes(data), time.time()),
        )

    async def read_bytes(self, path: str) -> StoredFile | None:
        row = await self.store.fetch_one(
            "SELECT media_type, data FROM ponder_session_attachments WHERE agent_id = ? AND path = ?",
            (self.agent_id, path),
        )
        if row is None:
            return None
        return StoredFile(path, bytes(row["data"]), row["media_type"])


@dataclass(slots=True)
class EvictedFile:
    """One value taken out of a message: where its bytes go and the marker left behind."""

    path: str
    data: bytes
    media_type: str | None
    marker: str


@dataclass(slots=True)
class EvictionResult:
    """What one pass did. ``more`` is true when it stopped at the row cap with aged rows left to look at."""

    messages: int = 0
    parts: int = 0
    bytes: int = 0
    scanned: int = 0
    more: bool = False
    paths: list[str] = field(default_factory=list)


def eviction_cutoff(n: int, policy: MediaEviction, step: float) -> int:
    """How many leading messages of an ``n``-message active path are old enough to lose their media.

    The cutoff trails the read-time truncation cutoff by whole steps, so eviction rewrites the prompt
    prefix only on turns where truncation rewrites it anyway.
    """
    keep = policy.keep
    step = normalize_step(step)
    if step == math.inf:
        return max(0, n - keep)
    lag = math.ceil((keep - KEEP_RECENT_MESSAGES) / step) * int(step)
    return max(0, truncation_cutoff(n, step) - lag)


_DATA_URL = re.compile(r"^data:(?P<type>[^;,]*)(?P<params>(?:;[^;,]*)*?)(?P<b64>;base64)?,", re.IGNORECASE)


def _decode_data_url(value: str) -> tuple[bytes, str | None] | None:
    match = _DATA_URL.match(value)
    if match is None:
        return None
    payload = value[match.end() :]
    media_type = match.group("type").strip().lower() or None
    if match.group("b64"):
        try:
            return base64.b64decode(payload, validate=False), media_type
        except (binascii.Error, ValueError):
            return None
    return urllib.parse.unquote_to_bytes(payload), media_type


def _extension(media_type: str | None) -> str:
    if not media_type:
        return "txt"
    subtype = media_type.split("/", 1)[1] if "/" in media_type else ""
    subtype = re.sub(r"[^0-9A-Za-z]", "", subtype.split(";", 1)[0])
    return subtype.lower() or "bin"


def _marker(media_type: str | None, size: int, path: str) -> str:
    kind = f"{media_type}, " if media_type else ""
    return f"[evicted {kind}{size} bytes; preserved at {path}]"


class _Walker:
    """Collects evicted values of one message in walk order (the ``<n>`` of the file name)."""

    def __init__(self, message_id: str, min_bytes: int) -> None:
        self.message_id = message_id
        self.min_bytes = min_bytes
        self.files: list[EvictedFile] = []

    def take(self, data: bytes, media_type: str | None) -> str:
        path = f"{EVICTED_DIR}/{self.message_id}-{len(self.files)}.{_extension(media_type)}"
        marker = _marker(media_type, len(data), path)
        self.files.append(EvictedFile(path, data, media_type, marker))
        return marker

    def data_url(self, value: Any) -> str | None:
        """The marker for a large ``data:`` URL string (and record its bytes), else ``None``."""
        if not isinstance(value, str) or len(value) < self.min_bytes or value[:5].lower() != "data:":
            return None
        decoded = _decode_data_url(value)
        if decoded is None or len(decoded[0]) < self.min_bytes:
            return None
        return self.take(*decoded)

    def inline_media(self, value: Mapping[str, Any]) -> str | None:
        """The marker for a ``{"type": "media", "data": <base64>, "mediaType": …}`` tool-output item."""
        if value.get("type") not in _MEDIA_OBJECT_TYPES:
            return None
        data = value.get("data")
        if not isinstance(data, str) or len(data) < self.min_bytes or data[:5].lower() == "data:":
            return None
        try:
            raw = base64.b64decode(data, validate=True)
        except (binascii.Error, ValueError):
            return None
        if len(raw) < self.min_bytes:
            return None
        media_type = value.get("mediaType") or value.get("mimeType")
        return self.take(raw, str(media_type) if media_type else None)

    def output(self, value: Any, depth: int = 0) -> Any:
        if depth >= _MAX_DEPTH:
            return value
        marker = self.data_url(value)
        if marker is not None:
            return marker
        if isinstance(value, dict):
            marker = self.inline_media(value)
            if marker is not None:
                return {"type": "text", "text": marker}
            changed = {key: self.output(item, depth + 1) for key, item in value.items()}
            return changed if any(changed[k] is not value[k] for k in value) else value
        if isinstance(value, list):
            items = [self.output(item, depth + 1) for item in value]
            return items if any(a is not b for a, b in zip(items, value, strict=True)) else value
        return value


def evict_message_media(
    message: Mapping[str, Any], min_part_bytes: int
) -> tuple[dict[str, Any], list[EvictedFile]]:
    """The message with its large media replaced by markers, and the files to write first.

    A ``file`` part whose ``url`` is a ``data:`` URL of at least ``min_part_bytes`` (string and decoded size)
    becomes a ``text`` part holding the marker; inside a tool part's ``output`` such strings become the
    marker string, and inline base64 media items become text items. Returns the original message and no
    files when there is nothing to evict.
    """
    walker = _Walker(str(message.get("id", "")), max(1, min_part_bytes))
    parts = message.get("parts")
    if not isinstance(parts, list):
        return dict(message), []
    new_parts: list[Any] = []
    for part in parts:
        replacement = part
        if isinstance(part, dict):
            kind = str(part.get("type", ""))
            if kind == "file":
                marker = walker.data_url(part.get("url"))
                if marker is not None:
                    replacement = {"type": "text", "text": marker}
            elif (kind == "dynamic-tool" or kind.startswith("tool-")) and "output" in part:
                output = walker.output(part["output"])
                if output is not part["output"]:
                    replacement = {**part, "output": output}
        new_parts.append(replacement)
    if not walker.files:
        return dict(message), []
    return {**message, "parts": new_parts}, walker.files
