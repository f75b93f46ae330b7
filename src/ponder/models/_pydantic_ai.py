"""Model adapters built on ``pydantic-ai-slim``'s direct API.

Why this module exists: it is the one place that knows a provider SDK. It maps ponder's ``ModelRequest`` to
pydantic-ai messages, ``ModelRequestParameters`` and settings, streams through
``pydantic_ai.direct.model_request_stream``, and maps pydantic-ai's part events back to ponder's
``ModelEvent``s, and its exceptions to ``ModelError``. pydantic-ai and the provider SDKs are imported lazily
(when a model is constructed or streamed), so ``import ponder`` stays fast and the SDKs stay optional extras.
"""

from __future__ import annotations

import base64
import importlib.util
import json
import os
from collections.abc import AsyncIterator, Iterator
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote_to_bytes

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
    parse_tool_args,
)
from ._messages import (
    AssistantMessage,
    FileContent,
    ReasoningContent,
    SystemMessage,
    TextContent,
    ToolCall,
    ToolMessage,
    UserMessage,
)
from ._types import ModelRequest, ModelSettings

if TYPE_CHECKING:
    from pydantic_ai import messages as pm
    from pydantic_ai.models import Model, ModelRequestParameters

DEFAULT_OLLAMA_BASE_URL = "http://localhost:11434/v1"

_FINISH_REASONS: dict[str, FinishReason] = {
    "stop": "stop",
    "length": "length",
    "content_filter": "content-filter",
    "tool_call": "tool-calls",
    "error": "error",
}


def require_extra(module: str, extra: str, what: str) -> None:
    """Raise ``MissingExtraError`` with the exact ``pip install`` command when ``module`` is missing."""
    if importlib.util.find_spec(module) is None:
        raise MissingExtraError(
            f"{what} models need the {module!r} package, which is not installed. "
            f'Install it with: pip install "ponder[{extra}]"'
        )


class PydanticAIModel:
    """A ``ModelClient`` over any pydantic-ai ``Model`` object (the adapters below are built on it).

    Use it directly for providers ponder has no model string for, e.g.
    ``PydanticAIModel(GoogleModel("gemini-2.5-flash"))``.
    """

    def __init__(self, model: Model, *, name: str | None = None) -> None:
        self.model = model
        self.name = name or f"{model.system}:{model.model_name}"

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name!r})"

    async def aclose(self) -> None:
        """Close the HTTP client the model created. Optional: the model stays usable (a new client is made)."""
        # Entering and leaving the model is pydantic-ai's public way to close the client its provider owns.
        await self.model.__aenter__()
        await self.model.__aexit__(None, None, None)

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        from pydantic_ai.direct import model_request_stream
        from pydantic_ai.exceptions import AgentRunError, UserError

        # The direct API does not do what an agent run does first: replace an HTTP client that was last used on
        # another (now stopped) event loop. Without this a model object reused across loops fails.
        refresh = getattr(self.model, "_refresh_http_client", None)
        if refresh is not None:
            refresh()
        messages = to_pydantic_messages(request, provider=self.model.system)
        params = to_request_parameters(request)
        settings = to_pydantic_settings(request.settings)
        tool_calls: dict[int, tuple[str, str]] = {}
        try:
            async with model_request_stream(
                self.model,
                messages,
                model_settings=settings,  # type: ignore[arg-type]
                model_request_parameters=params,
                instrument=False,
            ) as stream:
                async for event in stream:
                    for out in _map_event(event, tool_calls):
                        yield out
                response = stream.get()
        except (AgentRunError, UserError) as exc:
            raise to_model_error(exc, self.name) from exc
        usage = response.usage
        yield Usage(
            input_tokens=usage.input_tokens or 0,
            output_tokens=usage.output_tokens or 0,
            reasoning_tokens=getattr(usage, "output_reasoning_tokens", 0) or 0,
            cache_read_tokens=usage.cache_read_tokens or 0,
            cache_write_tokens=usage.cache_write_tokens or 0,
        )
        reason = _FINISH_REASONS.get(response.finish_reason or "")
        if reason is None:
            reason = "tool-calls" if tool_calls else "other"
        yield Finish(reason)


