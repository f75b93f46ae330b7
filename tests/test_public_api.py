"""The package's public surface: ``__all__`` is complete and everything in it imports."""

from __future__ import annotations

import importlib

import pytest

import ponder

PACKAGES = [
    "ponder",
    "ponder.runtime",
    "ponder.storage",
    "ponder.server",
    "ponder.chat",
    "ponder.context",
    "ponder.models",
    "ponder.testing",
    "ponder.think",
    "ponder.tools",
]


@pytest.mark.parametrize("name", PACKAGES)
def test_all_names_exist(name: str) -> None:
    module = importlib.import_module(name)
    missing = [n for n in module.__all__ if not hasattr(module, n)]
    assert missing == []


@pytest.mark.parametrize("name", PACKAGES)
def test_every_public_attribute_is_in_all(name: str) -> None:
    module = importlib.import_module(name)
    public = {
        n
        for n, v in vars(module).items()
        if not n.startswith("_") and not isinstance(v, type(importlib)) and n not in {"annotations"}
    }
    assert public - set(module.__all__) == set()


def test_top_level_surface() -> None:
    assert {"Agent", "AgentHost", "App", "callable", "Think", "tool"} <= set(ponder.__all__)


def test_lower_layers_do_not_import_higher_ones() -> None:
    import ast
    from pathlib import Path

    root = Path(ponder.__file__).parent
    forbidden = {
        "storage": {"runtime", "server", "think", "chat", "models", "cli"},
        "runtime": {"server", "think", "chat", "models", "cli"},
        "chat": {"runtime", "server", "think", "models", "storage", "cli"},
        "models": {"runtime", "server", "think", "cli"},
        "tools": {"server", "think", "cli"},
        "think": {"server", "cli"},
    }
    offenders = []
    for layer, banned in forbidden.items():
        for path in (root / layer).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, ast.ImportFrom) and node.level >= 2 and node.module:
                    if node.module.split(".")[0] in banned:
                        offenders.append(f"{path.relative_to(root)} imports ..{node.module}")
                if (
                    isinstance(node, ast.ImportFrom)
                    and node.level == 0
                    and (node.module or "").startswith("ponder.")
                ):
                    if node.module.split(".")[1] in banned:
                        offenders.append(f"{path.relative_to(root)} imports {node.module}")
    assert offenders == []
