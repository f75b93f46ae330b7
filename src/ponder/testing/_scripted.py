"""The scripted test model, re-exported for ``ponder.testing``.

Why this module exists: ``ScriptedModel`` is implemented in the model layer (``ponder.models._scripted``) so
that the ``"test"`` model string resolves without importing ``ponder.testing`` (which may grow helpers that
depend on higher layers). Tests and users import it from here, through ``ponder.testing``.
"""

from ponder.models._scripted import (
    Reasoning,
    Reply,
    ReplyItem,
    ReplySpec,
    ScriptedError,
    ScriptedModel,
    ScriptedModelExhausted,
    ScriptedToolCall,
    Stall,
    error,
    reasoning,
    reply,
    stall,
    tool_call,
)

__all__ = [
    "Reasoning",
    "Reply",
    "ReplyItem",
    "ReplySpec",
    "ScriptedError",
    "ScriptedModel",
    "ScriptedModelExhausted",
    "ScriptedToolCall",
    "Stall",
    "error",
    "reasoning",
    "reply",
    "stall",
    "tool_call",
]
