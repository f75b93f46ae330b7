"""The small value types Think's hooks receive and return.

Why this module exists: hooks are the way a subclass steers a turn (``before_turn`` → ``TurnConfig``,
``before_tool_call`` → ``ToolCallDecision``, ...). Keeping their shapes here, as plain dataclasses, gives users
one place to read what each hook sees and may change.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from ..models import FinishReason, ModelClient, ModelMessage, ToolChoice, Usage
from ..tools import Tool

__all__ = [
    "ChatErrorContext",
    "ChatResult",
    "StepConfig",
    "StepContext",
    "StepResult",
    "ToolCallContext",
    "ToolCallDecision",
    "ToolCallResult",
    "TurnConfig",
    "TurnContext",
]

ChatStatus = Literal["completed", "error", "aborted", "skipped", "recovering"]


@dataclass(slots=True)
class TurnContext:
    """What ``before_turn`` sees: the inputs of the turn about to run."""

    request_id: str
    system: str
    messages: list[ModelMessage]
    tools: dict[str, Tool]
    model: ModelClient
    continuation: bool = False
    body: dict[str, Any] = field(default_factory=dict)


@dataclass(slots=True)
class TurnConfig:
    """Overrides ``before_turn`` may return; every field is optional (``None`` keeps the default).

    ``tools`` are added to (and override by name) the agent's tools; ``active_tools`` then limits which tool
    names the model may see; ``messages`` replaces the model messages for this turn only.
    """

    model: str | ModelClient | None = None
    system: str | None = None
    messages: list[ModelMessage] | None = None
    tools: Any = None
    active_tools: list[str] | None = None
    tool_choice: ToolChoice | None = None
    max_steps: int | None = None
    send_reasoning: bool | None = None
    temperature: float | None = None
    max_tokens: int | None = None
    top_p: float | None = None
    stop_sequences: list[str] | None = None
    seed: int | None = None
    timeout: float | None = None
    max_retries: int | None = None
    #: Seconds of model-stream silence before the turn is aborted and recovered (0 disables; None: the class value).
    stream_stall_timeout: float | None = None
    extra: dict[str, Any] | None = None


@dataclass(slots=True)
class StepContext:
    """What ``before_step`` sees: the step number (0-based) and the model messages it will send."""

    request_id: str
    step: int
    system: str
    messages: list[ModelMessage]
    tools: dict[str, Tool]
    model: ModelClient


@dataclass(slots=True)
class StepConfig:
    """Overrides ``before_step`` may return for one step."""

    model: str | ModelClient | None = None
    system: str | None = None
    active_tools: list[str] | None = None
    tool_choice: ToolChoice | None = None


@dataclass(slots=True)
class StepResult:
    """What ``on_step_finish`` sees after a step (model call plus its tool executions)."""

    request_id: str
    step: int
    finish_reason: FinishReason | None
    text: str
    tool_calls: list[dict[str, Any]]
    tool_results: list[ToolCallResult]
    usage: Usage | None


@dataclass(slots=True)
class ToolCallContext:
    """What ``before_tool_call`` sees: one call about to run."""

    request_id: str
    tool_call_id: str
    tool_name: str
    input: dict[str, Any]
    tool: Tool | None


@dataclass(slots=True)
class ToolCallDecision:
    """``before_tool_call``'s answer. Build it with the class methods:

    - ``ToolCallDecision.allow()`` (or return ``None``): run the tool;
    - ``ToolCallDecision.allow(input={...})``: run it with another input (not re-validated);
    - ``ToolCallDecision.block("reason")``: skip it; the model sees the reason as the tool's error;
    - ``ToolCallDecision.substitute(output)``: skip it; the model sees ``output`` as the result.
    """

    action: Literal["allow", "block", "substitute"] = "allow"
    input: dict[str, Any] | None = None
    reason: str | None = None
    output: Any = None

    @classmethod
    def allow(cls, input: dict[str, Any] | None = None) -> ToolCallDecision:
        return cls("allow", input=input)

    @classmethod
    def block(cls, reason: str | None = None) -> ToolCallDecision:
        return cls("block", reason=reason)

    @classmethod
    def substitute(cls, output: Any) -> ToolCallDecision:
        return cls("substitute", output=output)


@dataclass(slots=True)
class ToolCallResult:
    """What ``after_tool_call`` sees: the call, and its output or error.

    ``success`` is true when the model got an output (blocked and substituted calls count as successes).
    """

    request_id: str
    tool_call_id: str
    tool_name: str
    input: dict[str, Any]
    output: Any = None
    error: str | None = None
    decision: ToolCallDecision | None = None

    @property
    def success(self) -> bool:
        return self.error is None or (self.decision is not None and self.decision.action != "allow")


@dataclass(slots=True)
class ChatResult:
    """The outcome of one turn, given to ``on_chat_response`` and returned by ``save_messages``/``chat``.

    ``status`` is ``"recovering"`` when the model stream stalled and the turn was handed to bounded recovery:
    the answer is finished later by a continuation with the same ``request_id`` (whose result is the one
    ``on_chat_response`` sees).
    """

    request_id: str
    status: ChatStatus
    message: dict[str, Any] | None = None
    continuation: bool = False
    error: str | None = None


@dataclass(slots=True)
class ChatErrorContext:
    """Where a chat error happened: ``stage`` is ``parse``, ``persist``, ``turn`` or ``stream``."""

    stage: Literal["parse", "persist", "turn", "stream"]
    request_id: str | None = None
    messages_persisted: bool = False
