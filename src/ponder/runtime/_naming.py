"""Names: how a class and an instance name become a URL segment and a stable agent id.

The kebab rule matches the JavaScript clients' ``camelCaseToKebabCase`` exactly, so ``useAgent({agent:
"MyAgent"})`` and ponder agree on ``my-agent``. The agent id is built from the kebab class name and the
percent-encoded instance name, so it does not depend on module paths and is the same in every process
that opens the same store.
"""

from __future__ import annotations

from urllib.parse import quote

__all__ = ["agent_id_for", "kebab_case", "sub_agent_id_for"]


def kebab_case(name: str) -> str:
    """``MyThinkAgent`` → ``my-think-agent``; ``ALL_CAPS`` → ``all-caps`` (the JS clients' rule)."""
    if name == name.upper() and name != name.lower():
        return name.lower().replace("_", "-")
    out = "".join(f"-{ch.lower()}" if "A" <= ch <= "Z" else ch for ch in name)  # ASCII, as in JS
    out = out.removeprefix("-").replace("_", "-")
    return out.removesuffix("-")


def agent_id_for(class_segment: str, name: str) -> str:
    """The stable id of a top-level agent: ``<kebab-class>/<percent-encoded name>``."""
    return f"{class_segment}/{quote(name, safe='')}"


def sub_agent_id_for(parent_id: str, class_segment: str, name: str) -> str:
    """The stable id of a sub-agent: its parent's id, then ``sub/<kebab-class>/<name>``."""
    return f"{parent_id}/sub/{agent_id_for(class_segment, name)}"
