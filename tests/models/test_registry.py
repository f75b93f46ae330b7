"""Model strings: parsing, providers, clear configuration errors, lazy SDK imports."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
import textwrap
from collections.abc import AsyncIterator

import pytest

from ponder.models import (
    AnthropicModel,
    Finish,
    MissingExtraError,
    ModelClient,
    ModelConfigError,
    ModelEvent,
    ModelRequest,
    OllamaModel,
    OpenAICompatibleModel,
    OpenAIModel,
    TextDelta,
    UserMessage,
    model_providers,
    register_model_provider,
    resolve_model,
)
from ponder.models._registry import _PROVIDERS, split_model_string
from ponder.testing import ScriptedModel


class MyModel:
    name = "mine"

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        yield TextDelta("mine")
        yield Finish("stop")


async def test_test_model_string_is_an_echo_scripted_model() -> None:
    model = resolve_model("test")
    assert isinstance(model, ScriptedModel)
    assert model.name == "test"
    events = [e async for e in model.stream(ModelRequest(messages=[UserMessage("hello there")]))]
    assert "".join(e.text for e in events if isinstance(e, TextDelta)) == "echo: hello there"
    assert events[-1] == Finish("stop")


def test_model_objects_are_returned_unchanged() -> None:
    model = MyModel()
    assert isinstance(model, ModelClient)
    assert resolve_model(model) is model  # type: ignore[arg-type]


def test_non_models_are_rejected() -> None:
    with pytest.raises(TypeError, match="model string or a ModelClient"):
        resolve_model(42)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ("openai:gpt-4.1-mini", ("openai", "gpt-4.1-mini")),
        ("openai/gpt-4.1-mini", ("openai", "gpt-4.1-mini")),
        ("OpenAI:gpt-4.1", ("openai", "gpt-4.1")),
        ("ollama:llama3.2:3b", ("ollama", "llama3.2:3b")),
        ("ollama/llama3.2:3b", ("ollama", "llama3.2:3b")),
        ("openai-compatible:org/model@http://h:8000/v1", ("openai-compatible", "org/model@http://h:8000/v1")),
        ("local", ("local", "")),
    ],
)
def test_split_model_string(spec: str, expected: tuple[str, str]) -> None:
    assert split_model_string(spec) == expected


def test_unknown_provider_lists_the_known_ones() -> None:
    with pytest.raises(ModelConfigError) as info:
        resolve_model("gemini:flash")
    message = str(info.value)
    assert "unknown model provider 'gemini'" in message
    for name in ("openai", "anthropic", "ollama", "openai-compatible", "test"):
        assert name in message


def test_bare_model_name_explains_the_format() -> None:
    with pytest.raises(ModelConfigError, match="provider:model"):
        resolve_model("gpt-4o")


def test_missing_model_name() -> None:
    with pytest.raises(ModelConfigError, match="names no model"):
        resolve_model("openai:")


def test_missing_openai_key_names_the_variable(clean_env: pytest.MonkeyPatch) -> None:
    with pytest.raises(ModelConfigError, match="OPENAI_API_KEY"):
        resolve_model("openai:gpt-4.1-mini")


def test_openai_base_url_without_key_is_allowed(clean_env: pytest.MonkeyPatch) -> None:
    clean_env.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")
    assert isinstance(resolve_model("openai:local-llm"), OpenAIModel)


def test_missing_anthropic_key_names_the_variable(clean_env: pytest.MonkeyPatch) -> None:
    with pytest.raises(ModelConfigError, match="ANTHROPIC_API_KEY"):
        resolve_model("anthropic:claude-sonnet-4-5")


def test_keys_are_read_from_the_environment(clean_env: pytest.MonkeyPatch) -> None:
    clean_env.setenv("OPENAI_API_KEY", "sk-x")
    clean_env.setenv("ANTHROPIC_API_KEY", "sk-y")
    openai = resolve_model("openai:gpt-4.1-mini")
    anthropic = resolve_model("anthropic/claude-sonnet-4-5")
    assert isinstance(openai, OpenAIModel) and openai.name == "openai:gpt-4.1-mini"
    assert isinstance(anthropic, AnthropicModel) and anthropic.name == "anthropic:claude-sonnet-4-5"


def test_ollama_defaults_to_localhost(clean_env: pytest.MonkeyPatch) -> None:
    model = resolve_model("ollama:llama3.2:3b")
    assert isinstance(model, OllamaModel)
    assert model.name == "ollama:llama3.2:3b"
    assert str(model.model.base_url).rstrip("/") == "http://localhost:11434/v1"  # type: ignore[attr-defined]


def test_ollama_base_url_from_environment(clean_env: pytest.MonkeyPatch) -> None:
    clean_env.setenv("OLLAMA_BASE_URL", "http://127.0.0.1:9999/v1")
    model = resolve_model("ollama/qwen3")
    assert str(model.model.base_url).rstrip("/") == "http://127.0.0.1:9999/v1"  # type: ignore[attr-defined]


def test_openai_compatible_needs_a_base_url(clean_env: pytest.MonkeyPatch) -> None:
    with pytest.raises(ModelConfigError, match="@<base_url>"):
        resolve_model("openai-compatible:qwen3")
    model = resolve_model("openai-compatible:org/qwen3@http://127.0.0.1:8000/v1")
    assert isinstance(model, OpenAICompatibleModel)
    assert model.base_url == "http://127.0.0.1:8000/v1"
    assert model.name == "openai-compatible:org/qwen3@http://127.0.0.1:8000/v1"


@pytest.mark.parametrize(
    ("spec", "module", "extra"),
    [
        ("openai:gpt-4.1-mini", "openai", "openai"),
        ("ollama:llama3.2", "openai", "openai"),
        ("openai-compatible:m@http://127.0.0.1:1/v1", "openai", "openai"),
        ("anthropic:claude-sonnet-4-5", "anthropic", "anthropic"),
    ],
)
def test_missing_extra_names_the_pip_command(
    clean_env: pytest.MonkeyPatch, spec: str, module: str, extra: str
) -> None:
    clean_env.setenv("OPENAI_API_KEY", "sk-x")
    clean_env.setenv("ANTHROPIC_API_KEY", "sk-y")
    real_find_spec = importlib.util.find_spec

    def find_spec(name: str, *args: object, **kwargs: object) -> object:
        return None if name == module else real_find_spec(name, *args, **kwargs)  # type: ignore[arg-type]

    clean_env.setattr(importlib.util, "find_spec", find_spec)
    with pytest.raises(MissingExtraError) as info:
        resolve_model(spec)
    assert f'pip install "ponder[{extra}]"' in str(info.value)
    assert isinstance(info.value, ImportError)
    assert isinstance(info.value, ValueError)


async def test_register_model_provider() -> None:
    register_model_provider("mine", lambda model: MyModel())
    try:
        assert "mine" in model_providers()
        model = resolve_model("mine:anything")
        assert isinstance(model, MyModel)
        with pytest.raises(ValueError, match="already registered"):
            register_model_provider("mine", lambda model: MyModel())
        register_model_provider("mine", lambda model: MyModel(), replace=True)
        with pytest.raises(ValueError, match="invalid model provider name"):
            register_model_provider("a:b", lambda model: MyModel())
    finally:
        _PROVIDERS.pop("mine", None)


def test_importing_and_resolving_test_does_not_load_provider_sdks() -> None:
    code = textwrap.dedent(
        """
        import sys
        import ponder.models
        import ponder.testing
        ponder.models.resolve_model("test")
        loaded = sorted(m for m in sys.modules if m.split(".")[0] in ("pydantic_ai", "openai", "anthropic"))
        print(",".join(loaded))
        """
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == ""
