"""Message ids in the AI SDK's format.

Why this module exists: the stock JS clients mint 16-character alphanumeric ids (the AI SDK's ``generateId``)
for the messages they create; ids the server mints look the same so nothing downstream (clients, logs, the
reconciler's exact-id match) has to care who created a message. Ids come from the OS CSPRNG because message
ids double as unguessable handles in URLs and frames.
"""

from __future__ import annotations

import random

_ALPHABET = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
_rng = random.SystemRandom()

MESSAGE_ID_LENGTH = 16


def new_message_id() -> str:
    """Return a fresh 16-character alphanumeric id, e.g. ``"DyQ0AbHrD9NnfiFC"``."""
    return "".join(_rng.choices(_ALPHABET, k=MESSAGE_ID_LENGTH))
