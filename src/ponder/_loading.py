"""Finding what to serve: a file or module, and optionally an attribute in it.

``ponder serve app.py`` serves the file's ``App`` if it defines one (so its store and auth hooks
apply), else every ``Agent`` subclass the file defines; ``ponder serve app.py:app`` or
``mypkg.agents:app`` serves the named ``App`` (or agent class). Failures become
:class:`LoadError` with a message that says what to do, never a bare traceback.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

from .runtime import Agent
from .server import App

__all__ = ["LoadError", "load_target"]


class LoadError(Exception):
    """The serve target could not be found or imported."""


def _import_file(path: Path) -> ModuleType:
    directory = str(path.parent.resolve())
    if directory not in sys.path:
        sys.path.insert(0, directory)
    module_name = path.stem
    spec = importlib.util.spec_from_file_location(module_name, path)
    if spec is None or spec.loader is None:
        raise LoadError(f"cannot import {path}: not a Python file")
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    try:
        spec.loader.exec_module(module)
    except Exception as exc:
        sys.modules.pop(module_name, None)
        raise LoadError(f"importing {path} failed: {type(exc).__name__}: {exc}") from exc
    return module


def _import_module(name: str) -> ModuleType:
    if "" not in sys.path and str(Path.cwd()) not in sys.path:
        sys.path.insert(0, str(Path.cwd()))
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as exc:
        if exc.name == name or name.startswith(f"{exc.name}."):
            raise LoadError(
                f"no file or module named {name!r} (looked for a file relative to {Path.cwd()} and an importable module)"
            ) from exc
        raise LoadError(f"importing {name} failed: {exc}") from exc
    except Exception as exc:
        raise LoadError(f"importing {name} failed: {type(exc).__name__}: {exc}") from exc


def load_module(spec: str) -> ModuleType:
    path = Path(spec)
    if spec.endswith(".py") or path.exists():
        if not path.is_file():
            raise LoadError(f"no such file: {spec}")
        return _import_file(path)
    return _import_module(spec)


def load_target(target: str) -> App | list[type[Agent]]:
    """An ``App`` to serve, or the agent classes to build one from."""
    spec, _, attr = target.partition(":")
    if len(spec) == 1 and attr and attr[:1] in "\\/":  # a Windows drive letter, not an attribute
        spec, attr = target, ""
    module = load_module(spec)
    if attr:
        try:
            value: Any = getattr(module, attr)
        except AttributeError:
            raise LoadError(f"{spec} has no attribute {attr!r}") from None
        if isinstance(value, App):
            return value
        if isinstance(value, type) and issubclass(value, Agent):
            return [value]
        raise LoadError(
            f"{spec}:{attr} is a {type(value).__name__}; expected a ponder App or an Agent subclass"
        )
    apps = [value for value in vars(module).values() if isinstance(value, App)]
    if len(apps) == 1:
        # An App carries the store and the auth hooks: serving the bare classes would drop them.
        return apps[0]
    if len(apps) > 1:
        names = ", ".join(sorted(n for n, v in vars(module).items() if isinstance(v, App)))
        raise LoadError(f"{spec} defines several Apps ({names}); name the one to serve, e.g. {spec}:app")
    agents = [
        value
        for value in vars(module).values()
        if isinstance(value, type)
        and issubclass(value, Agent)
        and value.__module__ == module.__name__
        and not value.__dict__.get("__abstract_agent__", False)
    ]
    if agents:
        return agents
    raise LoadError(f"{spec} defines no Agent subclass; define one, or name an App with {spec}:app")
