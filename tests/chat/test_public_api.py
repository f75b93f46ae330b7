"""ponder.chat's public surface: complete, importable, and free of upward imports."""

from __future__ import annotations

import ast
import importlib
import inspect
import types
from pathlib import Path

import ponder.chat as chat

CHAT_DIR = Path(chat.__file__).parent


def test_every_name_in_all_is_importable() -> None:
    assert len(chat.__all__) == len(set(chat.__all__)), "duplicate names in __all__"
    namespace: dict[str, object] = {}
    exec("from ponder.chat import *", namespace)
    for name in chat.__all__:
        assert hasattr(chat, name), name
        assert name in namespace, name


def test_all_lists_every_public_name_the_package_defines() -> None:
    public = {
        name
        for name, value in vars(chat).items()
        if not name.startswith("_") and not isinstance(value, types.ModuleType) and name != "annotations"
    }
    assert public == set(chat.__all__)


def test_public_callables_and_classes_are_documented() -> None:
    for name in chat.__all__:
        value = getattr(chat, name)
        if inspect.isfunction(value) or inspect.isclass(value):
            assert inspect.getdoc(value), f"{name} has no docstring"


def test_every_private_module_explains_why_it_exists() -> None:
    for path in CHAT_DIR.glob("*.py"):
        module = importlib.import_module(
            f"ponder.chat.{path.stem}" if path.stem != "__init__" else "ponder.chat"
        )
        assert module.__doc__ and len(module.__doc__.strip()) > 40, f"{path.name} lacks a module docstring"


def test_the_chat_layer_imports_no_other_ponder_package() -> None:
    for path in CHAT_DIR.glob("*.py"):
        tree = ast.parse(path.read_text(), filename=str(path))
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                modules = [node.module]
            elif isinstance(node, ast.Import):
                modules = [alias.name for alias in node.names]
            else:
                continue
            for module in modules:
                if module == "ponder" or module.startswith("ponder."):
                    assert module.startswith("ponder.chat"), f"{path.name} imports {module}"
