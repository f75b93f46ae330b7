"""The model request and the ``ModelClient`` protocol.

Why this module exists: everything above the model layer (the step loop, workflows, tests) talks to a model
through one tiny interface — "stream one request" — so an adapter, a scripted test model or a user's own
model object are interchangeable. The request is plain data: system prompt, provider-neutral messages,
JSON-Schema tool definitions and settings.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, TypeAlias, runtime_checkable

from ._events import ModelEvent
from ._messages import ModelMessage, UserMessage

ToolChoice: TypeAlias = Literal["auto", "none", "required"] | dict[str, str]
"""``"auto"`` (default), ``"none"``, ``"required"``, or ``{"tool": name}`` to force one tool."""


@dataclass(slots=True)
class ToolDefinition:
    """A tool the model may call: a name, a description and a JSON Schema object for its arguments."""

    name: str
    description: str = ""
    parameters: dict[str, Any] = field(default_factory=lambda: {"type": "object", "properties": {}})
    strict: bool | None = None
    """Ask the provider to enforce the schema strictly; ``None`` lets the adapter decide."""


@dataclass(slots=True)
class ModelSettings:
    """Sampling and transport settings for one request. ``None`` means "the provider's default"."""

    temperature: float | None = None
    max_tokens: int | None = None
    top_p: float | None = None
    stop_sequences: list[str] | None = None
    seed: int | None = None
    tool_choice: ToolChoice | None = None
    parallel_tool_calls: bool | None = None
    timeout: float | None = None
    """Seconds the HTTP client waits for the connection and for each streamed chunk."""
    max_retries: int | None = None
    """How often the provider SDK retries a failed request before raising (``0``: a single attempt)."""
    extra: dict[str, Any] = field(default_factory=dict)
    """Provider-specific settings passed through unchanged (e.g. pydantic-ai's ``openai_reasoning_effort``)."""

    def __post_init__(self) -> None:
        choice = self.tool_choice
        if choice is None or choice in ("auto", "none", "required"):
            return
        if not (isinstance(choice, dict) and set(choice) == {"tool"} and isinstance(choice["tool"], str)):
            raise ValueError(
                f"tool_choice must be 'auto', 'none', 'required' or {{'tool': name}}, got {choice!r}"
            )


@dataclass(slots=True)
class ModelRequest:
    """One call to a model: continue ``messages`` under ``system``, optionally calling ``tools``."""

    system: str | None = None
    messages: list[ModelMessage] = field(default_factory=list)
    tools: list[ToolDefinition] = field(default_factory=list)
    settings: ModelSettings = field(default_factory=ModelSettings)

    def last_user_text(self) -> str:
        """The text of the last user message ("" when there is none)."""
        for message in reversed(self.messages):
            if isinstance(message, UserMessage):
                return message.text
        return ""


@runtime_checkable
class ModelClient(Protocol):
    """What ponder needs from a model: stream the response to one request.

    ``stream`` is an async generator of ``ModelEvent``: text / reasoning / tool-call deltas, then ``Usage``
    and a final ``Finish``. Provider failures raise ``ModelError``. Cancelling the consuming task or calling
    ``aclose()`` on the generator must stop the provider stream promptly. ``name`` identifies the model in
    logs (e.g. ``"openai:gpt-4.1-mini"``).
    """

    name: str

    def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]: ...
