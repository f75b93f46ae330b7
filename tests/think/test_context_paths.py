"""Context blocks, skills and overflow recovery through the ways a user actually talks to an agent.

``test_context.py`` drives these behaviours through ``save_messages``; here the same behaviours go through a
WebSocket chat request (``cf_agent_use_chat_request`` with the client's transcript, as the stock hook sends it)
and through ``agent.chat(message, callback)``. The assertions are what a user relies on: the stored transcript,
the frames or chunks the caller sees, and the model requests (``ScriptedModel.requests``). Skills: an
``unload_context`` rewrites the earlier ``load_context`` result (so the skill text stops reaching the model), and
the loaded skills are rebuilt from the transcript after a restart.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from starlette.testclient import TestClient

from ponder import AgentHost, ContextBlock
from ponder.chat import MessageAccumulator
from ponder.server import App
from ponder.testing import ScriptedModel, error, tool_call
from ponder.think import Think, tool

from .conftest import Client, user
from .test_context import compacting
from .test_sessions import long_pairs, request_texts

OVERFLOW = (
    "This model's maximum context length is 128000 tokens. However, your messages resulted in 130512 tokens. "
    "(code: context_length_exceeded)"
)
PDF_BODY = "PDF-SKILL-BODY: extract the text with pdftotext -layout, then quote page numbers."
XLS_BODY = "XLS-SKILL-BODY: read every sheet with openpyxl and keep formulas."
MARKER = "[skill unloaded: pdf]"


# -- one user on one path -------------------------------------------------------------------------------


@dataclass
class Reply:
    """What the caller saw of one turn: its outcome, the stream's chunks, and any error it was told."""

    status: str
    chunks: list[dict[str, Any]] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    def message(self) -> dict[str, Any]:
        """The reply as a client assembles it from the chunks it received."""
        acc = MessageAccumulator()
        for chunk in self.chunks:
            acc.apply(chunk)
        return acc.snapshot()


class Conversation:
    """A user talking to ``agent`` over ``path``: ``"websocket"`` (a connected client sending
    ``cf_agent_use_chat_request`` with its transcript) or ``"chat"`` (``agent.chat(text, callback)``)."""

    def __init__(self, path: str, agent: Any, connect: Callable[..., Any]) -> None:
        self.path = path
        self.agent = agent
        self._connect = connect
        self.client: Client | None = None
        self._count = 0

    async def open(self) -> Conversation:
        if self.path == "websocket":
            self.client = await self._connect(self.agent)
        return self

    def transcript(self) -> list[dict[str, Any]]:
        """The conversation as this user's side knows it (a socket: the newest transcript frame)."""
        if self.client is None:
            return self.agent.messages
        return self.client.transport.of_type("cf_agent_chat_messages")[-1]["messages"]

    async def say(self, text: str, *, history: list[dict[str, Any]] | None = None) -> Reply:
        """Send ``text`` and wait for the turn. A socket sends ``history`` (default: its transcript) before it."""
        self._count += 1
        if self.client is None:
            return await self._chat(text)
        request_id, message = f"R{self._count}", user(text, f"user-{self._count}")
        known = self.transcript() if history is None else history
        await self.client.request(request_id, [*known, message])
        done = await self.client.wait_done(request_id)
        frames = self.client.transport.responses(request_id)
        return Reply(
            status=done["outcome"],
            chunks=[
                json.loads(f["body"]) for f in frames if not f["done"] and f["body"] and not f.get("error")
            ],
            errors=[f["body"] for f in frames if f.get("error")],
        )

    async def _chat(self, text: str) -> Reply:
        reply = Reply(status="")

        class Callback:
            def on_event(self, chunk: dict[str, Any]) -> None:
                reply.chunks.append(chunk)

            def on_error(self, error_text: str) -> None:
                reply.errors.append(error_text)

        result = await self.agent.chat(text, Callback())
        reply.status = result.status
        return reply


PATHS = ["websocket", "chat"]


@pytest.fixture(params=PATHS)
def path(request: pytest.FixtureRequest) -> str:
    return str(request.param)


async def talk(path: str, agent: Any, connect: Callable[..., Any]) -> Conversation:
    return await Conversation(path, agent, connect).open()


def carries(request: Any, text: str) -> bool:
    """Whether a model request sends ``text`` in any message (user text, assistant text, tool results)."""
    return any(text in t for t in request_texts(request))