class OpenAIModel(PydanticAIModel):
    """OpenAI chat completions (``"openai:<model>"``). Key from ``OPENAI_API_KEY``, URL from ``OPENAI_BASE_URL``."""

    def __init__(self, model: str, *, api_key: str | None = None, base_url: str | None = None) -> None:
        require_extra("openai", "openai", "OpenAI")
        api_key = api_key or os.environ.get("OPENAI_API_KEY") or None
        base_url = base_url or os.environ.get("OPENAI_BASE_URL") or None
        if api_key is None and base_url is None:
            raise ModelConfigError(
                f"model 'openai:{model}' needs an API key: set the OPENAI_API_KEY environment variable "
                "(or pass api_key=... to OpenAIModel)"
            )
        from pydantic_ai.models.openai import OpenAIChatModel
        from pydantic_ai.providers.openai import OpenAIProvider

        provider = OpenAIProvider(base_url=base_url, api_key=api_key)
        super().__init__(OpenAIChatModel(model, provider=provider), name=f"openai:{model}")


class AnthropicModel(PydanticAIModel):
    """Anthropic messages (``"anthropic:<model>"``). Key from ``ANTHROPIC_API_KEY``, URL from ``ANTHROPIC_BASE_URL``."""

    def __init__(self, model: str, *, api_key: str | None = None, base_url: str | None = None) -> None:
        require_extra("anthropic", "anthropic", "Anthropic")
        api_key = api_key or os.environ.get("ANTHROPIC_API_KEY") or None
        base_url = base_url or os.environ.get("ANTHROPIC_BASE_URL") or None
        if api_key is None:
            raise ModelConfigError(
                f"model 'anthropic:{model}' needs an API key: set the ANTHROPIC_API_KEY environment variable "
                "(or pass api_key=... to AnthropicModel)"
            )
        from pydantic_ai.models.anthropic import AnthropicModel as _PydanticAnthropicModel
        from pydantic_ai.providers.anthropic import AnthropicProvider

        provider = AnthropicProvider(api_key=api_key, base_url=base_url)
        super().__init__(_PydanticAnthropicModel(model, provider=provider), name=f"anthropic:{model}")


class OllamaModel(PydanticAIModel):
    """A model served by Ollama through its OpenAI-compatible endpoint (``"ollama:<model>"``).

    The URL comes from ``base_url``, else ``OLLAMA_BASE_URL``, else ``http://localhost:11434/v1``.
    """

    def __init__(self, model: str, *, base_url: str | None = None, api_key: str | None = None) -> None:
        require_extra("openai", "openai", "Ollama")
        base_url = base_url or os.environ.get("OLLAMA_BASE_URL") or DEFAULT_OLLAMA_BASE_URL
        api_key = api_key or os.environ.get("OLLAMA_API_KEY") or None
        from pydantic_ai.models.openai import OpenAIChatModel
        from pydantic_ai.providers.ollama import OllamaProvider

        provider = OllamaProvider(base_url=base_url, api_key=api_key)
        super().__init__(OpenAIChatModel(model, provider=provider), name=f"ollama:{model}")


class OpenAICompatibleModel(PydanticAIModel):
    """Any server speaking the OpenAI chat-completions API (vLLM, llama.cpp, LM Studio, gateways...).

    ``"openai-compatible:<model>@<base_url>"`` as a model string. ``OPENAI_API_KEY`` is never sent to it; pass
    ``api_key`` when the server needs one.
    """

    def __init__(self, model: str, *, base_url: str, api_key: str | None = None) -> None:
        require_extra("openai", "openai", "OpenAI-compatible")
        if not base_url:
            raise ModelConfigError(f"OpenAICompatibleModel({model!r}) needs a base_url")
        from pydantic_ai.models.openai import OpenAIChatModel
        from pydantic_ai.providers.openai_compatible import OpenAICompatibleProvider

        provider = OpenAICompatibleProvider("openai-compatible", base_url=base_url, api_key=api_key)
        self.base_url = base_url
        super().__init__(
            OpenAIChatModel(model, provider=provider), name=f"openai-compatible:{model}@{base_url}"
        )


# --------------------------------------------------------------------------- request mapping


