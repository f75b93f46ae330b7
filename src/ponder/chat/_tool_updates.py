"""Apply tool results and approval decisions to messages that already exist.

Why this module exists: a tool call's outcome often arrives after the message holding the call was streamed —
a browser runs a client tool and sends ``cf_agent_tool_result``, a user answers an approval with
``cf_agent_tool_approval``, or the continuation turn after an approval streams the approved tool's output for a
call that lives in the *previous* assistant message (a cross-message update). All three must follow the same
first-write-wins rules, or a late or replayed event overwrites a result the model has already seen.

Every function here finds the newest tool part with the given ``toolCallId`` whose state accepts the update,
**mutates that part in place** and returns the message that contains it — or returns ``None`` when nothing
matched (unknown id, or the call is already past the point the update applies to), in which case nothing
changed and the caller should neither persist nor broadcast. Mutating in place keeps an in-flight
:class:`~ponder.chat.MessageAccumulator` (whose message may be passed here) consistent; callers that must keep
their input unchanged should pass a copy.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Literal

from ._accumulator import _approval_from_chunk, _copy_result_fields
from ._parts import is_settled_tool_part, normalize_tool_input
from ._types import (
    APPROVAL_ACCEPTING_STATES,
    RESULT_ACCEPTING_STATES,
    TERMINAL_TOOL_STATES,
    UIMessage,
    UIMessageChunk,
    UIMessagePart,
)

DEFAULT_TOOL_ERROR_TEXT = "Tool execution denied by user"
"""``errorText`` recorded for a client ``output-error`` result sent without one (the stock client's wording)."""

DEFAULT_STREAMED_TOOL_ERROR_TEXT = "Tool execution failed"
"""``errorText`` recorded for a cross-message ``tool-output-error`` chunk that carries none."""

_CROSS_MESSAGE_CHUNK_TYPES = frozenset(
    {"tool-output-available", "tool-output-error", "tool-output-denied", "tool-approval-request"}
)
_ANSWERED_STATES = TERMINAL_TOOL_STATES | {"approval-responded"}

MessagesOrMessage = UIMessage | Sequence[UIMessage]


def _find(
    messages_or_message: MessagesOrMessage, tool_call_id: str, accepts: Callable[[UIMessagePart], bool]
) -> tuple[UIMessage, UIMessagePart] | None:
    messages: Sequence[UIMessage] = (
        (messages_or_message,) if isinstance(messages_or_message, dict) else messages_or_message
    )
    for message_index in range(len(messages) - 1, -1, -1):
        message = messages[message_index]
        parts = message.get("parts") or ()
        for part_index in range(len(parts) - 1, -1, -1):
            part = parts[part_index]
            if part.get("toolCallId") == tool_call_id and accepts(part):
                return message, part
    return None


def _ensure_object_input(part: UIMessagePart) -> None:
    if not isinstance(part.get("input"), dict):
        part["input"] = normalize_tool_input(part.get("input"))


def apply_tool_result(
    messages_or_message: MessagesOrMessage,
    tool_call_id: str,
    *,
    output: Any = None,
    state: Literal["output-available", "output-error"] = "output-available",
    error_text: str | None = None,
) -> UIMessage | None:
    """Record a client tool result (``cf_agent_tool_result``) on the call waiting for it.

    Only a part in ``input-available``, ``approval-requested`` or ``approval-responded`` is updated; a settled
    part (``output-available``, ``output-error``, ``output-denied``) is never overwritten. ``output-available``
    stores ``output`` with ``preliminary: False``; ``output-error`` stores ``error_text`` (default
    ``"Tool execution denied by user"``). Existing approval data is kept. Mutates the part in place; returns
    the containing message, or ``None`` when no waiting call has that id.
    """
    if state not in ("output-available", "output-error"):
        raise ValueError(f"tool result state must be 'output-available' or 'output-error', not {state!r}")
    found = _find(
        messages_or_message, tool_call_id, lambda part: part.get("state") in RESULT_ACCEPTING_STATES
    )
    if found is None:
        return None
    message, part = found
    _ensure_object_input(part)
    part["state"] = state
    if state == "output-available":
        part["output"] = output
        part["preliminary"] = False
        part.pop("errorText", None)
    else:
        part["errorText"] = error_text or DEFAULT_TOOL_ERROR_TEXT
        part.pop("output", None)
        part.pop("preliminary", None)
    return message


def apply_tool_approval(
    messages_or_message: MessagesOrMessage,
    tool_call_id: str,
    approved: bool,
    *,
    reason: str | None = None,
) -> UIMessage | None:
    """Record the user's answer to an approval request (``cf_agent_tool_approval``).

    A part in ``input-available`` or ``approval-requested`` becomes ``approval-responded`` (approved) or
    ``output-denied`` (rejected); its ``approval`` record keeps every existing field (``id``, ``descriptor``…)
    and gains ``approved`` (and ``reason`` when given). A part with no approval record gets one whose ``id`` is
    the tool call id. Mutates the part in place; returns the containing message, or ``None`` when no part with
    that id is waiting for an answer.
    """
    found = _find(
        messages_or_message, tool_call_id, lambda part: part.get("state") in APPROVAL_ACCEPTING_STATES
    )
    if found is None:
        return None
    message, part = found
    existing = part.get("approval")
    approval: dict[str, Any] = dict(existing) if isinstance(existing, dict) else {}
    approval.setdefault("id", tool_call_id)
    approval["approved"] = bool(approved)
    if reason is not None:
        approval["reason"] = reason
    part["approval"] = approval
    part["state"] = "approval-responded" if approved else "output-denied"
    return message


def apply_tool_chunk_to_message(
    messages_or_message: MessagesOrMessage, chunk: UIMessageChunk
) -> UIMessage | None:
    """Apply a cross-message tool chunk to the stored message that holds the call.

    Use it when :meth:`MessageAccumulator.apply` reports ``cross_message``: ``tool-output-available``,
    ``tool-output-error``, ``tool-output-denied`` or ``tool-approval-request`` for a call streamed in an
    earlier message. First write wins: a settled part is left alone (provider replays are no-ops), a denial
    never overrides an approval the user gave, and an approval request never reopens an answered call.
    ``preliminary`` is kept when the chunk sets it, otherwise the result is final (``preliminary: False``).
    Mutates the part in place; returns the containing message, or ``None`` when nothing changed.
    """
    chunk_type = chunk.get("type")
    if chunk_type not in _CROSS_MESSAGE_CHUNK_TYPES:
        raise ValueError(f"not a cross-message tool chunk: {chunk_type!r}")
    tool_call_id = chunk.get("toolCallId")
    if not isinstance(tool_call_id, str):
        return None

    if chunk_type in ("tool-output-available", "tool-output-error"):
        found = _find(messages_or_message, tool_call_id, lambda part: not is_settled_tool_part(part))
        if found is None:
            return None
        message, part = found
        _ensure_object_input(part)
        if chunk_type == "tool-output-available":
            part["state"] = "output-available"
            part["output"] = chunk.get("output")
            part["preliminary"] = chunk.get("preliminary") is True
            part.pop("errorText", None)
        else:
            part["state"] = "output-error"
            error_text = chunk.get("errorText")
            part["errorText"] = (
                error_text if isinstance(error_text, str) and error_text else DEFAULT_STREAMED_TOOL_ERROR_TEXT
            )
            part.pop("output", None)
            part.pop("preliminary", None)
        _copy_result_fields(part, chunk)
        return message

    found = _find(messages_or_message, tool_call_id, lambda part: part.get("state") not in _ANSWERED_STATES)
    if found is None:
        return None
    message, part = found
    if chunk_type == "tool-output-denied":
        _ensure_object_input(part)
        part["state"] = "output-denied"
    else:
        part["state"] = "approval-requested"
        part["approval"] = _approval_from_chunk(chunk)
    return message
