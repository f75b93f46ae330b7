"""Reconcile the message list a client submits with the history the server has stored.

Why this module exists: the stock clients send their *whole* local transcript with every request. That copy
can be stale (a tool part still waiting although the server has its result) or carry ids the client minted
itself for an assistant message the server stored under another id. Upserting it naively would overwrite
results with older states and duplicate assistant rows (cloudflare/agents#1761, #1094). The reconciler makes
the incoming list agree with storage before it is upserted:

1. **Ids.** An incoming message whose id is stored keeps it. An assistant message with an unknown id adopts
   the id of a stored assistant message that shares a ``toolCallId`` with it, or — for messages without tool
   calls — whose sanitised parts are identical. Each stored message lends its id at most once, so two equal
   short replies ("Sure") map to two distinct rows.
2. **Tool outputs.** A tool part the client still shows as waiting (``input-available``,
   ``approval-requested``, ``approval-responded``) takes the server's terminal state and result.
3. **Inputs.** A tool input that is not an object (a list, ``None``, missing, a JSON string) becomes an
   object, so the next provider call is valid. Errored and denied parts are left exactly as they are.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from ._parts import is_tool_part, normalize_tool_input
from ._sanitize import sanitize_message
from ._types import RESULT_ACCEPTING_STATES, TERMINAL_TOOL_STATES, UIMessage, UIMessagePart

_UNTOUCHED_INPUT_STATES = frozenset({"output-error", "output-denied"})


def reconcile_messages(incoming: Sequence[UIMessage], stored: Sequence[UIMessage]) -> list[UIMessage]:
    """Return ``incoming`` reconciled against ``stored`` (the server's current path, oldest first).

    Neither list is mutated. Messages that need no change are returned as the same objects; changed ones are
    shallow copies whose changed parts are copies too.
    """
    with_ids = _reconcile_ids(incoming, stored)
    merged = _merge_server_outputs(with_ids, stored)
    return [_normalize_tool_inputs(message) for message in merged]


# ---------------------------------------------------------------------------------------------------- ids


def _tool_call_ids(message: UIMessage) -> list[str]:
    return [
        part["toolCallId"] for part in message.get("parts") or () if isinstance(part.get("toolCallId"), str)
    ]


def _content_key(message: UIMessage) -> str:
    parts = sanitize_message(message).get("parts") or []
    return json.dumps(parts, sort_keys=True, separators=(",", ":"), default=str)


def _reconcile_ids(incoming: Sequence[UIMessage], stored: Sequence[UIMessage]) -> list[UIMessage]:
    if not stored:
        return list(incoming)

    index_by_id: dict[str, list[int]] = {}
    for index, message in enumerate(stored):
        index_by_id.setdefault(message.get("id"), []).append(index)

    claimed: set[int] = set()
    exact: set[int] = set()
    for position, message in enumerate(incoming):
        for index in index_by_id.get(message.get("id"), ()):
            if index not in claimed:
                claimed.add(index)
                exact.add(position)
                break

    # Built lazily: most submissions match every message by id.
    by_tool_call: dict[str, list[int]] | None = None
    by_content: dict[str, list[int]] | None = None

    result: list[UIMessage] = []
    for position, message in enumerate(incoming):
        if position in exact or message.get("role") != "assistant":
            result.append(message)
            continue
        tool_call_ids = _tool_call_ids(message)
        match: int | None = None
        if tool_call_ids:
            if by_tool_call is None:
                by_tool_call = {}
                for index, candidate in enumerate(stored):
                    if candidate.get("role") == "assistant":
                        for tool_call_id in dict.fromkeys(_tool_call_ids(candidate)):
                            by_tool_call.setdefault(tool_call_id, []).append(index)
            candidates = (
                index
                for tool_call_id in tool_call_ids
                for index in by_tool_call.get(tool_call_id, ())
                if index not in claimed
            )
            match = min(candidates, default=None)
        else:
            if by_content is None:
                by_content = {}
                for index, candidate in enumerate(stored):
                    if candidate.get("role") == "assistant" and not _tool_call_ids(candidate):
                        by_content.setdefault(_content_key(candidate), []).append(index)
            match = next((i for i in by_content.get(_content_key(message), ()) if i not in claimed), None)
        if match is None:
            result.append(message)
            continue
        claimed.add(match)
        adopted = dict(message)
        adopted["id"] = stored[match].get("id")
        result.append(adopted)
    return result


# ----------------------------------------------------------------------------------------- tool outputs


def _is_resolved(part: UIMessagePart) -> bool:
    return isinstance(part.get("toolCallId"), str) and part.get("state") in TERMINAL_TOOL_STATES


def _same_input(a: UIMessagePart, b: UIMessagePart) -> bool:
    if "input" not in a and "input" not in b:
        return True
    if "input" not in a or "input" not in b:
        return False
    return json.dumps(a["input"], sort_keys=True, default=str) == json.dumps(
        b["input"], sort_keys=True, default=str
    )


def _merge_server_outputs(incoming: list[UIMessage], stored: Sequence[UIMessage]) -> list[UIMessage]:
    resolved_by_message: dict[str, dict[str, UIMessagePart]] = {}
    # Fallback for messages that matched no stored row; None marks a toolCallId resolved in several rows.
    resolved_by_call: dict[str, UIMessagePart | None] = {}
    stored_ids: set[str] = set()
    for message in stored:
        stored_ids.add(message.get("id"))
        if message.get("role") != "assistant":
            continue
        resolved: dict[str, UIMessagePart] = {}
        for part in message.get("parts") or ():
            if _is_resolved(part):
                tool_call_id = part["toolCallId"]
                resolved[tool_call_id] = part
                resolved_by_call[tool_call_id] = None if tool_call_id in resolved_by_call else part
        if resolved:
            resolved_by_message[message.get("id")] = resolved
    if not resolved_by_message:
        return incoming

    result: list[UIMessage] = []
    for message in incoming:
        if message.get("role") != "assistant":
            result.append(message)
            continue
        server_parts = resolved_by_message.get(message.get("id"))
        if server_parts is None and message.get("id") in stored_ids:
            result.append(message)  # its stored row holds no results to merge
            continue
        parts = message.get("parts") or []
        new_parts: list[UIMessagePart] | None = None
        for index, part in enumerate(parts):
            if part.get("state") not in RESULT_ACCEPTING_STATES or not isinstance(
                part.get("toolCallId"), str
            ):
                continue
            if server_parts is not None:
                server = server_parts.get(part["toolCallId"])
            else:
                # Same toolCallId *and* same input: the same call (a reused id with new input is a new call).
                server = resolved_by_call.get(part["toolCallId"])
                if server is not None and not _same_input(part, server):
                    server = None
            if server is None:
                continue
            if new_parts is None:
                new_parts = list(parts)
            new_parts[index] = _overlay_result(part, server)
        if new_parts is None:
            result.append(message)
        else:
            updated = dict(message)
            updated["parts"] = new_parts
            result.append(updated)
    return result


def _overlay_result(part: UIMessagePart, server: UIMessagePart) -> UIMessagePart:
    """The client part with the server's terminal state and only the result field that state owns."""
    merged = dict(part)
    state = server["state"]
    merged["state"] = state
    if state == "output-available":
        if "output" in server:
            merged["output"] = server["output"]
        if "preliminary" in server:
            merged["preliminary"] = server["preliminary"]
    elif state == "output-error":
        if "errorText" in server:
            merged["errorText"] = server["errorText"]
    elif "approval" in server:  # output-denied
        merged["approval"] = server["approval"]
    return merged


# ---------------------------------------------------------------------------------------------- inputs


def _normalize_tool_inputs(message: UIMessage) -> UIMessage:
    if message.get("role") != "assistant":
        return message
    parts = message.get("parts") or []
    new_parts: list[UIMessagePart] | None = None
    for index, part in enumerate(parts):
        if not is_tool_part(part) or part.get("state") in _UNTOUCHED_INPUT_STATES:
            continue
        if isinstance(part.get("input"), dict):
            continue
        if new_parts is None:
            new_parts = list(parts)
        fixed = dict(part)
        fixed["input"] = normalize_tool_input(part.get("input"))
        new_parts[index] = fixed
    if new_parts is None:
        return message
    updated = dict(message)
    updated["parts"] = new_parts
    return updated
