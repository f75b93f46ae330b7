"""Read-time truncation: shorten older messages for the model, never in storage.

Why this module exists: a long conversation replays every old tool output and every long paste on every
turn. Cutting them for the model bounds the context, but a cut that moves every turn rewrites a message near
the end of the prompt prefix each time and defeats provider prompt caching (providers cache a byte-identical
prefix). So the cutoff moves in steps: with ``step`` 8 the number of messages before it is always a
multiple of 8, the rewritten prefix changes once per 8 messages, and between cuts 4 … 11 recent messages
stay whole. ``step`` 1 cuts every turn (only the last 4 stay whole); ``math.inf`` turns truncation off.

Truncation is deterministic (the same message always cuts to the same bytes), which is what keeps an
unchanged prefix byte-identical from one turn to the next.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from typing import Any

__all__ = [
    "KEEP_RECENT_MESSAGES",
    "MAX_TEXT_CHARS",
    "MAX_TOOL_OUTPUT_CHARS",
    "normalize_step",
    "truncate_message",
    "truncate_older_messages",
    "truncate_value",
    "truncation_cutoff",
]

KEEP_RECENT_MESSAGES = 4
MAX_TOOL_OUTPUT_CHARS = 500
MAX_TEXT_CHARS = 10_000
_MAX_DEPTH = 8


def normalize_step(step: float) -> float:
    """``math.inf`` stays (off); anything else below 1 or not finite acts as 1; fractions are floored."""
    if step == math.inf:
        return math.inf
    if not isinstance(step, int | float) or math.isnan(step) or step < 1:
        return 1
    return float(math.floor(step))


def truncation_cutoff(n: int, step: float = 8, keep_recent: int = KEEP_RECENT_MESSAGES) -> int:
    """How many leading messages of an ``n``-message view are cut: always a multiple of ``step``.

    ``keep = keep_recent`` when ``n ≤ keep_recent``; ``n`` (nothing cut) when step is infinite; otherwise
    ``keep_recent + (n − keep_recent) mod step``. The cutoff is ``n − keep``.
    """
    step = normalize_step(step)
    if n <= keep_recent or step == math.inf:
        return 0
    keep = keep_recent + (n - keep_recent) % int(step)
    return n - keep


def _cut_string(text: str, limit: int) -> str:
    return f"{text[:limit]}... [truncated {len(text) - limit} chars]"


def _size(value: Any) -> int:
    if isinstance(value, str):
        return len(value)
    return len(json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str))


def _cap_strings(value: Any, cap: int, depth: int = 0) -> Any:
    """``value`` with every string longer than ``cap`` (+ its marker) cut to ``cap`` characters."""
    if isinstance(value, str):
        return _cut_string(value, cap) if len(value) > cap + 40 else value
    if depth >= _MAX_DEPTH:
        return value
    if isinstance(value, dict):
        return {key: _cap_strings(item, cap, depth + 1) for key, item in value.items()}
    if isinstance(value, list):
        return [_cap_strings(item, cap, depth + 1) for item in value]
    return value


def truncate_value(value: Any, max_chars: int) -> Any:
    """Shorten a tool output to about ``max_chars`` characters of JSON while keeping its shape.

    A string is cut with a ``... [truncated N chars]`` suffix. An object or array first has its longest
    strings cut (objects then say ``__truncated`` / ``__truncatedChars``); arrays then drop tail items behind
    a marker item; if it still does not fit, the value becomes a string preview of its JSON.
    """
    if isinstance(value, str):
        return value if len(value) <= max_chars else _cut_string(value, max_chars)
    original = _size(value)
    if original <= max_chars or not isinstance(value, dict | list):
        return value
    cap = max_chars
    while cap >= 16:
        candidate = _cap_strings(value, cap)
        if isinstance(candidate, dict):
            candidate = {**candidate, "__truncated": True, "__truncatedChars": original}
        if _size(candidate) <= max_chars:
            return candidate
        cap //= 2
    if isinstance(value, list):
        kept: list[Any] = []
        for item in value:
            piece = _cap_strings(item, 16)
            if _size([*kept, piece, "…"]) + 32 > max_chars:
                break
            kept.append(piece)
        if kept:
            return [*kept, f"... [{len(value) - len(kept)} more items truncated]"]
    text = json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str)
    return _cut_string(text, max_chars)


def _is_tool_part(part: Any) -> bool:
    kind = part.get("type") if isinstance(part, dict) else None
    return isinstance(kind, str) and (kind == "dynamic-tool" or kind.startswith("tool-"))


def truncate_message(
    message: dict[str, Any],
    *,
    max_tool_output_chars: int = MAX_TOOL_OUTPUT_CHARS,
    max_text_chars: int = MAX_TEXT_CHARS,
) -> dict[str, Any]:
    """The model's view of an older message: long text and tool outputs cut.

    Returns ``message`` itself when nothing needed cutting, else a shallow copy with new parts (the input
    is never mutated). Provider-executed tool results are never cut: the provider replays them itself.
    """
    parts = message.get("parts")
    if not isinstance(parts, list):
        return message
    new_parts: list[Any] | None = None
    for index, part in enumerate(parts):
        replacement = part
        if not isinstance(part, dict):
            pass
        elif part.get("type") == "text":
            text = part.get("text")
            if isinstance(text, str) and len(text) > max_text_chars:
                replacement = {**part, "text": _cut_string(text, max_text_chars)}
        elif _is_tool_part(part) and not part.get("providerExecuted") and "output" in part:
            output = part["output"]
            if _size(output) > max_tool_output_chars:
                replacement = {**part, "output": truncate_value(output, max_tool_output_chars)}
        if replacement is not part:
            if new_parts is None:
                new_parts = list(parts)
            new_parts[index] = replacement
    if new_parts is None:
        return message
    return {**message, "parts": new_parts}


def truncate_older_messages(
    messages: Sequence[dict[str, Any]],
    *,
    step: float = 8,
    keep_recent: int = KEEP_RECENT_MESSAGES,
    max_tool_output_chars: int = MAX_TOOL_OUTPUT_CHARS,
    max_text_chars: int = MAX_TEXT_CHARS,
) -> list[dict[str, Any]]:
    """Cut messages before the stepped cutoff (see :func:`truncation_cutoff`); the rest are returned as is."""
    cutoff = truncation_cutoff(len(messages), step, keep_recent)
    out = list(messages)
    for index in range(cutoff):
        out[index] = truncate_message(
            out[index], max_tool_output_chars=max_tool_output_chars, max_text_chars=max_text_chars
        )
    return out
