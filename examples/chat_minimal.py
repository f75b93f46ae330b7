"""The smallest chat agent: pick a model, and it speaks the Cloudflare chat protocol.

    ponder serve examples/chat_minimal.py

Connect ``useAgentChat`` (``useAgent({agent: "MyChat", name: "room-1"})``) or any stock Cloudflare chat
client to ``/agents/my-chat/<name>``. ``PONDER_MODEL`` chooses the model (default ``"test"``: an offline
model that echoes you), e.g. ``PONDER_MODEL=openai:gpt-4.1-mini``.
"""

from __future__ import annotations

import os

from ponder.think import Think


class MyChat(Think):
    def get_model(self) -> str:
        return os.environ.get("PONDER_MODEL", "test")
