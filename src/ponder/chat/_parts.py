"""Small, allocation-free helpers over message parts.

Why this module exists: every layer above (the step loop, persistence, repair, the wire codec) asks the same
questions of a ``UIMessage`` — is this a tool part, what tool is it, has it settled, what text does the message
hold, where does a tool call live — and each must answer them exactly as the AI SDK does, or the JS client and
the server disagree about a transcript. Keeping the answers in one place keeps them consistent.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from ._ids import new_message_id
from ._types import TERMINAL_TOOL_STATES, UIMessage, UIMessagePart


def is_tool_part(part: UIMessagePart) -> bool:
    """True for a tool call part: ``type`` is ``"tool-<name>"`` or ``"dynamic-tool"``."""
    part_type = part.get("type")
    return isinstance(part_type, str) and (part_type.startswith("tool-") or part_type == "dynamic-tool")


def tool_part_name(part: UIMessagePart) -> str | None:
    """The tool's name: the ``type`` suffix for static tools, ``toolName`` for dynamic ones.

    Returns ``None`` for a part that is not a tool part.
    """
    part_type = part.get("type")
    if not isinstance(part_type, str):
        return None
    if part_type == "dynamic-tool":
        name = part.get("toolName")
        return name if isinstance(name, str) else None
    if part_type.startswith("tool-"):
        return part_type[5:]
    return None


def is_settled_tool_part(part: UIMessagePart) -> bool:
    """True when a tool part holds its final outcome.

    Settled means ``output-available`` (and not ``preliminary``), ``output-error`` or ``output-denied``. A
    preliminary output is a progress report from a streaming tool; the final result is still to come.
    """
    state = part.get("state")
    if state not in TERMINAL_TOOL_STATES:
        return False
    return not (state == "output-available" and part.get("preliminary") is True)


def message_text(message: UIMessage) -> str:
    """Concatenation of the message's ``text`` parts (reasoning, tools and files are skipped)."""
    return "".join(
        part.get("text") or "" for part in message.get("parts") or () if part.get("type") == "text"
    )


def user_message(text: str, id: str | None = None) -> UIMessage:
    """Build a user message with one text part, minting an id when none is given."""
    return {"id": id or new_message_id(), "role": "user", "parts": [{"type": "text", "text": text}]}


def normalize_tool_input(raw: Any) -> dict[str, Any]:
    """Coerce a tool call's ``input`` into a JSON object.

    Providers (Anthropic in particular) reject a tool call whose input is not an object, and a bad input in
    stored history would wedge every later turn. So: a dict is returned as is; a string holding a JSON object
    is parsed; everything else (``None``, ``""``, lists, numbers, unparsable or partial JSON) becomes ``{}``.
    """
    if isinstance(raw, dict):
        return raw
    if isinstance(raw, str) and raw.lstrip().startswith("{"):
        try:
            parsed = json.loads(raw)
        except ValueError:
            return {}
        if isinstance(parsed, dict):
            return parsed
    return {}


def find_tool_part(messages: Sequence[UIMessage], tool_call_id: str) -> tuple[int, int] | None:
    """Locate the newest part carrying ``tool_call_id``: ``(message index, part index)`` or ``None``.

    Searches from the last message backwards, and within a message from its last part backwards, so a
    provider that reuses a tool call id across turns resolves to the most recent call.
    """
    for message_index in range(len(messages) - 1, -1, -1):
        parts = messages[message_index].get("parts") or ()
        for part_index in range(len(parts) - 1, -1, -1):
            if parts[part_index].get("toolCallId") == tool_call_id:
                return message_index, part_index
    return None


def merge_objects(base: dict[str, Any], override: dict[str, Any]) -> dict[str, Any]:
    """Deep-merge two JSON objects the way the AI SDK merges message metadata.

    Nested objects merge key by key; any other value (lists included) in ``override`` replaces the one in
    ``base``. Neither argument is mutated; nested dicts that change are copied.
    """
    merged = dict(base)
    for key, value in override.items():
        current = merged.get(key)
        if isinstance(value, dict) and isinstance(current, dict):
            merged[key] = merge_objects(current, value)
        else:
            merged[key] = value
    return merged
