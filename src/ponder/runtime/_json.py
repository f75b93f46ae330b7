"""One JSON encoding for frames and rows: compact, UTF-8, and aware of pydantic models and dataclasses.

Agents return pydantic models and dataclasses from RPC methods and keep them in state; encoding them
the same way everywhere means a value that can be stored can also be sent, and the other way round.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any

__all__ = ["dumps"]


def _default(value: Any) -> Any:
    dump = getattr(value, "model_dump", None)
    if dump is not None:
        return dump(mode="json")
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return dataclasses.asdict(value)
    if isinstance(value, set | frozenset | tuple):
        return list(value)
    raise TypeError(f"{type(value).__name__} is not JSON serialisable")


def dumps(value: Any) -> str:
    """Compact JSON as it goes on the wire and into rows."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False, default=_default)