def tool_parts(message: dict[str, Any], name: str) -> list[dict[str, Any]]:
    return [p for p in message["parts"] if p.get("type") == f"tool-{name}"]


async def started(url: str) -> AgentHost:
    host = AgentHost(url, shutdown_timeout=2.0)
    await host.start()
    return host


# -- memory: written by the model, shown after a rebuild --------------------------------------------------


def memory_agent(model: ScriptedModel) -> type[Think]:
    class Memo(Think):
        def get_model(self) -> Any:
            return model

        def get_system_prompt(self) -> str:
            return "You are Memo."

        def configure_context(self) -> list[ContextBlock]:
            return [ContextBlock("memory", description="Learned facts", max_tokens=200)]

    return Memo


async def test_a_memory_write_reaches_the_prompt_only_after_a_rebuild(
    host: Any, connect: Any, path: str
) -> None:
    fact = "The user likes green tea."
    model = ScriptedModel(
        [tool_call("set_context", {"label": "memory", "content": fact}, id="w1"), "Noted.", "Hi.", "Tea!"]
    )
    agent = await host.get_agent(memory_agent(model), f"memo-{path}")
    talker = await talk(path, agent, connect)

    first = await talker.say("remember: I like green tea")
    assert (first.status, first.errors) == ("completed", [])
    written = [
        c for c in first.chunks if c.get("type") == "tool-output-available" and c["toolCallId"] == "w1"
    ]
    assert len(written) == 1 and written[0]["output"].startswith("Written to memory. Usage: ")
    (stored,) = tool_parts(agent.messages[-1], "set_context")
    assert stored["state"] == "output-available" and stored["output"] == written[0]["output"]
    frozen = model.requests[0].system
    assert (
        frozen.startswith("You are Memo.\n\n") and "MEMORY (Learned facts)" in frozen and fact not in frozen
    )
    assert model.requests[1].system == frozen  # the step after the write: the same bytes

    second = await talker.say("hi")
    assert second.status == "completed"
    assert model.requests[2].system == frozen  # a later turn: still the same bytes
    assert (await agent.context.snapshot())[0]["content"] == fact

    rebuilt = await agent.refresh_system_prompt()
    assert fact in rebuilt
    third = await talker.say("what do I like?")
    assert third.status == "completed"
    assert model.requests[3].system == rebuilt
    assert [m["role"] for m in agent.messages] == ["user", "assistant"] * 3
    assert talker.transcript() == agent.messages
    if talker.client is not None:  # the Memory panel got the write as it happened
        blocks = talker.client.transport.of_type("ponder_context_blocks")
        assert [f["blocks"][0]["content"] for f in blocks] == ["", fact]


# -- context-window overflow --------------------------------------------------------------------------------


async def test_reactive_overflow_compacts_once_and_the_caller_sees_one_good_reply(
    host: Any, connect: Any, path: str
) -> None:
    model = ScriptedModel([error(OVERFLOW, status_code=400), "Answered after compaction."])
    agent = await host.get_agent(compacting(model, context_overflow={"reactive": True}), f"r-{path}")
    await agent.add_messages(long_pairs(6), broadcast=False)
    talker = await talk(path, agent, connect)

    answer = await talker.say("and now?")
    assert (answer.status, answer.errors) == ("completed", [])
    assert [c["type"] for c in answer.chunks].count("finish") == 1
    assert answer.message()["parts"] == [
        {"type": "step-start"},
        {"type": "text", "text": "Answered after compaction.", "state": "done"},
    ]
    assert len(model.requests) == 2
    assert not carries(model.requests[0], "SUMMARY") and carries(model.requests[1], "SUMMARY")
    assert len(agent.session.compactions) == 1
    stored = agent.messages[-1]
    assert stored["parts"] == answer.message()["parts"]  # the failed attempt left nothing behind
    assert stored["id"] == answer.chunks[0]["messageId"]
    assert talker.transcript() == agent.messages


