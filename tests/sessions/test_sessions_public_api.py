"""ponder.sessions: ``__all__`` is complete, and the package stays in its layer."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import ponder.sessions


def test_all_names_exist_and_every_public_name_is_listed() -> None:
    module = importlib.import_module("ponder.sessions")
    assert [n for n in module.__all__ if not hasattr(module, n)] == []
    public = {
        n
        for n, v in vars(module).items()
        if not n.startswith("_") and not isinstance(v, type(importlib)) and n != "annotations"
    }
    assert public - set(module.__all__) == set()


def test_sessions_imports_only_lower_layers() -> None:
    root = Path(ponder.sessions.__file__).parent
    banned = {"think", "server", "cli", "runtime"}
    offenders = []
    for path in root.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.level >= 2 and node.module:
                if node.module.split(".")[0] in banned:
                    offenders.append(f"{path.name}: {node.module}")
            elif isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("ponder."):
                if node.module.split(".")[1] in banned:
                    offenders.append(f"{path.name}: {node.module}")
    assert offenders == []


def test_modules_stay_small() -> None:
    root = Path(ponder.sessions.__file__).parent
    assert {p.name: n for p in root.glob("*.py") if (n := len(p.read_text().splitlines())) >= 800} == {}
