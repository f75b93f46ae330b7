"""Fixtures: one fake provider server per session, reset and wired into the environment per test."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest

from ponder.models import PydanticAIModel
from tests.models.fake_provider import FakeProvider, FakeProviderServer

_ENV = (
    "OPENAI_API_KEY",
    "OPENAI_BASE_URL",
    "ANTHROPIC_API_KEY",
    "ANTHROPIC_BASE_URL",
    "OLLAMA_BASE_URL",
    "OLLAMA_API_KEY",
)


@pytest.fixture(scope="session")
def _fake_server() -> Iterator[FakeProvider]:
    server = FakeProviderServer()
    provider = server.start()
    yield provider
    server.stop()


@pytest.fixture
def clean_env(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    """No provider variables from the outer environment leak into a test."""
    for name in _ENV:
        monkeypatch.delenv(name, raising=False)
    return monkeypatch


@pytest.fixture
def fake(_fake_server: FakeProvider, clean_env: pytest.MonkeyPatch) -> FakeProvider:
    """The fake provider, with OPENAI_* / ANTHROPIC_* / OLLAMA_* pointing at it and test keys set."""
    _fake_server.reset()
    clean_env.setenv("OPENAI_API_KEY", "sk-test-openai")
    clean_env.setenv("OPENAI_BASE_URL", _fake_server.openai_base_url)
    clean_env.setenv("ANTHROPIC_API_KEY", "sk-test-anthropic")
    clean_env.setenv("ANTHROPIC_BASE_URL", _fake_server.anthropic_base_url)
    clean_env.setenv("OLLAMA_BASE_URL", _fake_server.ollama_base_url)
    return _fake_server


@pytest.fixture(autouse=True)
async def _close_models(monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[None]:
    """Close the HTTP pool of every adapter a test built, so no socket is left to the garbage collector."""
    created: list[PydanticAIModel] = []
    original = PydanticAIModel.__init__

    def init(self: PydanticAIModel, *args: Any, **kwargs: Any) -> None:
        original(self, *args, **kwargs)
        created.append(self)

    monkeypatch.setattr(PydanticAIModel, "__init__", init)
    yield
    for model in created:
        await model.aclose()
