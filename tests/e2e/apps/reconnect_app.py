"""A ``Think`` agent for the reconnect tests (``tests/e2e/test_hook_reconnect.py``).

    ponder serve tests/e2e/apps/reconnect_app.py

``ReconnectChat`` (``/agents/reconnect-chat/<name>``) answers every message with ``FULL_REPLY``, one
word every ``CHUNK_DELAY`` seconds (about 2 s in all): long enough to drop the client's socket, or to
``kill -9`` the server, while it streams.

A recovered continuation (the server restarted mid-reply; the model gets the partial reply and an
ephemeral "continue" instruction) writes only the rest of ``FULL_REPLY`` after the stored partial, so a
correct recovery ends with exactly ``FULL_REPLY`` in one assistant message.

Under an agent name starting with ``slow-`` the model first thinks for ``THINK_SECONDS`` before its
first chunk, every time it is called: the turn's ``start`` chunk is out and nothing else, which is when
the retry-path test kills the server.
"""

from __future__ import annotations

import asyncio
from typing import Any

from ponder.models import AssistantMessage, ModelRequest, UserMessage
from ponder.testing import ScriptedModel
from ponder.think import Think

FULL_REPLY = " ".join(f"word{i}" for i in range(40)) + " done."
CHUNK_DELAY = 0.05
THINK_SECONDS = 1.0


def _rest_of_reply(request: ModelRequest) -> str:
    """``FULL_REPLY``, minus what the assistant already wrote after the last user message."""
    written = ""
    for message in reversed(request.messages):
        if isinstance(message, AssistantMessage):
            written = message.text + written
        elif isinstance(message, UserMessage) and message.text.startswith("Tell me"):
            break
    if not FULL_REPLY.startswith(written):
        return f"[the partial reply is not a prefix of the scripted one: {written!r}]"
    return FULL_REPLY[len(written) :]


class ReconnectChat(Think):
    def get_model(self) -> ScriptedModel:
        if self.name.startswith("slow-"):

            async def reply(request: ModelRequest) -> Any:
                await asyncio.sleep(THINK_SECONDS)
                return _rest_of_reply(request)

            return ScriptedModel(default=reply, chunk_delay=CHUNK_DELAY, name=f"slow:{self.name}")
        return ScriptedModel(default=_rest_of_reply, chunk_delay=CHUNK_DELAY, name=f"reply:{self.name}")
