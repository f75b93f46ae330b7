"""A Think agent for bench/recovery.py: a long reply a ``kill -9`` interrupts, and a recoverable continuation.

    ponder serve bench/apps/recovery_app.py

``RecoveryBench`` (``/agents/recovery-bench/<name>``) answers a user message with ``ANSWER_WORDS`` words,
one chunk each, ``CHUNK_DELAY`` seconds apart. Asked to continue (recovery's ephemeral continue prompt), it
streams ``CONTINUE_WORDS`` more words at the same pace, long enough to still be streaming when the benchmark's
client reaches the restarted process.
"""

from __future__ import annotations

from ponder.models import ModelRequest, UserMessage
from ponder.testing import ScriptedModel
from ponder.think import Think
from ponder.think._turn import CONTINUE_PROMPT

ANSWER_WORDS = 2_000
CONTINUE_WORDS = 600
CHUNK_DELAY = 0.005


def answer(request: ModelRequest) -> str:
    last = request.messages[-1] if request.messages else None
    if isinstance(last, UserMessage) and last.text == CONTINUE_PROMPT:
        return " " + " ".join(f"c{i}" for i in range(CONTINUE_WORDS))
    return " ".join(f"w{i}" for i in range(ANSWER_WORDS))


class RecoveryBench(Think):
    def get_model(self) -> ScriptedModel:
        return ScriptedModel(default=answer, chunk_delay=CHUNK_DELAY, name="recovery-bench")
