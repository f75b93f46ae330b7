"""Provider-neutral model messages: what a ``ModelClient`` is asked to continue.

Why this module exists: the step loop speaks AI SDK ``UIMessage`` dicts (what is stored and streamed), but a
model needs a plainer conversation of user turns, assistant turns (text, reasoning, tool calls) and tool
results. These small dataclasses are that conversation, independent of any provider SDK, so an adapter maps
from one shape only and a provider swap touches one module.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal, TypeAlias


@dataclass(slots=True)
class TextContent:
    """Plain text in a user, system or assistant message."""

    text: str
    type: Literal["text"] = "text"


@dataclass(slots=True)
class FileContent:
    """A file: ``url`` is a ``data:`` URL (inline bytes) or an ``http(s)`` URL, as in an AI SDK file part."""

    url: str
    media_type: str
    filename: str | None = None
    type: Literal["file"] = "file"


@dataclass(slots=True)
class ReasoningContent:
    """Model reasoning from an earlier assistant turn.

    ``signature`` and ``provider`` come from the provider that produced it (Anthropic signs its thinking
    blocks); reasoning is only sent back to a model when it carries a signature, because providers either
    ignore unsigned reasoning or would need it disguised as text.
    """

    text: str
    signature: str | None = None
    provider: str | None = None
    type: Literal["reasoning"] = "reasoning"


@dataclass(slots=True)
class ToolCall:
    """A call the model made. ``args`` is the parsed JSON object, or the raw text when it was not valid JSON."""

    tool_call_id: str
    tool_name: str
    args: dict[str, Any] | str = field(default_factory=dict)
    type: Literal["tool-call"] = "tool-call"


@dataclass(slots=True)
class ToolResult:
    """The settled result of one tool call: ``output`` on success, ``error`` (a message) on failure."""

    tool_call_id: str
    tool_name: str
    output: Any = None
    error: str | None = None
    type: Literal["tool-result"] = "tool-result"

    @property
    def is_error(self) -> bool:
        return self.error is not None


UserContent: TypeAlias = TextContent | FileContent
AssistantContent: TypeAlias = TextContent | ReasoningContent | ToolCall | FileContent


@dataclass(slots=True)
class SystemMessage:
    """A system message inside the conversation (the main system prompt is ``ModelRequest.system``)."""

    text: str
    role: Literal["system"] = "system"


@dataclass(slots=True)
class UserMessage:
    """A user turn. A plain string is accepted for ``content`` and becomes one ``TextContent``."""

    content: list[UserContent] = field(default_factory=list)
    role: Literal["user"] = "user"

    def __init__(self, content: str | list[UserContent] | None = None) -> None:
        if content is None:
            content = []
        elif isinstance(content, str):
            content = [TextContent(content)]
        self.content = list(content)
        self.role = "user"

    @property
    def text(self) -> str:
        """The message's text parts joined together."""
        return "".join(part.text for part in self.content if isinstance(part, TextContent))


@dataclass(slots=True)
class AssistantMessage:
    """An assistant turn (one or more steps): text, reasoning and tool calls, in the order produced."""

    content: list[AssistantContent] = field(default_factory=list)
    role: Literal["assistant"] = "assistant"

    def __init__(self, content: str | list[AssistantContent] | None = None) -> None:
        if content is None:
            content = []
        elif isinstance(content, str):
            content = [TextContent(content)]
        self.content = list(content)
        self.role = "assistant"

    @property
    def text(self) -> str:
        return "".join(part.text for part in self.content if isinstance(part, TextContent))

    @property
    def tool_calls(self) -> list[ToolCall]:
        return [part for part in self.content if isinstance(part, ToolCall)]


@dataclass(slots=True)
class ToolMessage:
    """Results of the tool calls of the assistant message just before it."""

    results: list[ToolResult] = field(default_factory=list)
    role: Literal["tool"] = "tool"


ModelMessage: TypeAlias = SystemMessage | UserMessage | AssistantMessage | ToolMessage
