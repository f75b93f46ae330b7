"""ponder.models exports exactly its public API through __all__."""

from __future__ import annotations

import types

import ponder.models


def test_all_names_exist() -> None:
    for name in ponder.models.__all__:
        assert hasattr(ponder.models, name), name


def test_all_is_complete_and_unique() -> None:
    public = {
        name
        for name, value in vars(ponder.models).items()
        if not name.startswith("_") and not isinstance(value, types.ModuleType)
    }
    assert public == set(ponder.models.__all__)
    assert len(ponder.models.__all__) == len(set(ponder.models.__all__))


def test_core_api_is_present() -> None:
    expected = {
        "ModelClient",
        "ModelRequest",
        "ModelSettings",
        "ToolDefinition",
        "ModelError",
        "resolve_model",
        "ui_messages_to_model_messages",
        "TextDelta",
        "ReasoningDelta",
        "ToolCallStart",
        "ToolCallDelta",
        "ToolCallEnd",
        "Usage",
        "Finish",
        "OpenAICompatibleModel",
    }
    assert expected <= set(ponder.models.__all__)
