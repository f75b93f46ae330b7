"""``@callable``: which agent methods clients may call over ``rpc`` frames.

Nothing is reachable by RPC unless it is marked, so adding a helper method to an agent never exposes
it to the internet by accident. A streaming callable is an async generator: each value it yields is
sent as a ``done: false`` chunk.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar, overload

__all__ = ["CallableInfo", "callable", "callable_info"]

F = TypeVar("F", bound=Callable[..., Any])

_builtin_callable = callable
_MARK = "__ponder_callable__"


@dataclass(frozen=True, slots=True)
class CallableInfo:
    """How a method marked with ``@callable`` is exposed."""

    name: str
    streaming: bool
    description: str | None


@overload
def callable(fn: F, /) -> F: ...


@overload
def callable(*, streaming: bool = False, description: str | None = None) -> Callable[[F], F]: ...


def callable(fn: Any = None, /, *, streaming: bool = False, description: str | None = None) -> Any:
    """Expose an agent method to clients' ``agent.call(...)`` / ``agent.stub.method(...)``.

    Use as ``@callable`` or ``@callable(streaming=True)``; a streaming callable must be an async
    generator function.
    """

    def mark(method: F) -> F:
        if not _builtin_callable(method):
            raise TypeError("@callable decorates a method")
        if streaming and not inspect.isasyncgenfunction(method):
            raise TypeError(
                f"@callable(streaming=True) needs an async generator method (`async def ...: yield ...`); "
                f"{method.__qualname__} is not one"
            )
        doc = description if description is not None else inspect.getdoc(method)
        setattr(method, _MARK, CallableInfo(method.__name__, streaming, doc))
        return method

    if fn is not None:
        return mark(fn)
    return mark


def callable_info(obj: Any, name: str) -> CallableInfo | None:
    """The :class:`CallableInfo` of ``obj.<name>`` if that method is marked ``@callable``."""
    if not isinstance(name, str) or not name or name.startswith("_"):
        return None
    attr = inspect.getattr_static(type(obj), name, None)
    if isinstance(attr, staticmethod | classmethod):
        attr = attr.__func__
    return getattr(attr, _MARK, None)
