"""ponder.models: the ``ModelClient`` protocol, model strings, provider adapters and UI→model conversion.

Import cost is kept low: provider SDKs (via pydantic-ai-slim) load only when a provider model is built.
"""

from ._convert import ui_messages_to_model_messages
from ._errors import MissingExtraError, ModelConfigError, ModelError
from ._events import (
    Finish,
    FinishReason,
    ModelEvent,
    ReasoningDelta,
    ReasoningEnd,
    TextDelta,
    ToolCallDelta,
    ToolCallEnd,
    ToolCallStart,
    Usage,
)
from ._messages import (
    AssistantMessage,
    FileContent,
    ModelMessage,
    ReasoningContent,
    SystemMessage,
    TextContent,
    ToolCall,
    ToolMessage,
    ToolResult,
    UserMessage,
)
from ._pydantic_ai import AnthropicModel, OllamaModel, OpenAICompatibleModel, OpenAIModel, PydanticAIModel
from ._registry import ProviderFactory, model_providers, register_model_provider, resolve_model
from ._types import ModelClient, ModelRequest, ModelSettings, ToolChoice, ToolDefinition

__all__ = [
    "AnthropicModel",
    "AssistantMessage",
    "FileContent",
    "Finish",
    "FinishReason",
    "MissingExtraError",
    "ModelClient",
    "ModelConfigError",
    "ModelError",
    "ModelEvent",
    "ModelMessage",
    "ModelRequest",
    "ModelSettings",
    "OllamaModel",
    "OpenAICompatibleModel",
    "OpenAIModel",
    "ProviderFactory",
    "PydanticAIModel",
    "ReasoningContent",
    "ReasoningDelta",
    "ReasoningEnd",
    "SystemMessage",
    "TextContent",
    "TextDelta",
    "ToolCall",
    "ToolCallDelta",
    "ToolCallEnd",
    "ToolCallStart",
    "ToolChoice",
    "ToolDefinition",
    "ToolMessage",
    "ToolResult",
    "Usage",
    "UserMessage",
    "model_providers",
    "register_model_provider",
    "resolve_model",
    "ui_messages_to_model_messages",
]
