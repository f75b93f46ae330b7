"""How one message becomes stored rows, and what the row remembers about it.

Why this module exists: a message is stored as its JSON text, exactly as serialized here, so a read returns
the same bytes that were written — however large. SQLite (and Cloudflare's Durable Objects) put a practical
limit on one cell, so JSON above the row budget (1.5 MiB) is cut into consecutive UTF-8-safe slices: slice 0
in the message row, the rest in continuation rows. Nothing is ever truncated in storage; shortening for the
model happens at read time (``_truncate``). The size, token estimate and hash computed here ride along in
the row so hydration and compaction can plan from metadata without loading bodies.
"""

from __future__ import annotations

import gc
import hashlib
import json
import math
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from pydantic_core import from_json

__all__ = [
    "ROW_BUDGET_BYTES",
    "EncodedMessage",
    "encode_json",
    "encode_message",
    "estimate_message_tokens",
    "estimate_tokens",
    "message_search_text",
    "parse_json",
    "paused_gc",
    "split_utf8",
]

ROW_BUDGET_BYTES = 1_572_864
"""1.5 MiB: the most serialized-JSON bytes one row holds; larger messages continue in chunk rows."""

_IMAGE_TOKENS = 1_600
_MEDIA_TOKEN_CAP = 20_000
_PER_MESSAGE_TOKENS = 4


@dataclass(frozen=True, slots=True)
class EncodedMessage:
    """A message ready to store: its JSON text split into row-sized slices, plus row metadata."""

    json_text: str
    slices: tuple[str, ...]
    size: int
    """UTF-8 bytes of ``json_text`` (what hydration charges for this row)."""
    hash: str
    tokens: int
    search_text: str


def encode_json(message: Mapping[str, Any]) -> str:
    """Compact UTF-8 JSON of a message, as stored and as sent (escaped only where a lone surrogate needs it)."""
    text = json.dumps(message, separators=(",", ":"), ensure_ascii=False)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate: only the escaped form is valid UTF-8
        text = json.dumps(message, separators=(",", ":"), ensure_ascii=True)
    return text


def parse_json(text: str) -> Any:
    """Parse stored JSON text: pydantic-core's parser (about twice as fast as ``json`` on a wake's worth of
    messages), falling back to ``json.loads`` for what it rejects (escaped lone surrogates)."""
    try:
        return from_json(text)
    except ValueError:
        return json.loads(text)


@contextmanager
def paused_gc() -> Iterator[None]:
    """Pause the cyclic garbage collector around a bulk parse (synchronous code only, never across an await).

    A wake parses tens of thousands of small dicts and lists at once; each few hundred allocations trigger
    a collection, and the occasional full one walks the whole heap — about a third of a 10,000-message
    wake. Parsed JSON holds no reference cycles, so nothing is lost by collecting afterwards instead.
    """
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


def split_utf8(data: bytes, budget: int) -> list[str]:
    """Cut UTF-8 ``data`` into strings of at most ``budget`` bytes, never inside a character.

    Joining the results gives back exactly the decoded input.
    """
    if budget < 4:
        raise ValueError("the row budget must hold at least one UTF-8 character (4 bytes)")
    slices: list[str] = []
    start, length = 0, len(data)
    while start < length:
        end = min(start + budget, length)
        while end < length and (data[end] & 0xC0) == 0x80:  # a continuation byte: back off to a boundary
            end -= 1
        slices.append(data[start:end].decode("utf-8"))
        start = end
    return slices or [""]


def encode_message(message: Mapping[str, Any], *, row_budget: int = ROW_BUDGET_BYTES) -> EncodedMessage:
    """Serialize ``message`` once and derive everything its rows store."""
    text = encode_json(message)
    data = text.encode("utf-8")
    slices = (text,) if len(data) <= row_budget else tuple(split_utf8(data, row_budget))
    return EncodedMessage(
        json_text=text,
        slices=slices,
        size=len(data),
        hash=hashlib.sha256(data).hexdigest(),
        tokens=estimate_message_tokens(message),
        search_text=message_search_text(message),
    )


def message_search_text(message: Mapping[str, Any]) -> str:
    """What full-text search indexes: the message's text parts, joined by newlines."""
    parts = message.get("parts")
    if not isinstance(parts, list):
        return ""
    texts = [
        part["text"]
        for part in parts
        if isinstance(part, Mapping) and part.get("type") == "text" and isinstance(part.get("text"), str)
    ]
    joined = "\n".join(text for text in texts if text)
    try:
        joined.encode("utf-8")
    except UnicodeEncodeError:  # lone surrogates cannot be indexed; the stored message keeps them (escaped)
        joined = joined.encode("utf-8", "replace").decode("utf-8")
    return joined


def estimate_tokens(text: str) -> int:
    """A provider-neutral token estimate: ``max(chars / 4, words × 1.3)``, rounded up."""
    if not text:
        return 0
    return math.ceil(max(len(text) / 4, len(text.split()) * 1.3))


def _media_tokens(part: Mapping[str, Any]) -> int:
    media_type = str(part.get("mediaType") or "")
    if media_type.startswith("image/"):
        return _IMAGE_TOKENS
    url = part.get("url")
    size = len(url) if isinstance(url, str) else 0
    return min(_MEDIA_TOKEN_CAP, math.ceil(size / 4))


def estimate_message_tokens(message: Mapping[str, Any]) -> int:
    """Estimated prompt tokens of one message (the compaction threshold is checked against these).

    Text, reasoning and tool inputs/outputs are estimated from their text; an image counts 1,600 tokens and
    other media its byte length / 4 (capped at 20,000), plus 4 tokens of per-message overhead.
    """
    total = _PER_MESSAGE_TOKENS
    parts = message.get("parts")
    if not isinstance(parts, list):
        return total
    for part in parts:
        if not isinstance(part, Mapping):
            continue
        kind = str(part.get("type", ""))
        if kind in ("text", "reasoning"):
            total += estimate_tokens(str(part.get("text") or ""))
        elif kind == "file":
            total += _media_tokens(part)
        elif kind == "dynamic-tool" or kind.startswith("tool-"):
            for key in ("input", "output", "errorText"):
                value = part.get(key)
                if value is None:
                    continue
                text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
                total += estimate_tokens(text)
    return total
