"""Chat requests, whatever carried them: the body format, its validation, and what admission returns.

Why this module exists: a chat request reaches Think as a WebSocket frame (``cf_agent_use_chat_request``,
body as a JSON string) or as an HTTP POST from the AI SDK's ``useChat`` (``{id, messages, trigger,
messageId?, ...}``). Both carry the same body, and both must be checked the same way before anything is
stored (DESIGN.md invariant 6). Parsing lives here, apart from the transports and from the turn queue.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Literal

from ._client_tools import parse_client_tools
from ._types import ChatResult

__all__ = [
    "CONCURRENCY_MODES",
    "ChatAdmission",
    "ChatRequestError",
    "ParsedChatRequest",
    "check_message",
    "parse_chat_request",
]

#: The values ``Think.message_concurrency`` accepts.
CONCURRENCY_MODES = frozenset({"queue", "drop", "latest", "merge", "debounce"})
_TRIGGERS = frozenset({"submit-message", "regenerate-message"})
_PREFIX = "Invalid chat request: "


class ChatRequestError(Exception):
    """A chat request that was refused before anything was stored.

    ``message`` is the text to show the client; ``status`` the HTTP status that fits (400 for a bad body,
    500 when storing failed).
    """

    def __init__(self, message: str, status: int = 400) -> None:
        super().__init__(message)
        self.message = message
        self.status = status


@dataclass(slots=True)
class ChatAdmission:
    """What :meth:`Think.handle_chat_request` did with a request.

    ``status`` is ``"accepted"`` (the messages are stored and the turn is queued; ``result`` resolves to its
    :class:`ChatResult` once it ran or was skipped) or ``"dropped"`` (``message_concurrency = "drop"`` and
    another turn was in progress: nothing was stored, ``result`` is ``None``). ``message_ids`` are the
    trailing user message ids of the request.
    """

    request_id: str
    status: Literal["accepted", "dropped"]
    message_ids: list[str] = field(default_factory=list)
    result: asyncio.Future[ChatResult] | None = None


@dataclass(slots=True)
class ParsedChatRequest:
    """A validated body: the client's messages, the trigger, the declared client tools and the custom body.

    ``client_tools`` is ``None`` when the body had no ``clientTools`` key (keep the stored ones) and ``[]``
    when it sent an empty array (clear them).
    """

    messages: list[dict[str, Any]]
    trigger: str
    client_tools: list[dict[str, Any]] | None
    body: dict[str, Any]

    @property
    def regenerate(self) -> bool:
        return self.trigger == "regenerate-message"


def check_message(message: Any) -> None:
    """Raise ``ValueError`` unless ``message`` is a UIMessage-shaped dict."""
    if not isinstance(message, dict):
        raise ValueError(f"a message must be an object, got {type(message).__name__}")
    if not isinstance(message.get("id"), str) or not message["id"]:
        raise ValueError("every message needs a non-empty string 'id'")
    if message.get("role") not in ("user", "assistant", "system"):
        raise ValueError(f"message {message['id']!r} has an invalid role {message.get('role')!r}")
    if not isinstance(message.get("parts"), list) or not all(isinstance(p, dict) for p in message["parts"]):
        raise ValueError(f"message {message['id']!r} needs a 'parts' list of objects")


def parse_chat_request(raw: Any, reserved: Iterable[str] = ()) -> ParsedChatRequest:
    """Validate a chat request body (a dict, or JSON text/bytes); raise ``ValueError`` with a clear message.

    ``reserved`` names body keys that belong to the transport (the AI SDK's ``id`` and ``messageId``) and are
    left out of the custom body.
    """
    if isinstance(raw, bytes | bytearray | memoryview):
        try:
            raw = bytes(raw).decode("utf-8")
        except UnicodeDecodeError:
            raise ValueError(_PREFIX + "the body is not valid UTF-8") from None
    if isinstance(raw, str):
        try:
            raw = json.loads(raw)
        except (ValueError, RecursionError):
            raise ValueError(_PREFIX + "the body is not valid JSON") from None
    if not isinstance(raw, dict):
        raise ValueError(_PREFIX + "the body must be a JSON object")
    messages = raw.get("messages", [])
    if not isinstance(messages, list):
        raise ValueError(_PREFIX + "'messages' must be an array")
    for message in messages:
        try:
            check_message(message)
        except ValueError as exc:
            raise ValueError(_PREFIX + str(exc)) from None
    trigger = raw.get("trigger", "submit-message")
    if trigger not in _TRIGGERS:
        raise ValueError(_PREFIX + "'trigger' must be 'submit-message' or 'regenerate-message'")
    client_tools: list[dict[str, Any]] | None = None
    if raw.get("clientTools") is not None:
        try:
            client_tools = parse_client_tools(raw["clientTools"])
        except ValueError as exc:
            raise ValueError(_PREFIX + str(exc)) from None
    skip = {"messages", "trigger", "clientTools", *reserved}
    body = {key: value for key, value in raw.items() if key not in skip}
    return ParsedChatRequest(messages, trigger, client_tools, body)
