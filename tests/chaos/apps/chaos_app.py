"""A ``Think`` agent for the chaos test (``tests/chaos/test_chaos.py``).

    ponder serve tests/chaos/apps/chaos_app.py

``ChaosChat`` (``/agents/chaos-chat/<name>``) answers deterministically from the user text
``"<kind> <i>"``: ``plain`` streams about 20 words ending in the marker ``end-<i>``; ``tool`` first calls
the idempotent server tool ``square`` (its settled result, ``{"n": i, "square": i*i}``, is checkable);
``approve`` calls the approval-gated ``confirm`` first. After a tool result the model writes
``result <output> end-<i>``. A recovered continuation (the ephemeral continue prompt) writes only what is
missing: ``end-<i>`` when the partial lacks it, else ``.``. Every model call first "thinks" for
``THINK_SECONDS`` (the turn's ``start`` chunk is out, nothing else: the test's "before streaming" kill point),
then streams its chunks 0.015 s apart. A request id starting with ``hold-`` is held between storing its
messages and starting its turn (see ``_check_runnable``); one starting with ``holdend-`` is held, once it has
been recovered, right after its ``finish`` chunk is stored and before the turn ends (see ``on_chunk``).
"""

from __future__ import annotations

import asyncio
import json
import re
from typing import Any

from ponder.models import AssistantMessage, ModelRequest, ToolMessage, UserMessage
from ponder.testing import ScriptedModel, tool_call
from ponder.think import Think, tool
from ponder.think._turn import CONTINUE_PROMPT

USER = re.compile(r"^(plain|tool|approve) (\d+)$")
CHUNK_DELAY = 0.015
THINK_SECONDS = 0.06


@tool(idempotent=True)
def square(n: int) -> dict[str, int]:
    """Square a number (idempotent: safe to re-run)."""
    return {"n": n, "square": n * n}


@tool(needs_approval=True, idempotent=True)
def confirm(n: int) -> dict[str, int]:
    """Confirm an action (asks the user first)."""
    return {"n": n, "confirmed": n + 1000}


async def answer(request: ModelRequest) -> Any:
    """The reply to ``request`` (after a pause to think)."""
    await asyncio.sleep(THINK_SECONDS)
    return reply_to(request)


def reply_to(request: ModelRequest) -> Any:
    """The reply to ``request``: a function of the last real user message and what followed it."""
    kind, i, after = "plain", -1, []
    for index in range(len(request.messages) - 1, -1, -1):
        message = request.messages[index]
        if isinstance(message, UserMessage):
            match = USER.match(message.text.strip())
            if match:
                kind, i, after = match.group(1), int(match.group(2)), request.messages[index + 1 :]
                break
    marker = f"end-{i}"
    partial = "".join(m.text for m in after if isinstance(m, AssistantMessage))
    continuing = bool(after) and isinstance(after[-1], UserMessage) and after[-1].text == CONTINUE_PROMPT
    results = [r for m in after if isinstance(m, ToolMessage) for r in m.results]
    if (
        kind != "plain"
        and not results
        and not any(
            getattr(c, "type", "") == "tool-call"
            for m in after
            if isinstance(m, AssistantMessage)
            for c in m.content
        )
    ):
        name = "square" if kind == "tool" else "confirm"
        return tool_call(name, {"n": i}, id=f"{name}-{i}")  # unique across restarts (the model is rebuilt)
    if marker in partial:
        return "."
    if continuing and not results:
        return f" {marker}"
    if results:
        last = results[-1]
        shown = json.dumps(last.output, sort_keys=True) if last.error is None else f"error {last.error}"
        return f"result {shown} {marker}"
    words = " ".join(f"w{k}" for k in range(18))
    return f"answer {i}: {words} {marker}"


class ChaosChat(Think):
    max_steps = 4

    def get_model(self) -> ScriptedModel:
        return ScriptedModel(default=answer, chunk_delay=CHUNK_DELAY, name="chaos")

    def get_tools(self) -> list[Any]:
        return [square, confirm]

    async def on_chunk(self, chunk: dict[str, Any]) -> None:
        """Test double: a recovered ``holdend-`` turn waits 30 s once its ``finish`` chunk is stored (the
        window between the end of the stream and the end of the turn, where a kill can hit)."""
        turn = self._streaming
        if (
            chunk.get("type") == "finish"
            and turn is not None
            and turn.spec.recovery
            and turn.request_id.startswith("holdend-")
        ):
            await asyncio.sleep(30)

    async def _check_runnable(self, spec: Any) -> None:
        """Test double: a request whose id starts with ``hold-`` waits 30 s after its messages are stored
        and before its chat-turn fiber starts (the window a kill can hit); its recovered retry does not."""
        if spec.request_id.startswith("hold-") and not spec.recovery:
            await asyncio.sleep(30)
        await super()._check_runnable(spec)
