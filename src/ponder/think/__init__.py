"""Think: an agent that owns the whole chat lifecycle (turns, tools, streaming, persistence, protocol).

See ``docs/think.md`` (the class, hooks and turn lifecycle) and ``docs/protocol.md`` (the frames).
"""

from ..context import ContextBlock
from ..tools import Tool, ToolContext, tool
from ._client_tools import ClientTool
from ._context import ContextOverflowError
from ._requests import CONCURRENCY_MODES, ChatAdmission, ChatRequestError
from ._run_turn import TURN_MODES
from ._submissions import (
    SUBMISSION_STATUSES,
    SubmissionCancel,
    SubmissionConflictError,
    SubmissionInspection,
)
from ._think import CHAT_TURN_FIBER_PREFIX, Think
from ._turn import CONTINUE_PROMPT
from ._types import (
    ChatErrorContext,
    ChatResult,
    StepConfig,
    StepContext,
    StepResult,
    ToolCallContext,
    ToolCallDecision,
    ToolCallResult,
    TurnConfig,
    TurnContext,
)

__all__ = [
    "CHAT_TURN_FIBER_PREFIX",
    "CONCURRENCY_MODES",
    "CONTINUE_PROMPT",
    "SUBMISSION_STATUSES",
    "TURN_MODES",
    "ChatAdmission",
    "ChatErrorContext",
    "ChatRequestError",
    "ChatResult",
    "ClientTool",
    "ContextBlock",
    "ContextOverflowError",
    "StepConfig",
    "StepContext",
    "StepResult",
    "SubmissionCancel",
    "SubmissionConflictError",
    "SubmissionInspection",
    "Think",
    "Tool",
    "ToolCallContext",
    "ToolCallDecision",
    "ToolCallResult",
    "ToolContext",
    "TurnConfig",
    "TurnContext",
    "tool",
]
