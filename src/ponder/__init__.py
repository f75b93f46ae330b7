"""ponder: durable chat agents for Python.

An agent's work outlives the request that started it: it survives a crash or a deploy, never loses
or duplicates a message, streams to any frontend, and runs on one laptop or on many nodes.
"""

from .runtime import (
    Agent,
    AgentHost,
    Connection,
    ConnectionInfo,
    FiberContext,
    FiberRecoveryContext,
    Schedule,
    StateUpdateRejected,
    callable,
)
from .server import App
from .storage import Storage, Store, create_store
from .think import (
    ChatErrorContext,
    ChatResult,
    ContextBlock,
    StepConfig,
    StepContext,
    StepResult,
    SubmissionInspection,
    Think,
    ToolCallContext,
    ToolCallDecision,
    ToolCallResult,
    TurnConfig,
    TurnContext,
)
from .tools import Tool, ToolContext, tool

__version__ = "0.1.0"

__all__ = [
    "Agent",
    "AgentHost",
    "App",
    "ChatErrorContext",
    "ChatResult",
    "Connection",
    "ConnectionInfo",
    "ContextBlock",
    "FiberContext",
    "FiberRecoveryContext",
    "Schedule",
    "StateUpdateRejected",
    "StepConfig",
    "StepContext",
    "StepResult",
    "Storage",
    "Store",
    "SubmissionInspection",
    "Think",
    "Tool",
    "ToolCallContext",
    "ToolCallDecision",
    "ToolCallResult",
    "ToolContext",
    "TurnConfig",
    "TurnContext",
    "__version__",
    "callable",
    "create_store",
    "tool",
]
