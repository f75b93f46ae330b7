"""Think agents driven by a deterministic script, for the HTTP (AI SDK ``useChat``) end-to-end tests.

    ponder serve tests/e2e/apps/http_chat_app.py:app

``ScriptChat`` answers every message from the same script (a function of the request, so every room of
one server gets the same answers): "weather" makes it reason, call the ``get_weather`` server tool and
then report the tool's result; anything else is echoed. ``SlowChat`` streams a long reply word by word
(20 ms apart), so a test can disconnect in the middle of it.
"""

from __future__ import annotations

from typing import Any

from ponder import App
from ponder.models import ModelRequest, ToolMessage
from ponder.testing import ScriptedModel, reasoning, reply, tool_call
from ponder.think import Think, tool


@tool
def get_weather(city: str) -> dict[str, Any]:
    """Get the weather for a city."""
    return {"city": city, "sky": "sunny", "celsius": 21}


def script(request: ModelRequest) -> Any:
    last = request.messages[-1]
    if isinstance(last, ToolMessage):
        result = last.results[0].output
        return f"It is {result['sky']} and {result['celsius']} degrees in {result['city']}."
    text = request.last_user_text()
    if "weather" in text.lower():
        return reply(
            reasoning("The user wants the weather; look it up."),
            tool_call("get_weather", {"city": "Lisbon"}, id=f"call_{len(request.messages)}"),
        )
    return f"You said: {text}"


SCRIPT_MODEL = ScriptedModel(default=script)
SLOW_MODEL = ScriptedModel(
    default=lambda request: " ".join(f"word{i}" for i in range(150)) + ".", chunk_delay=0.02
)


class ScriptChat(Think):
    def get_model(self) -> Any:
        return SCRIPT_MODEL

    def get_tools(self) -> Any:
        return [get_weather]


class SlowChat(Think):
    def get_model(self) -> Any:
        return SLOW_MODEL


app = App(agents=[ScriptChat, SlowChat])
