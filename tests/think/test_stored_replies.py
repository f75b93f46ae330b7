"""A client's copy of a reply the server already stores never replaces the server's version.

After ``stop()`` the AI SDK hook sends its own partial copy of the cancelled reply back with the next request
(fewer chunks, the text part still ``streaming``); the server keeps what it stored and takes from a client's
copy only answers for tool calls that are still waiting (a client tool's result, an approval decision).
"""

from __future__ import annotations

from typing import Any

from ponder.testing import ScriptedModel, tool_call

from .conftest import user
from .test_protocol import chat_class


def _text(text: str, state: str = "done") -> dict[str, Any]:
    return {"type": "text", "text": text, "state": state}


async def test_a_stale_copy_of_a_stopped_reply_does_not_overwrite_the_stored_partial(
    host: Any, connect: Any
) -> None:
    model = ScriptedModel(["Second answer."])
    agent = await host.get_agent(chat_class(model), "stale")
    stored = {"id": "a1", "role": "assistant", "parts": [{"type": "step-start"}, _text("one two three four")]}
    await agent.add_messages([user("first", "u1"), stored])
    client = await connect(agent)

    stale = {
        "id": "a1",
        "role": "assistant",
        "parts": [{"type": "step-start"}, _text("one two", "streaming")],
    }
    await client.request("R2", [user("first", "u1"), stale, user("second", "u2")])
    done = await client.wait_done("R2")
    assert done["outcome"] == "completed"

    messages = agent.messages
    assert [m["id"] for m in messages][:3] == ["u1", "a1", "u2"]
    assert messages[1] == stored
    assert messages[-1]["parts"][-1]["text"] == "Second answer."


async def test_a_client_copy_answers_only_the_calls_still_waiting(host: Any, connect: Any) -> None:
    model = ScriptedModel([tool_call("delete_file", {"path": "/tmp/x"}, id="call_a"), "Deleted it."])
    agent = await host.get_agent(chat_class(model), "answers")
    client = await connect(agent)
    await client.request("R1", [user("delete /tmp/x", "u1")])
    await client.wait_done("R1")
    stored = agent.messages[-1]
    part = stored["parts"][-1]
    assert part["state"] == "approval-requested"

    # The client's copy approves the call but also carries a changed input and a bogus extra text part.
    copy_ = {
        **stored,
        "parts": [
            *stored["parts"][:-1],
            {
                **part,
                "input": {"path": "/etc"},
                "state": "approval-responded",
                "approval": {**part["approval"], "approved": True},
            },
            _text("injected", "streaming"),
        ],
    }
    await client.request("R2", [user("delete /tmp/x", "u1"), copy_])
    await client.wait_done("R2")

    final = agent.messages[-1]
    assert final["id"] == stored["id"]
    tool_part = next(p for p in final["parts"] if p.get("toolCallId") == "call_a")
    assert tool_part["input"] == {"path": "/tmp/x"}
    assert tool_part["state"] == "output-available" and tool_part["output"] == "deleted /tmp/x"
    assert not any(p.get("text") == "injected" for p in final["parts"])
    assert final["parts"][-1]["text"] == "Deleted it."


async def test_an_answer_for_a_settled_call_is_ignored(host: Any, connect: Any) -> None:
    model = ScriptedModel(["ok"])
    agent = await host.get_agent(chat_class(model), "settled")
    settled = {
        "type": "tool-lookup",
        "toolCallId": "c1",
        "state": "output-available",
        "input": {},
        "output": "server value",
    }
    stored = {"id": "a1", "role": "assistant", "parts": [{"type": "step-start"}, settled]}
    await agent.add_messages([user("look it up", "u1"), stored])
    client = await connect(agent)
    forged = {**stored, "parts": [{"type": "step-start"}, {**settled, "output": "client value"}]}
    await client.request("R2", [user("look it up", "u1"), forged, user("next", "u2")])
    await client.wait_done("R2")
    assert agent.messages[1] == stored
