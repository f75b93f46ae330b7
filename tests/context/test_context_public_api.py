"""ponder.context: ``__all__`` is complete, and the package stays in its layer."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import ponder.context


def test_all_names_exist_and_every_public_name_is_listed() -> None:
    module = importlib.import_module("ponder.context")
    assert [n for n in module.__all__ if not hasattr(module, n)] == []
    public = {
        n
        for n, v in vars(module).items()
        if not n.startswith("_") and not isinstance(v, type(importlib)) and n != "annotations"
    }
    assert public - set(module.__all__) == set()


def test_context_imports_only_lower_layers() -> None:
    root = Path(ponder.context.__file__).parent
    allowed = {"storage", "tools", "models"}
    offenders = []
    for path in root.glob("*.py"):
        assert len(path.read_text().splitlines()) < 800, path
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.level >= 2 and node.module:
                if node.module.split(".")[0] not in allowed:
                    offenders.append(f"{path.name} imports ..{node.module}")
            if (
                isinstance(node, ast.ImportFrom)
                and node.level == 0
                and (node.module or "").startswith("ponder.")
            ):
                if node.module.split(".")[1] not in allowed:  # type: ignore[union-attr]
                    offenders.append(f"{path.name} imports {node.module}")
    assert offenders == []