def to_pydantic_messages(request: ModelRequest, *, provider: str | None = None) -> list[pm.ModelMessage]:
    """Map ponder messages to alternating pydantic-ai ``ModelRequest`` / ``ModelResponse`` messages.

    Consecutive user / system / tool messages become one request and consecutive assistant messages one
    response, which every provider accepts. ``request.system`` goes on the last request as its instructions.
    Reasoning is replayed only when it is signed by ``provider`` (the provider being called).
    """
    from pydantic_ai import messages as pm

    out: list[pm.ModelMessage] = []
    request_parts: list[pm.ModelRequestPart] = []
    response_parts: list[pm.ModelResponsePart] = []

    def flush_request() -> None:
        if request_parts:
            out.append(pm.ModelRequest(parts=list(request_parts)))
            request_parts.clear()

    def flush_response() -> None:
        if response_parts:
            out.append(pm.ModelResponse(parts=list(response_parts)))
            response_parts.clear()

    for message in request.messages:
        if isinstance(message, AssistantMessage):
            flush_request()
            response_parts.extend(_assistant_parts(message, provider))
            continue
        flush_response()
        if isinstance(message, UserMessage):
            content = [_user_item(item) for item in message.content]
            if len(content) == 1 and isinstance(content[0], str):
                request_parts.append(pm.UserPromptPart(content[0]))
            elif content:
                request_parts.append(pm.UserPromptPart(content))
        elif isinstance(message, ToolMessage):
            for result in message.results:
                request_parts.append(
                    pm.ToolReturnPart(
                        result.tool_name,
                        result.error if result.is_error else result.output,
                        result.tool_call_id,
                        outcome="failed" if result.is_error else "success",
                    )
                )
        elif isinstance(message, SystemMessage):
            request_parts.append(pm.SystemPromptPart(message.text))
        else:
            raise TypeError(f"not a model message: {message!r}")
    flush_request()
    flush_response()

    if request.system:
        for index in range(len(out) - 1, -1, -1):
            message = out[index]
            if isinstance(message, pm.ModelRequest):
                message.instructions = request.system
                break
        else:
            out.insert(0, pm.ModelRequest(parts=[], instructions=request.system))
    return out


def _assistant_parts(message: AssistantMessage, provider: str | None) -> Iterator[pm.ModelResponsePart]:
    from pydantic_ai import messages as pm

    for item in message.content:
        if isinstance(item, TextContent):
            if item.text:
                yield pm.TextPart(item.text)
        elif isinstance(item, ToolCall):
            yield pm.ToolCallPart(item.tool_name, item.args, item.tool_call_id)
        elif isinstance(item, ReasoningContent):
            # Only the provider that signed reasoning accepts it back; anything else would have to pose as
            # text (pydantic-ai wraps it in <think> tags), which changes what the model sees.
            if item.signature is not None and item.provider == provider:
                yield pm.ThinkingPart(item.text, signature=item.signature, provider_name=item.provider)
        elif isinstance(item, FileContent) and item.url.startswith("data:"):
            yield pm.FilePart(pm.BinaryContent(_data_url_bytes(item.url), media_type=item.media_type))


def _user_item(item: TextContent | FileContent) -> pm.UserContent:
    from pydantic_ai import messages as pm

    if isinstance(item, TextContent):
        return item.text
    url, media_type = item.url, item.media_type
    if url.startswith("data:"):
        return pm.BinaryContent(_data_url_bytes(url), media_type=media_type, identifier=item.filename)
    if media_type.startswith("image/"):
        return pm.ImageUrl(url, media_type=media_type)
    if media_type.startswith("audio/"):
        return pm.AudioUrl(url, media_type=media_type)
    if media_type.startswith("video/"):
        return pm.VideoUrl(url, media_type=media_type)
    return pm.DocumentUrl(url, media_type=media_type)


def _data_url_bytes(url: str) -> bytes:
    header, _, payload = url.partition(",")
    if header.endswith(";base64"):
        return base64.b64decode(payload)
    return unquote_to_bytes(payload)


def to_request_parameters(request: ModelRequest) -> ModelRequestParameters:
    from pydantic_ai.messages import InstructionPart
    from pydantic_ai.models import ModelRequestParameters
    from pydantic_ai.tools import ToolDefinition as PydanticToolDefinition

    tools = [
        PydanticToolDefinition(
            name=tool.name,
            parameters_json_schema=tool.parameters,
            description=tool.description or None,
            strict=tool.strict,
        )
        for tool in request.tools
    ]
    instructions = [InstructionPart(content=request.system)] if request.system else None
    return ModelRequestParameters(
        function_tools=tools, allow_text_output=True, instruction_parts=instructions
    )