async def test_reactive_overflow_that_persists_is_one_error_the_caller_is_told(
    host: Any, connect: Any, path: str
) -> None:
    model = ScriptedModel([error(OVERFLOW, status_code=400)] * 2)
    policy = {"reactive": True, "max_retries": 1}
    agent = await host.get_agent(compacting(model, context_overflow=policy), f"r2-{path}")
    await agent.add_messages(long_pairs(6), broadcast=False)
    talker = await talk(path, agent, connect)
    answer = await talker.say("and now?")
    assert answer.status == "error"
    assert len(answer.errors) == 1 and "context_length_exceeded" in answer.errors[0]
    assert len(model.requests) == 2  # one compaction, one retry, then it gives up
    assert len(agent.session.compactions) == 1


@tool
def noop() -> str:
    """Do nothing."""
    return "ok"


async def test_proactive_compaction_fires_at_the_threshold_at_most_max_compactions_times(
    host: Any, connect: Any, path: str
) -> None:
    calls: list[int] = []
    model = ScriptedModel([tool_call("noop", {}) for _ in range(4)] + ["done"])
    policy = {"proactive": {"max_input_tokens": 100, "headroom": 0.5, "max_compactions": 2}}
    cls = compacting(model, calls, context_overflow=policy, get_tools=lambda self: [noop])
    agent = await host.get_agent(cls, f"p-{path}")
    await agent.add_messages(long_pairs(6), broadcast=False)
    talker = await talk(path, agent, connect)

    answer = await talker.say("go")
    assert (answer.status, answer.errors) == ("completed", [])
    assert len(model.requests) == 5
    # Step 0 has no measurement yet; steps 1 and 2 are over 100 × 0.5 and compact; then the budget is spent.
    assert len(calls) == 2
    assert len(agent.session.compactions) == 1  # the second pass found nothing new to compact
    assert [carries(r, "SUMMARY") for r in model.requests] == [False, True, True, True, True]
    assert [c["type"] for c in answer.chunks].count("finish-step") == 5
    assert [p["output"] for p in tool_parts(agent.messages[-1], "noop")] == ["ok"] * 4
    assert talker.transcript() == agent.messages


async def test_proactive_compaction_stays_quiet_below_the_threshold(
    host: Any, connect: Any, path: str
) -> None:
    calls: list[int] = []
    model = ScriptedModel([tool_call("noop", {}), "done", "again"])
    policy = {"proactive": {"max_input_tokens": 1_000_000}}
    cls = compacting(model, calls, context_overflow=policy, get_tools=lambda self: [noop])
    agent = await host.get_agent(cls, f"q-{path}")
    await agent.add_messages(long_pairs(6), broadcast=False)
    talker = await talk(path, agent, connect)
    assert (await talker.say("one")).status == "completed"
    assert (await talker.say("two")).status == "completed"
    assert calls == [] and agent.session.compactions == []


# -- the real ASGI app: one socket, the stock client's request ----------------------------------------------


def test_reactive_overflow_over_a_real_socket_is_one_successful_reply(tmp_path: Path) -> None:
    model = ScriptedModel([error(OVERFLOW, status_code=400), "Answered after compaction."])
    cls = compacting(model, context_overflow={"reactive": True})
    cls.__name__ = cls.__qualname__ = "OverflowChat"
    app = App(agents=[cls], store=f"sqlite:///{tmp_path / 'app.sqlite3'}")
    with TestClient(app) as http, http.websocket_connect("/agents/overflow-chat/room?_pk=p1") as ws:
        while json.loads(ws.receive_text())["type"] != "cf_agent_chat_messages":
            pass
        # The stock hook sends its whole transcript: here a long one the server has not seen yet.
        body = {
            "id": "chat-1",
            "messages": [*long_pairs(6), user("and now?", "u-last")],
            "trigger": "submit-message",
        }
        ws.send_text(
            json.dumps(
                {
                    "type": "cf_agent_use_chat_request",
                    "id": "R1",
                    "init": {"method": "POST", "body": json.dumps(body)},
                }
            )
        )
        frames: list[dict[str, Any]] = []
        while not frames or not (frames[-1]["type"] == "cf_agent_use_chat_response" and frames[-1]["done"]):
            frames.append(json.loads(ws.receive_text()))
        stored = http.get("/agents/overflow-chat/room/get-messages").json()
    responses = [f for f in frames if f["type"] == "cf_agent_use_chat_response"]
    assert [f for f in responses if f.get("error")] == []
    assert responses[-1]["outcome"] == "completed"
    chunks = [json.loads(f["body"]) for f in responses if not f["done"]]
    seen = Reply("completed", chunks).message()
    assert seen["parts"] == [
        {"type": "step-start"},
        {"type": "text", "text": "Answered after compaction.", "state": "done"},
    ]
    assert len(model.requests) == 2 and carries(model.requests[1], "SUMMARY")
    assert [m["id"] for m in stored][-2] == "u-last"
    assert stored[-1]["id"] == seen["id"] and stored[-1]["parts"] == seen["parts"]
    transcript = [f for f in frames if f["type"] == "cf_agent_chat_messages"][-1]["messages"]
    assert transcript == stored


