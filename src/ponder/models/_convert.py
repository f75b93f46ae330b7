"""Convert stored AI SDK ``UIMessage`` dicts into provider-neutral model messages.

Why this module exists: the conversation is persisted as AI SDK UI messages (parts such as ``text``,
``reasoning``, ``file``, ``tool-<name>`` / ``dynamic-tool`` with a ``state``, ``step-start``, ``data-*``),
while a model must see user turns, assistant turns and tool results. This follows the AI SDK's
``convertToModelMessages`` with ``ignoreIncompleteToolCalls``: a settled tool part becomes an assistant
tool call plus a tool result, a denied one becomes an error result, an unsettled one is left out,
``step-start`` splits an assistant message into steps, and ``data-*`` / source parts are ignored.
UI messages are plain dicts here (this layer must not depend on how ``ponder.chat`` models them).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

from ._messages import (
    AssistantContent,
    AssistantMessage,
    FileContent,
    ModelMessage,
    ReasoningContent,
    SystemMessage,
    TextContent,
    ToolCall,
    ToolMessage,
    ToolResult,
    UserContent,
    UserMessage,
)

UIMessage = Mapping[str, Any]

_DENIED = "Tool execution was denied by the user."


def ui_messages_to_model_messages(messages: Iterable[UIMessage]) -> list[ModelMessage]:
    """Turn AI SDK UI messages into the messages a ``ModelClient`` is asked to continue.

    Raises ``ValueError`` for a message that is not a UI message (unknown role, parts not a list, a tool
    part without ``toolCallId``), naming the message id.
    """
    out: list[ModelMessage] = []
    for message in messages:
        role = message.get("role")
        parts = message.get("parts") or []
        if not isinstance(parts, list):
            raise ValueError(f"UI message {message.get('id')!r}: 'parts' must be a list")
        if role == "user":
            content = _user_content(parts)
            if content:
                out.append(_new(UserMessage, content, "user"))
        elif role == "assistant":
            _assistant_messages(message, parts, out)
        elif role == "system":
            text = "".join(str(p.get("text", "")) for p in parts if p.get("type") == "text")
            if text:
                out.append(SystemMessage(text))
        else:
            raise ValueError(f"UI message {message.get('id')!r} has unknown role {role!r}")
    return out


def _user_content(parts: list[Mapping[str, Any]]) -> list[UserContent]:
    content: list[UserContent] = []
    for part in parts:
        kind = part.get("type")
        if kind == "text":
            text = part.get("text", "")
            content.append(TextContent(text if type(text) is str else str(text)))
        elif kind == "file":
            content.append(_file(part))
    return content


def _file(part: Mapping[str, Any]) -> FileContent:
    return FileContent(
        url=str(part.get("url", "")),
        media_type=str(part.get("mediaType") or "application/octet-stream"),
        filename=part.get("filename"),
    )


def _new(cls: type[Any], content: list[Any], role: str) -> Any:
    """A user or assistant message owning ``content`` (a fresh list built here; the public constructors copy
    it, which a wake converting thousands of messages at once does not need)."""
    message = object.__new__(cls)
    message.content = content
    message.role = role
    return message


def _assistant_messages(message: UIMessage, parts: list[Mapping[str, Any]], out: list[ModelMessage]) -> None:
    block: list[Mapping[str, Any]] = []
    for part in parts:
        if part.get("type") == "step-start":
            if block:
                _flush_step(message, block, out)
                block = []
        else:
            block.append(part)
    if block:
        _flush_step(message, block, out)


def _flush_step(message: UIMessage, block: list[Mapping[str, Any]], out: list[ModelMessage]) -> None:
    content: list[AssistantContent] = []
    results: list[ToolResult] = []
    for part in block:
        kind = part.get("type", "")
        if kind == "text":
            text = part.get("text", "")
            if text:
                content.append(TextContent(text if type(text) is str else str(text)))
            continue
        kind = str(kind)
        if kind == "reasoning":
            signature, provider = _signature(part.get("providerMetadata"))
            text = str(part.get("text", ""))
            if text or signature:
                content.append(ReasoningContent(text, signature=signature, provider=provider))
        elif kind == "file":
            content.append(_file(part))
        elif kind == "dynamic-tool" or kind.startswith("tool-"):
            if part.get("providerExecuted"):
                continue  # executed by the provider itself: nothing for us to replay
            name = str(part.get("toolName", "")) if kind == "dynamic-tool" else kind[len("tool-") :]
            call_id = part.get("toolCallId")
            if not isinstance(call_id, str) or not call_id:
                raise ValueError(f"UI message {message.get('id')!r}: tool part {kind!r} has no toolCallId")
            result = _settled_result(part, call_id, name)
            if result is None:
                continue  # incomplete tool call (streaming, awaiting a result or an approval): left out
            content.append(ToolCall(call_id, name, _tool_args(part)))
            results.append(result)
        # data-*, source-url, source-document and unknown parts carry nothing for the model
    if content:
        out.append(_new(AssistantMessage, content, "assistant"))
    if results:
        out.append(ToolMessage(results))


def _settled_result(part: Mapping[str, Any], call_id: str, name: str) -> ToolResult | None:
    state = part.get("state")
    if state == "output-available":
        return ToolResult(call_id, name, output=part.get("output"))
    if state == "output-error":
        return ToolResult(call_id, name, error=str(part.get("errorText") or "Tool execution failed."))
    if state == "output-denied":
        approval = part.get("approval")
        reason = approval.get("reason") if isinstance(approval, Mapping) else None
        return ToolResult(call_id, name, error=f"{_DENIED} Reason: {reason}" if reason else _DENIED)
    return None


def _tool_args(part: Mapping[str, Any]) -> dict[str, Any] | str:
    value = part.get("input")
    if value is None:
        value = part.get("rawInput")
    if value is None:
        return {}
    if isinstance(value, dict | str):
        return value
    return json.dumps(value)


def _signature(metadata: Any) -> tuple[str | None, str | None]:
    """Find a reasoning signature in AI SDK provider metadata (``{"anthropic": {"signature": ...}}``)."""
    if isinstance(metadata, Mapping):
        for provider, value in metadata.items():
            if isinstance(value, Mapping) and isinstance(value.get("signature"), str):
                return value["signature"], str(provider)
    return None, None
