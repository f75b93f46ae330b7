"""A ``Think`` agent for the stock-hook tests (``tests/e2e/test_chat_hooks.py``).

    ponder serve tests/e2e/apps/chat_app.py

``HookChat`` (served at ``/agents/hook-chat/<name>``) answers with a ``ScriptedModel`` whose script is
chosen by the part of the agent name before the first ``-``: the agent ``tools-1a2b`` plays the
``tools`` script. Each agent instance builds its own model in ``get_model`` (Think caches it per
instance), so every scenario, under its own name, starts at the top of its script.

Replies written as ``_tool_report`` are functions of the model request: they quote the last tool
result the model was given, which shows that the server really fed the tool's output (or the
user's denial, or the browser's answer) back to the model.

Two test-only HTTP routes sit beside ``get-messages``:

* ``GET  …/branches?of=<message id>`` — ``get_branches()``: every stored child of a message (a
  regenerated answer is a sibling of the old one), as JSON.
* ``POST …/seed`` — store the JSON array of UIMessages in the body with ``add_messages`` (no turn),
  for the initial-messages scenario.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse

from ponder.models import ModelRequest, ToolMessage
from ponder.testing import ScriptedModel, tool_call
from ponder.think import Think, tool

#: How long ``delete_file`` takes. Long enough that the hook's resume probe after an approval is answered
#: (and the hook attached to the continuation) before the approved call's result is streamed.
DELETE_SECONDS = 0.2


@tool
def get_weather(city: str) -> dict[str, Any]:
    """Get the current weather for a city.

    Args:
        city: The city name, e.g. "Lisbon".
    """
    return {"city": city, "temperature_c": 21, "summary": "sunny"}


@tool(needs_approval=True)
async def delete_file(path: str) -> str:
    """Delete a file from the user's workspace (asks the user first)."""
    await asyncio.sleep(DELETE_SECONDS)  # real work takes a moment: the hook attaches to the stream meanwhile
    return f"{path} deleted"


def _tool_report(request: ModelRequest) -> str:
    """A reply quoting the newest tool result in the request."""
    for message in reversed(request.messages):
        if isinstance(message, ToolMessage) and message.results:
            result = message.results[-1]
            if result.error is not None:
                return f"The {result.tool_name} tool failed: {result.error}"
            return f"The {result.tool_name} tool returned {json.dumps(result.output, sort_keys=True)}"
    return "I did not get any tool result."


#: Replies per script, in the order the model is called, and the pause between streamed chunks. A
#: pause, however short, lets the agent's loop handle other frames between chunks, as a real provider
#: does (with no pause a continuation streams to the end before the hook's resume probe is read).
SCRIPTS: dict[str, tuple[list[Any], float]] = {
    "basic": (["Hello from ponder! This reply streams to the hook word by word."], 0.03),
    "tools": ([tool_call("get_weather", {"city": "Lisbon"}), _tool_report], 0.0),
    "approval": (
        [
            tool_call("delete_file", {"path": "a.txt"}),
            _tool_report,  # the continuation after the approval
            tool_call("delete_file", {"path": "b.txt"}),
            _tool_report,  # the continuation after the denial
        ],
        0.01,
    ),
    "client": ([tool_call("getLocation", {"precise": True}), _tool_report], 0.01),
    "regen": (
        [
            "First answer: the chicken crossed the road.",
            "Second answer: the chicken stayed home.",
        ],
        0.0,
    ),
    # The first reply takes about 60 x 0.05 s = 3 s to stream: long enough to stop it midway.
    "cancel": ([" ".join(f"word{i}" for i in range(60)), "Still here after the cancel."], 0.05),
    "live": (["Live from the other hook: both hooks see this reply as it streams."], 0.05),
    "initial": ([], 0.0),
}


class HookChat(Think):
    max_steps = 5

    def get_model(self) -> ScriptedModel:
        script = self.name.split("-", 1)[0]
        replies, delay = SCRIPTS.get(script, ([], 0.0))
        return ScriptedModel(list(replies), chunk_delay=delay, name=f"{script}:{self.name}")

    def get_tools(self) -> list[Any]:
        return [get_weather, delete_file]

    async def on_request(self, request: Request) -> Any:
        path = request.url.path.rstrip("/")
        if request.method == "GET" and path.endswith("/branches"):
            return JSONResponse(await self.get_branches(request.query_params["of"]))
        if request.method == "POST" and path.endswith("/seed"):
            stored = await self.add_messages(await request.json())
            return JSONResponse({"stored": len(stored)})
        return await super().on_request(request)