# -- skills: unload rewrites the load_context result; the loaded set survives a restart ---------------------


class Skills:
    """A skill-like provider: a listing in the prompt, each skill's text loaded on demand."""

    bodies = {"pdf": PDF_BODY, "xls": XLS_BODY}

    def get(self) -> str:
        return "- pdf: read PDF files\n- xls: read spreadsheets"

    def load(self, key: str) -> str | None:
        return self.bodies.get(key)


def skilled_agent(model: ScriptedModel, name: str = "Skilled") -> type[Think]:
    class Skilled(Think):
        def get_model(self) -> Any:
            return type(self).model

        def configure_context(self) -> list[ContextBlock]:
            return [ContextBlock("skills", description="Loadable skills", provider=Skills())]

    Skilled.model = model  # type: ignore[attr-defined]
    Skilled.__name__ = Skilled.__qualname__ = name
    return Skilled


def load(key: str, call_id: str) -> Any:
    return tool_call("load_context", {"label": "skills", "key": key}, id=call_id)


def unload(key: str, call_id: str) -> Any:
    return tool_call("unload_context", {"label": "skills", "key": key}, id=call_id)


async def test_unloading_a_skill_rewrites_its_stored_result_and_the_model_stops_getting_it(
    host: Any, connect: Any, path: str
) -> None:
    model = ScriptedModel([load("pdf", "l1"), "Loaded.", unload("pdf", "u1"), "Unloaded.", "You're welcome."])
    agent = await host.get_agent(skilled_agent(model), f"s-{path}")
    talker = await talk(path, agent, connect)

    assert (await talker.say("read my pdf")).status == "completed"
    assert carries(model.requests[1], PDF_BODY)
    loaded_in = agent.messages[-1]
    assert tool_parts(loaded_in, "load_context")[0]["output"] == PDF_BODY
    assert agent.context.loaded_skills("skills") == ["pdf"]

    done = await talker.say("done with the pdf")
    assert (done.status, done.errors) == ("completed", [])
    assert carries(model.requests[2], PDF_BODY)  # the unload's own request still had it
    assert not carries(model.requests[3], PDF_BODY) and carries(model.requests[3], MARKER)
    outputs = [c for c in done.chunks if c.get("type") == "tool-output-available" and c["toolCallId"] == "u1"]
    assert [c["output"] for c in outputs] == [MARKER]
    assert agent.context.loaded_skills("skills") == []

    # The earlier message is rewritten in place: same id, same position, only the result changed.
    rewritten = agent.messages[1]
    assert rewritten["id"] == loaded_in["id"]
    expected = json.loads(json.dumps(loaded_in))
    tool_parts(expected, "load_context")[0]["output"] = MARKER
    assert rewritten == expected
    assert await agent.session.get_message(loaded_in["id"]) == expected
    if talker.client is not None:
        updates = talker.client.transport.of_type("cf_agent_message_updated")
        assert [u["message"] for u in updates] == [expected]

    # A client that still holds the old copy (it missed the update) does not bring the skill text back.
    stale = [loaded_in if m["id"] == loaded_in["id"] else m for m in talker.transcript()]
    assert (await talker.say("thanks", history=stale)).status == "completed"
    assert not any(carries(r, PDF_BODY) for r in model.requests[3:])
    assert not any(PDF_BODY in json.dumps(m) for m in agent.messages)
    assert talker.transcript() == agent.messages


