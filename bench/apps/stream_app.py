"""A Think agent for bench/turn.py: every turn streams a long scripted reply as fast as it can."""

from __future__ import annotations

import os

from ponder import Think
from ponder.testing import ScriptedModel

WORDS = int(os.environ.get("PONDER_BENCH_WORDS", "20000"))


class StreamBench(Think):
    def get_model(self) -> ScriptedModel:
        return ScriptedModel(default=" ".join(f"w{i}" for i in range(WORDS)))
