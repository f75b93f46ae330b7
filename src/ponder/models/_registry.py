"""Model strings: ``"openai:gpt-4.1-mini"`` → a ``ModelClient``.

Why this module exists: agents name their model with a short string (as Think uses Workers AI ids), so one
function parses it, picks the provider factory and reports mistakes clearly (unknown provider, missing key,
missing extra). Factories import their SDKs only when called, so resolving ``"test"`` or importing ponder
never loads a provider SDK. ``register_model_provider`` is the hook for further providers (e.g. ``"local"``).
"""

from __future__ import annotations

import re
from collections.abc import Callable

from ._errors import ModelConfigError
from ._types import ModelClient

ProviderFactory = Callable[[str], ModelClient]
"""Builds a ``ModelClient`` from the part of a model string after ``"<provider>:"``."""

_URL_SUFFIX = re.compile(r"^(?P<model>.+?)@(?P<url>https?://\S+)$")


def _need_model(provider: str, model: str) -> str:
    if not model:
        raise ModelConfigError(f"model string '{provider}:' names no model, e.g. '{provider}:<model-name>'")
    return model


def _openai(model: str) -> ModelClient:
    from ._pydantic_ai import OpenAIModel

    return OpenAIModel(_need_model("openai", model))


def _anthropic(model: str) -> ModelClient:
    from ._pydantic_ai import AnthropicModel

    return AnthropicModel(_need_model("anthropic", model))


def _ollama(model: str) -> ModelClient:
    from ._pydantic_ai import OllamaModel

    return OllamaModel(_need_model("ollama", model))


def _openai_compatible(rest: str) -> ModelClient:
    from ._pydantic_ai import OpenAICompatibleModel

    match = _URL_SUFFIX.match(rest)
    if match is None:
        raise ModelConfigError(
            f"model string 'openai-compatible:{rest}' needs a base URL: "
            "use 'openai-compatible:<model>@<base_url>', e.g. 'openai-compatible:qwen3@http://localhost:8000/v1'"
        )
    return OpenAICompatibleModel(match["model"], base_url=match["url"])


_PROVIDERS: dict[str, ProviderFactory] = {
    "openai": _openai,
    "anthropic": _anthropic,
    "ollama": _ollama,
    "openai-compatible": _openai_compatible,
}


def register_model_provider(name: str, factory: ProviderFactory, *, replace: bool = False) -> None:
    """Make ``"<name>:<model>"`` (and ``"<name>/<model>"``) resolve through ``factory(model)``."""
    key = name.strip().lower()
    if not key or ":" in key or "/" in key:
        raise ValueError(f"invalid model provider name {name!r}")
    if key in _PROVIDERS and not replace:
        raise ValueError(f"model provider {key!r} is already registered (pass replace=True to override)")
    _PROVIDERS[key] = factory


def model_providers() -> list[str]:
    """The provider names model strings may start with (plus the bare ``"test"``)."""
    return sorted(_PROVIDERS)


def split_model_string(spec: str) -> tuple[str, str]:
    """Split ``"provider:model"`` or ``"provider/model"`` at the first separator: ``(provider, model)``.

    A bare word is a provider with no model (``"local"`` → ``("local", "")``).
    """
    text = spec.strip()
    cut = min((i for i in (text.find(":"), text.find("/")) if i >= 0), default=-1)
    if cut < 0:
        return text.lower(), ""
    return text[:cut].lower(), text[cut + 1 :].strip()


def resolve_model(spec: str | ModelClient) -> ModelClient:
    """Turn a model string or model object into a ``ModelClient``.

    Strings: ``"openai:<model>"``, ``"anthropic:<model>"``, ``"ollama:<model>"``,
    ``"openai-compatible:<model>@<base_url>"``, ``"test"`` (an echo ``ScriptedModel``), or any provider
    added with ``register_model_provider``; ``"provider/model"`` is accepted for ``"provider:model"``.
    Any object with a ``stream(request)`` method is returned unchanged.
    """
    if not isinstance(spec, str):
        if callable(getattr(spec, "stream", None)):
            return spec
        raise TypeError(f"expected a model string or a ModelClient, got {type(spec).__name__}")
    if spec.strip().lower() == "test":
        from ._scripted import ScriptedModel

        return ScriptedModel.echo()
    provider, model = split_model_string(spec)
    factory = _PROVIDERS.get(provider)
    if factory is None:
        raise ModelConfigError(
            f"unknown model provider {provider!r} in model string {spec!r}: model strings look like "
            f"'provider:model' (e.g. 'openai:gpt-4.1-mini'); known providers: "
            f"{', '.join(model_providers())}, or 'test'"
        )
    return factory(model)


def _local(model: str) -> ModelClient:
    from ._local import local_model

    return local_model(model)


register_model_provider("local", _local)