async def test_load_then_unload_in_one_turn_leaves_no_skill_text(host: Any, connect: Any, path: str) -> None:
    model = ScriptedModel([load("pdf", "l1"), unload("pdf", "u1"), "All done."])
    agent = await host.get_agent(skilled_agent(model), f"one-{path}")
    talker = await talk(path, agent, connect)
    assert (await talker.say("peek at the pdf skill")).status == "completed"
    assert carries(model.requests[1], PDF_BODY)
    assert not carries(model.requests[2], PDF_BODY) and carries(model.requests[2], MARKER)
    stored = agent.messages[-1]
    assert [p["output"] for p in tool_parts(stored, "load_context")] == [MARKER]
    assert [p["output"] for p in tool_parts(stored, "unload_context")] == [MARKER]
    assert talker.transcript() == agent.messages


async def test_unloading_a_skill_that_is_not_loaded_is_a_tool_error(
    host: Any, connect: Any, path: str
) -> None:
    model = ScriptedModel([unload("pdf", "u1"), "Nothing to unload."])
    agent = await host.get_agent(skilled_agent(model), f"none-{path}")
    talker = await talk(path, agent, connect)
    assert (await talker.say("unload pdf")).status == "completed"
    (part,) = tool_parts(agent.messages[-1], "unload_context")
    assert part["state"] == "output-error" and '"pdf" is not loaded in skills' in part["errorText"]


async def test_loaded_skills_are_rebuilt_from_the_transcript_after_a_restart(
    tmp_path: Path, connect: Any, path: str
) -> None:
    url = f"sqlite:///{tmp_path / 'skills.sqlite3'}"
    cls = skilled_agent(ScriptedModel([[load("pdf", "l1"), load("xls", "l2")], "Both loaded."]))
    host = await started(url)
    try:
        agent = await host.get_agent(cls, "s")
        assert (await (await talk(path, agent, connect)).say("load both")).status == "completed"
        assert agent.context.loaded_skills("skills") == ["pdf", "xls"]
    finally:
        await host.close()

    model = ScriptedModel([unload("pdf", "u1"), "PDF unloaded."])
    cls.model = model  # type: ignore[attr-defined]
    host = await started(url)  # a cold wake: a new host on the same store
    try:
        agent = await host.get_agent(cls, "s")
        assert agent.context.loaded_skills("skills") == ["pdf", "xls"]
        answer = await (await talk(path, agent, connect)).say("drop the pdf skill")
        assert (answer.status, answer.errors) == ("completed", [])
        (part,) = tool_parts(agent.messages[-1], "unload_context")
        assert (part["state"], part["output"]) == ("output-available", MARKER)
        assert carries(model.requests[0], PDF_BODY)
        assert not carries(model.requests[1], PDF_BODY) and carries(model.requests[1], XLS_BODY)
        assert agent.context.loaded_skills("skills") == ["xls"]
    finally:
        await host.close()

    host = await started(url)
    try:
        agent = await host.get_agent(cls, "s")
        assert agent.context.loaded_skills("skills") == ["xls"]
        outputs = [p["output"] for m in agent.messages for p in tool_parts(m, "load_context")]
        assert outputs == [MARKER, XLS_BODY]
        await agent.clear_messages()
        assert agent.context.loaded_skills("skills") == []
    finally:
        await host.close()


async def test_switching_branches_switches_the_loaded_skills(host: Any, connect: Any) -> None:
    """A regenerated answer that loaded no skill is a branch without it: switching between the two answers
    switches which skills count as loaded (and so what ``unload_context`` accepts)."""
    model = ScriptedModel([load("pdf", "l1"), "Loaded.", "Nothing loaded this time."])
    agent = await host.get_agent(skilled_agent(model), "branches")
    client = await connect(agent)
    question = {"id": "u1", "role": "user", "parts": [{"type": "text", "text": "read my pdf"}]}
    await client.request("r1", [question])
    assert (await client.wait_done("r1"))["outcome"] == "completed"
    user_id = "u1"
    first_answer = agent.messages[-1]["id"]
    assert agent.context.loaded_skills("skills") == ["pdf"]
    await client.request("r2", [question], trigger="regenerate-message", messageId=first_answer)
    assert (await client.wait_done("r2"))["outcome"] == "completed"
    second_answer = agent.messages[-1]["id"]
    assert [m["id"] for m in await agent.get_branches(user_id)] == [first_answer, second_answer]
    assert agent.context.loaded_skills("skills") == []
    await agent.set_active_branch(first_answer)
    assert agent.context.loaded_skills("skills") == ["pdf"]
    await agent.set_active_branch(second_answer)
    assert agent.context.loaded_skills("skills") == []
