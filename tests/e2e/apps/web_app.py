"""A ``Think`` agent with a scripted model for the web page test.

    ponder serve tests/e2e/apps/web_app.py

The script, in call order: a first answer (reasoning, then Markdown text); a tool call that needs
approval; after the approval, the final answer of that turn; then a different answer for the
regeneration of that turn. Any further call answers ``(end of script)``.

``MemoryChat`` declares a ``memory`` context block; its first answer writes it with ``set_context`` (the
page's Memory panel shows the write live).

``SlowChat`` answers every message with the same long text, one word every 50 ms, so a second page can
join while it streams.
"""

from __future__ import annotations

from ponder import ContextBlock
from ponder.testing import ScriptedModel, reasoning, reply, tool_call
from ponder.think import Think, tool

FIRST_ANSWER = (
    "Hello! I'm the **ponder** test agent. Here is what I can show:\n\n"
    "- streamed text with `inline code`\n"
    "- tool calls that wait for your approval\n\n"
    "```python\nprint('hello from ponder')\n```"
)
TOOL_INTRO = "Sure, I'll delete that file."
FINAL_ANSWER = "Done: `notes.txt` is deleted."
REGENERATED_ANSWER = "Another take: I would rather archive notes.txt than delete it."

MODEL = ScriptedModel(
    [
        reply(reasoning("The user greets me. I will introduce myself briefly."), FIRST_ANSWER),
        reply(TOOL_INTRO, tool_call("delete_file", {"path": "notes.txt"})),
        FINAL_ANSWER,
        REGENERATED_ANSWER,
    ],
    chunk_delay=0.02,
    default="(end of script)",
)


SLOW_ANSWER = " ".join(f"word{i}" for i in range(60)) + "."
SLOW_MODEL = ScriptedModel(chunk_delay=0.05, default=SLOW_ANSWER)


@tool(needs_approval=True)
def delete_file(path: str) -> str:
    """Delete a file from the user's workspace."""
    return f"{path} deleted"


class WebChat(Think):
    def get_model(self) -> ScriptedModel:
        return MODEL

    def get_tools(self) -> list:
        return [delete_file]


class SlowChat(Think):
    def get_model(self) -> ScriptedModel:
        return SLOW_MODEL


MEMORY_NOTE = "The user likes <b>green</b> tea.\nPrefers short answers."
MEMORY_MODEL = ScriptedModel(
    [
        reply("Noting that.", tool_call("set_context", {"label": "memory", "content": MEMORY_NOTE})),
        "Saved to memory.",
    ],
    chunk_delay=0.02,
    default="(end of script)",
)


class MemoryChat(Think):
    def get_model(self) -> ScriptedModel:
        return MEMORY_MODEL

    def configure_context(self) -> list[ContextBlock]:
        return [
            ContextBlock("memory", description="Facts about the user", max_tokens=100),
            ContextBlock("rules", provider=Rules()),
        ]


class Rules:
    """A read-only block."""

    def get(self) -> str:
        return "Be brief."