def to_pydantic_settings(settings: ModelSettings) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key in (
        "temperature",
        "max_tokens",
        "top_p",
        "seed",
        "parallel_tool_calls",
        "timeout",
        "max_retries",
    ):
        value = getattr(settings, key)
        if value is not None:
            out[key] = value
    if settings.stop_sequences is not None:
        out["stop_sequences"] = list(settings.stop_sequences)
    choice = settings.tool_choice
    if isinstance(choice, dict):
        out["tool_choice"] = [choice["tool"]]
    elif choice is not None:
        out["tool_choice"] = choice
    out.update(settings.extra)
    return out


# --------------------------------------------------------------------------- response mapping


def _map_event(event: Any, tool_calls: dict[int, tuple[str, str]]) -> Iterator[ModelEvent]:
    from pydantic_ai import messages as pm

    if isinstance(event, pm.PartStartEvent):
        part = event.part
        if isinstance(part, pm.TextPart):
            if part.content:
                yield TextDelta(part.content)
        elif isinstance(part, pm.ThinkingPart):
            if part.content:
                yield ReasoningDelta(part.content)
        elif isinstance(part, pm.ToolCallPart):
            tool_calls[event.index] = (part.tool_call_id, part.tool_name)
            yield ToolCallStart(part.tool_call_id, part.tool_name)
            if part.args:
                yield ToolCallDelta(part.tool_call_id, _args_text(part.args))
    elif isinstance(event, pm.PartDeltaEvent):
        delta = event.delta
        if isinstance(delta, pm.TextPartDelta):
            if delta.content_delta:
                yield TextDelta(delta.content_delta)
        elif isinstance(delta, pm.ThinkingPartDelta):
            if delta.content_delta:
                yield ReasoningDelta(delta.content_delta)
        elif isinstance(delta, pm.ToolCallPartDelta):
            call = tool_calls.get(event.index)
            if call is not None and delta.args_delta:
                yield ToolCallDelta(call[0], _args_text(delta.args_delta))
    elif isinstance(event, pm.PartEndEvent):
        part = event.part
        if isinstance(part, pm.ToolCallPart) and event.index in tool_calls:
            call_id, name = tool_calls[event.index]
            args, invalid = parse_tool_args(part.args)
            yield ToolCallEnd(call_id, name, args, invalid_args=invalid)
        elif isinstance(part, pm.ThinkingPart) and (part.content or part.signature):
            yield ReasoningEnd(signature=part.signature or None, provider=part.provider_name)


def _args_text(args: str | dict[str, Any]) -> str:
    return args if isinstance(args, str) else json.dumps(args)


# --------------------------------------------------------------------------- errors


_RETRYABLE_STATUS = {408, 409, 425, 429}


def to_model_error(exc: Exception, model_name: str) -> ModelError:
    """Map a pydantic-ai exception to ``ModelError`` with a readable message and a ``retryable`` flag."""
    from pydantic_ai import exceptions as pe

    status: int | None = getattr(exc, "status_code", None)
    retryable = isinstance(
        exc,
        pe.ModelRateLimitError
        | pe.ModelUnavailableError
        | pe.ModelServerError
        | pe.ModelConnectionError
        | pe.ModelRequestTimeout,
    ) or (status is not None and (status in _RETRYABLE_STATUS or status >= 500))
    detail = _provider_message(getattr(exc, "body", None)) or getattr(exc, "message", None) or str(exc)
    where = f"HTTP {status}" if status is not None else type(exc).__name__
    if getattr(exc, "in_stream", False):
        where += " (mid-stream)"
    return ModelError(f"{model_name}: {where}: {detail}", retryable=retryable, status_code=status)


def _provider_message(body: object) -> str | None:
    if isinstance(body, dict):
        error = body.get("error")
        if isinstance(error, dict) and isinstance(error.get("message"), str):
            return error["message"]
        if isinstance(body.get("message"), str):
            return body["message"]
    if isinstance(body, str) and body:
        return body
    return None
