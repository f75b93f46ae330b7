"""Stream events a ``ModelClient`` yields.

Why this module exists: the step loop consumes one small, provider-neutral vocabulary of deltas (text,
reasoning, tool-call pieces, usage, finish) and turns it into AI SDK ``UIMessageChunk`` dicts. Keeping the
vocabulary here, free of any SDK type, lets the scripted test model and every adapter produce exactly the
same thing.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Literal, TypeAlias

FinishReason: TypeAlias = Literal["stop", "length", "tool-calls", "content-filter", "error", "other"]


@dataclass(slots=True)
class TextDelta:
    """A piece of assistant text. Consecutive deltas belong to the same text part."""

    text: str
    type: Literal["text-delta"] = "text-delta"


@dataclass(slots=True)
class ReasoningDelta:
    """A piece of model reasoning ("thinking"). Consecutive deltas belong to the same reasoning part."""

    text: str
    type: Literal["reasoning-delta"] = "reasoning-delta"


@dataclass(slots=True)
class ReasoningEnd:
    """The current reasoning part is complete; carries the provider's signature when there is one.

    ``provider_metadata`` is shaped like the AI SDK's (``{"anthropic": {"signature": ...}}``) so it can be
    stored on the reasoning UI part and sent back on the next request.
    """

    signature: str | None = None
    provider: str | None = None
    type: Literal["reasoning-end"] = "reasoning-end"

    @property
    def provider_metadata(self) -> dict[str, Any] | None:
        if self.signature is None or self.provider is None:
            return None
        return {self.provider: {"signature": self.signature}}


@dataclass(slots=True)
class ToolCallStart:
    """The model started a tool call."""

    tool_call_id: str
    tool_name: str
    type: Literal["tool-call-start"] = "tool-call-start"


@dataclass(slots=True)
class ToolCallDelta:
    """A piece of a tool call's JSON arguments, as the provider streamed it."""

    tool_call_id: str
    args_delta: str
    type: Literal["tool-call-delta"] = "tool-call-delta"


@dataclass(slots=True)
class ToolCallEnd:
    """A complete tool call with parsed arguments.

    When the provider's arguments were not a JSON object, ``args`` is ``{}`` and ``invalid_args`` holds the
    raw text, so the caller can answer the call with a tool error the model sees.
    """

    tool_call_id: str
    tool_name: str
    args: dict[str, Any]
    invalid_args: str | None = None
    type: Literal["tool-call-end"] = "tool-call-end"

    @property
    def args_valid(self) -> bool:
        return self.invalid_args is None


@dataclass(slots=True)
class Usage:
    """Token usage of one model call (0 when the provider did not report it)."""

    input_tokens: int = 0
    output_tokens: int = 0
    reasoning_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    type: Literal["usage"] = "usage"

    @property
    def total_tokens(self) -> int:
        return self.input_tokens + self.output_tokens


@dataclass(slots=True)
class Finish:
    """The last event of a successful stream."""

    reason: FinishReason
    type: Literal["finish"] = "finish"


ModelEvent: TypeAlias = (
    TextDelta | ReasoningDelta | ReasoningEnd | ToolCallStart | ToolCallDelta | ToolCallEnd | Usage | Finish
)


def parse_tool_args(raw: str | dict[str, Any] | None) -> tuple[dict[str, Any], str | None]:
    """Parse streamed tool arguments: ``(args, None)`` or ``({}, raw_text)`` when not a JSON object."""
    if raw is None or raw == "":
        return {}, None
    if isinstance(raw, dict):
        return raw, None
    try:
        value = json.loads(raw)
    except ValueError:
        return {}, raw
    if not isinstance(value, dict):
        return {}, raw
    return value, None
