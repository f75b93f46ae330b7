"""ponder.testing exports its scripted-model helpers through __all__."""

from __future__ import annotations

import types

import ponder.testing


def test_all_names_exist() -> None:
    for name in ponder.testing.__all__:
        assert hasattr(ponder.testing, name), name


def test_scripted_model_api_is_exported() -> None:
    expected = {
        "ScriptedModel",
        "ScriptedModelExhausted",
        "reasoning",
        "tool_call",
        "error",
        "stall",
        "reply",
    }
    assert expected <= set(ponder.testing.__all__)


def test_no_unlisted_public_names() -> None:
    public = {
        name
        for name, value in vars(ponder.testing).items()
        if not name.startswith("_") and not isinstance(value, types.ModuleType)
    }
    assert public <= set(ponder.testing.__all__)
