"""Strip ephemeral provider data from a message before it is stored or compared.

Why this module exists: OpenAI's Responses API attaches per-response handles to parts (``itemId``,
``reasoningEncryptedContent``). They are meaningless once the response is over, and sending them back in a later
request makes the provider look up items that no longer exist. Reasoning parts that end up with no text and no
provider metadata carry nothing at all. Every write path sanitises, and the reconciler compares sanitised
parts, so two copies of the same reply match even when only one still carries the handles.
"""

from __future__ import annotations

from typing import Any

from ._types import UIMessage, UIMessagePart

_OPENAI_EPHEMERAL_KEYS = ("itemId", "reasoningEncryptedContent")
_METADATA_KEYS = ("providerMetadata", "callProviderMetadata")


def _strip_openai(metadata: dict[str, Any]) -> dict[str, Any] | None:
    """Return ``metadata`` without OpenAI's ephemeral keys; ``None`` when nothing is left."""
    openai = metadata.get("openai")
    if not isinstance(openai, dict) or not any(key in openai for key in _OPENAI_EPHEMERAL_KEYS):
        return metadata
    rest_openai = {key: value for key, value in openai.items() if key not in _OPENAI_EPHEMERAL_KEYS}
    stripped = {key: value for key, value in metadata.items() if key != "openai"}
    if rest_openai:
        stripped["openai"] = rest_openai
    return stripped or None


def _sanitize_part(part: UIMessagePart) -> UIMessagePart:
    sanitized = part
    for key in _METADATA_KEYS:
        metadata = sanitized.get(key)
        if not isinstance(metadata, dict):
            continue
        stripped = _strip_openai(metadata)
        if stripped is metadata:
            continue
        if sanitized is part:
            sanitized = dict(part)
        if stripped is None:
            del sanitized[key]
        else:
            sanitized[key] = stripped
    return sanitized


def _is_empty_reasoning(part: UIMessagePart) -> bool:
    if part.get("type") != "reasoning":
        return False
    text = part.get("text")
    if isinstance(text, str) and text.strip():
        return False
    metadata = part.get("providerMetadata")
    return not (isinstance(metadata, dict) and metadata)


def sanitize_message(message: UIMessage) -> UIMessage:
    """Return ``message`` without OpenAI ephemeral metadata and without empty reasoning parts.

    From each part's ``providerMetadata`` and ``callProviderMetadata`` the ``openai.itemId`` and
    ``openai.reasoningEncryptedContent`` entries are removed (then an empty ``openai`` entry, then an empty
    metadata object). Reasoning parts whose text is blank and which have no provider metadata left are
    dropped. The input is never mutated: changed parts are copies, and when nothing needed changing the very
    same ``message`` object is returned.
    """
    parts = message.get("parts")
    if not parts:
        return message
    changed = False
    new_parts: list[UIMessagePart] = []
    for part in parts:
        sanitized = _sanitize_part(part)
        if _is_empty_reasoning(sanitized):
            changed = True
            continue
        if sanitized is not part:
            changed = True
        new_parts.append(sanitized)
    if not changed:
        return message
    result = dict(message)
    result["parts"] = new_parts
    return result
