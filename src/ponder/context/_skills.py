"""Loaded skills and the transcript: which skills are loaded, and reclaiming an unloaded skill's tokens.

Why this module exists: loading a skill is a ``load_context`` tool call whose result (the skill's full text) sits
in the stored transcript and is sent to the model on every later turn. So the transcript is the record of what
is loaded — an owner rebuilds the loaded set after a restart from it (:func:`loaded_skills_in_history`) instead of
keeping a table of its own — and unloading a skill has to rewrite that result to a short marker
(:func:`reclaim_skill_result`), or the text keeps costing tokens. The helpers work on AI SDK ``UIMessage`` dicts
and change nothing but the ``output`` of matching ``load_context`` parts.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

__all__ = [
    "SKILL_UNLOADED_PREFIX",
    "loaded_skills_in_history",
    "reclaim_skill_result",
    "skill_unloaded_marker",
]

#: Every unload marker starts with this; a ``load_context`` result that does is not a loaded skill.
SKILL_UNLOADED_PREFIX = "[skill unloaded:"

_LOAD = "load_context"
_UNLOAD = "unload_context"


def skill_unloaded_marker(key: str) -> str:
    """The text that replaces an unloaded skill's ``load_context`` result: ``[skill unloaded: <key>]``."""
    return f"{SKILL_UNLOADED_PREFIX} {key}]"


def _tool_name(part: Mapping[str, Any]) -> str | None:
    part_type = part.get("type")
    if part_type == "dynamic-tool":
        name = part.get("toolName")
        return name if isinstance(name, str) else None
    if isinstance(part_type, str) and part_type.startswith("tool-"):
        return part_type[5:]
    return None


def _skill_call(part: Mapping[str, Any], tool: str) -> tuple[str, str] | None:
    """``(label, key)`` of a settled, successful call of ``tool``, else ``None``."""
    if _tool_name(part) != tool or part.get("state") != "output-available" or part.get("preliminary") is True:
        return None
    args = part.get("input")
    if not isinstance(args, Mapping):
        return None
    label, key = args.get("label"), args.get("key")
    if not isinstance(label, str) or not isinstance(key, str) or not label or not key:
        return None
    return label, key


def loaded_skills_in_history(messages: Iterable[Mapping[str, Any]]) -> dict[str, list[str]]:
    """The skills a transcript leaves loaded, ``{label: [key, …]}`` in load order.

    Replays the assistant messages oldest first: a successful ``load_context`` result loads its key unless it was
    rewritten to the unload marker; a successful ``unload_context`` call unloads it.
    """
    loaded: dict[str, list[str]] = {}
    for message in messages:
        if message.get("role") != "assistant":
            continue
        for part in message.get("parts") or ():
            if not isinstance(part, Mapping):
                continue
            load = _skill_call(part, _LOAD)
            if load is not None:
                label, key = load
                keys = loaded.setdefault(label, [])
                output = part.get("output")
                if isinstance(output, str) and output.startswith(SKILL_UNLOADED_PREFIX):
                    if key in keys:
                        keys.remove(key)
                elif key not in keys:
                    keys.append(key)
                continue
            unload = _skill_call(part, _UNLOAD)
            if unload is not None:
                label, key = unload
                keys = loaded.get(label, [])
                if key in keys:
                    keys.remove(key)
    return {label: keys for label, keys in loaded.items() if keys}


def reclaim_skill_result(message: dict[str, Any], label: str, key: str) -> bool:
    """Rewrite, in place, every ``load_context`` result for ``(label, key)`` in ``message`` to the unload marker.

    Returns True when something changed (already-rewritten results and other roles are left alone).
    """
    if message.get("role") != "assistant":
        return False
    marker = skill_unloaded_marker(key)
    changed = False
    for part in message.get("parts") or ():
        if (
            isinstance(part, dict)
            and _skill_call(part, _LOAD) == (label, key)
            and part.get("output") != marker
        ):
            part["output"] = marker
            changed = True
    return changed
