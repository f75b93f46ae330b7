"""AI SDK chat messages and stream chunks, as plain dicts.

ponder speaks the AI SDK's ``UIMessage`` / ``UIMessageChunk`` formats so stock JS clients (``useChat``,
``useAgentChat``) render its streams and transcripts unchanged. This package holds everything that knows those
shapes and nothing else: building an assistant message from chunks (:class:`MessageAccumulator`), applying late
tool results and approvals (:func:`apply_tool_result`, :func:`apply_tool_approval`,
:func:`apply_tool_chunk_to_message`), reconciling a client's transcript with storage (:func:`reconcile_messages`)
and sanitising messages before they are stored (:func:`sanitize_message`). It imports no other ponder package.
See ``docs/chat-messages.md`` for the message, part and chunk model and the tool state machine.
"""

from ._accumulator import ChunkOutcome, ChunkResult, MessageAccumulator
from ._ids import new_message_id
from ._parts import (
    find_tool_part,
    is_settled_tool_part,
    is_tool_part,
    message_text,
    normalize_tool_input,
    tool_part_name,
    user_message,
)
from ._reconcile import reconcile_messages
from ._sanitize import sanitize_message
from ._tool_updates import (
    DEFAULT_STREAMED_TOOL_ERROR_TEXT,
    DEFAULT_TOOL_ERROR_TEXT,
    apply_tool_approval,
    apply_tool_chunk_to_message,
    apply_tool_result,
)
from ._types import (
    APPROVAL_ACCEPTING_STATES,
    RESULT_ACCEPTING_STATES,
    TERMINAL_TOOL_STATES,
    DataUIPart,
    FileUIPart,
    ReasoningUIPart,
    SourceDocumentUIPart,
    SourceUrlUIPart,
    StepStartUIPart,
    TextUIPart,
    ToolApproval,
    ToolState,
    ToolUIPart,
    UIMessage,
    UIMessageChunk,
    UIMessagePart,
    UIMessageShape,
)

__all__ = [
    "APPROVAL_ACCEPTING_STATES",
    "DEFAULT_STREAMED_TOOL_ERROR_TEXT",
    "DEFAULT_TOOL_ERROR_TEXT",
    "RESULT_ACCEPTING_STATES",
    "TERMINAL_TOOL_STATES",
    "ChunkOutcome",
    "ChunkResult",
    "DataUIPart",
    "FileUIPart",
    "MessageAccumulator",
    "ReasoningUIPart",
    "SourceDocumentUIPart",
    "SourceUrlUIPart",
    "StepStartUIPart",
    "TextUIPart",
    "ToolApproval",
    "ToolState",
    "ToolUIPart",
    "UIMessage",
    "UIMessageChunk",
    "UIMessagePart",
    "UIMessageShape",
    "apply_tool_approval",
    "apply_tool_chunk_to_message",
    "apply_tool_result",
    "find_tool_part",
    "is_settled_tool_part",
    "is_tool_part",
    "message_text",
    "new_message_id",
    "normalize_tool_input",
    "reconcile_messages",
    "sanitize_message",
    "tool_part_name",
    "user_message",
]
