"""Shapes of AI SDK UI messages, parts and stream chunks.

Why this module exists: ponder persists and streams messages that must stay byte-compatible with the AI SDK
(`UIMessage`, `UIMessageChunk`) so stock JS clients work unchanged. On the hot streaming path those values are
plain ``dict`` objects — no model classes, no validation, no copies. The ``TypedDict`` classes below exist only
to document the shapes for readers and type checkers; nothing constructs or checks them at runtime.

Tool part state machine (AI SDK v5+)::

    input-streaming -> input-available -> (approval-requested -> approval-responded | output-denied)
                                       -> output-available | output-error
"""

from __future__ import annotations

from typing import Any, Literal, NotRequired, TypedDict

UIMessage = dict[str, Any]
"""One chat message: ``{"id", "role", "parts", "metadata"?}`` — a plain dict, JSON-compatible."""

UIMessagePart = dict[str, Any]
"""One element of ``message["parts"]`` (text, reasoning, tool, file, source, data, step-start)."""

UIMessageChunk = dict[str, Any]
"""One AI SDK UI message stream chunk, e.g. ``{"type": "text-delta", "id": "t1", "delta": "Hi"}``."""

ToolState = Literal[
    "input-streaming",
    "input-available",
    "approval-requested",
    "approval-responded",
    "output-available",
    "output-error",
    "output-denied",
]

TERMINAL_TOOL_STATES: frozenset[str] = frozenset({"output-available", "output-error", "output-denied"})
"""States that end a tool call. (A *preliminary* ``output-available`` is not settled yet.)"""

RESULT_ACCEPTING_STATES: frozenset[str] = frozenset(
    {"input-available", "approval-requested", "approval-responded"}
)
"""States in which a client tool result (``cf_agent_tool_result``) may be applied."""

APPROVAL_ACCEPTING_STATES: frozenset[str] = frozenset({"input-available", "approval-requested"})
"""States in which a client approval decision (``cf_agent_tool_approval``) may be applied."""


class TextUIPart(TypedDict):
    """``{"type": "text", "text": ..., "state": "streaming" | "done"}``."""

    type: Literal["text"]
    text: str
    state: NotRequired[Literal["streaming", "done"]]
    providerMetadata: NotRequired[dict[str, Any]]


class ReasoningUIPart(TypedDict):
    """Model reasoning; ``providerMetadata`` may carry signatures needed to replay it to the provider."""

    type: Literal["reasoning"]
    text: str
    state: NotRequired[Literal["streaming", "done"]]
    providerMetadata: NotRequired[dict[str, Any]]


class StepStartUIPart(TypedDict):
    """Boundary between model steps (one provider call each)."""

    type: Literal["step-start"]


class FileUIPart(TypedDict):
    """A file, usually a URL or a ``data:`` URL."""

    type: Literal["file"]
    mediaType: str
    url: str
    filename: NotRequired[str]
    providerMetadata: NotRequired[dict[str, Any]]


class SourceUrlUIPart(TypedDict):
    type: Literal["source-url"]
    sourceId: str
    url: str
    title: NotRequired[str]
    providerMetadata: NotRequired[dict[str, Any]]


class SourceDocumentUIPart(TypedDict):
    type: Literal["source-document"]
    sourceId: str
    mediaType: str
    title: str
    filename: NotRequired[str]
    providerMetadata: NotRequired[dict[str, Any]]


class ToolApproval(TypedDict):
    """Approval record on a tool part; ``approved`` appears once the user has answered."""

    id: str
    approved: NotRequired[bool]
    reason: NotRequired[str]
    descriptor: NotRequired[Any]


class ToolUIPart(TypedDict):
    """A tool call. ``type`` is ``"tool-<name>"`` for static tools or ``"dynamic-tool"`` (then ``toolName``)."""

    type: str
    toolCallId: str
    toolName: NotRequired[str]
    state: ToolState
    input: NotRequired[Any]
    output: NotRequired[Any]
    errorText: NotRequired[str]
    preliminary: NotRequired[bool]
    providerExecuted: NotRequired[bool]
    callProviderMetadata: NotRequired[dict[str, Any]]
    resultProviderMetadata: NotRequired[dict[str, Any]]
    approval: NotRequired[ToolApproval]
    title: NotRequired[str]


class DataUIPart(TypedDict):
    """Developer-defined data: ``type`` is ``"data-<name>"``; upserted by ``(type, id)`` when ``id`` is set."""

    type: str
    id: NotRequired[str]
    data: Any


class UIMessageShape(TypedDict):
    """The documented shape of :data:`UIMessage`."""

    id: str
    role: Literal["system", "user", "assistant"]
    parts: list[UIMessagePart]
    metadata: NotRequired[dict[str, Any]]
