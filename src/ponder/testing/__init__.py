"""ponder.testing: helpers for testing agents without a network or an API key."""

from ._scripted import (
    ScriptedModel,
    ScriptedModelExhausted,
    error,
    reasoning,
    reply,
    stall,
    tool_call,
)

__all__ = [
    "ScriptedModel",
    "ScriptedModelExhausted",
    "error",
    "reasoning",
    "reply",
    "stall",
    "tool_call",
]
