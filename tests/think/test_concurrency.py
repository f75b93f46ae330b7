"""``message_concurrency``: what a chat submit does while another turn is queued or running."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from ponder.models import Finish, TextDelta, UserMessage
from ponder.think import ChatResult, Think, TurnContext

from .conftest import user


class Gated:
    """Answers ``re: <last user text>``; while ``hold()`` is in force every call waits for ``release()``."""

    name = "gated"

    def __init__(self) -> None:
        self.requests: list[Any] = []
        self._open = asyncio.Event()
        self._open.set()

    def hold(self) -> None:
        self._open = asyncio.Event()

    def release(self) -> None:
        self._open.set()

    async def stream(self, request: Any) -> Any:
        self.requests.append(request)
        await self._open.wait()
        yield TextDelta(f"re: {request.last_user_text()}")
        yield Finish("stop")


class Chat(Think):
    model: Any = None

    def get_model(self) -> Any:
        return type(self).model

    async def before_turn(self, ctx: TurnContext) -> None:
        self.__dict__.setdefault("started", []).append((ctx.request_id, asyncio.get_running_loop().time()))

    async def on_chat_response(self, result: ChatResult) -> None:
        self.__dict__.setdefault("responses", []).append((result.request_id, result.status))


def chat_class(mode: str, model: Gated, **extra: Any) -> type[Chat]:
    return type(f"Chat{mode.title()}", (Chat,), {"model": model, "message_concurrency": mode, **extra})


def user_texts(request: Any) -> list[str]:
    return [m.text for m in request.messages if isinstance(m, UserMessage)]


async def start_blocked_turn(agent: Any, client: Any, model: Gated) -> None:
    """R1 (``u1``) is running and waits inside the model call."""
    model.hold()
    await client.request("R1", [user("one", "u1")])
    await client.transport.wait_for(lambda f: f.get("id") == "R1" and '"start-step"' in f.get("body", ""))


async def test_queue_runs_every_submit_in_order(host: Any, connect: Any) -> None:
    model = Gated()
    agent = await host.get_agent(chat_class("queue", model), "r")
    client = await connect(agent)
    await start_blocked_turn(agent, client, model)
    await client.request("R2", [user("one", "u1"), user("two", "u2")])
    await client.request("R3", [user("one", "u1"), user("two", "u2"), user("three", "u3")])
    model.release()
    outcomes = [(await client.wait_done(r))["outcome"] for r in ("R1", "R2", "R3")]
    assert outcomes == ["completed"] * 3
    assert [r for r, _ in agent.started] == ["R1", "R2", "R3"]
    assert [m["role"] for m in agent.messages] == ["user", "user", "user"] + ["assistant"] * 3


async def test_drop_refuses_an_overlapping_submit_and_rolls_the_client_back(host: Any, connect: Any) -> None:
    model = Gated()
    agent = await host.get_agent(chat_class("drop", model), "r")
    client = await connect(agent)
    other = await connect(agent)
    await start_blocked_turn(agent, client, model)
    before = len(client.transport.frames)
    await client.request("R2", [user("one", "u1"), user("two", "u2")])
    done = await client.wait_done("R2")
    assert done == {
        "type": "cf_agent_use_chat_response",
        "id": "R2",
        "body": "",
        "done": True,
        "outcome": "skipped",
    }
    rollback = client.transport.frames[before]
    assert rollback["type"] == "cf_agent_chat_messages"
    assert [m["id"] for m in rollback["messages"]] == ["u1"]  # the dropped message was never stored
    assert "u2" not in {m["id"] for m in agent.messages}
    assert not other.transport.responses("R2")  # only the sender hears about its dropped request

    model.release()
    assert (await client.wait_done("R1"))["outcome"] == "completed"
    await agent.wait_until_idle()
    assert agent.responses == [("R1", "completed")]  # on_chat_response only for turns that ran
    # nothing overlapping any more: the next submit runs
    await client.request("R3", [*agent.messages, user("three", "u3")])
    assert (await client.wait_done("R3"))["outcome"] == "completed"
    assert [m["id"] for m in agent.messages if m["role"] == "user"] == ["u1", "u3"]


@pytest.mark.parametrize("mode", ["latest", "merge"])
async def test_latest_and_merge_run_only_the_newest_queued_submit(host: Any, connect: Any, mode: str) -> None:
    model = Gated()
    agent = await host.get_agent(chat_class(mode, model), "r")
    client = await connect(agent)
    await start_blocked_turn(agent, client, model)
    await client.request("R2", [user("one", "u1"), user("two", "u2")])
    await client.request("R3", [user("one", "u1"), user("two", "u2"), user("three", "u3")])
    model.release()
    assert (await client.wait_done("R1"))["outcome"] == "completed"
    skipped = await client.wait_done("R2")
    assert skipped["outcome"] == "skipped" and skipped["messageIds"] == ["u1", "u2"]
    assert (await client.wait_done("R3"))["outcome"] == "completed"
    await agent.wait_until_idle()
    # every user message was kept; the one surviving turn saw them all
    assert [m["id"] for m in agent.messages if m["role"] == "user"] == ["u1", "u2", "u3"]
    assert len(model.requests) == 2
    assert {"two", "three"} <= set(user_texts(model.requests[1]))
    assert agent.responses == [("R1", "completed"), ("R3", "completed")]
    assert not client.transport.responses("R2")[:-1]  # a skipped request streams nothing


async def test_debounce_waits_for_a_quiet_window(host: Any, connect: Any) -> None:
    model = Gated()
    agent = await host.get_agent(chat_class("debounce", model, message_debounce=0.15), "r")
    client = await connect(agent)
    loop = asyncio.get_running_loop()
    await client.request("R1", [user("one", "u1")])
    sent_last = loop.time()
    await client.request("R2", [user("one", "u1"), user("two", "u2")])
    assert (await client.wait_done("R1"))["outcome"] == "skipped"
    assert (await client.wait_done("R2"))["outcome"] == "completed"
    assert len(model.requests) == 1 and user_texts(model.requests[0]) == ["one", "two"]
    ((request_id, started_at),) = agent.started
    assert request_id == "R2" and started_at - sent_last >= 0.15 - 0.01
    # a lone submit still runs, after its own window
    await client.request("R3", [*agent.messages, user("three", "u3")])
    assert (await client.wait_done("R3"))["outcome"] == "completed"
    assert agent.responses == [("R2", "completed"), ("R3", "completed")]


@pytest.mark.parametrize("mode", ["drop", "latest", "debounce"])
async def test_regenerate_is_exempt(host: Any, connect: Any, mode: str) -> None:
    model = Gated()
    agent = await host.get_agent(chat_class(mode, model, message_debounce=0.05), "r")
    client = await connect(agent)
    await client.request("R0", [user("zero", "u0")])
    await client.wait_done("R0")
    first_answer = agent.messages[-1]["id"]
    # a regeneration while a turn runs is queued, never dropped or superseded
    await start_blocked_turn(agent, client, model)
    await client.request("R2", [user("zero", "u0")], trigger="regenerate-message")
    model.release()
    assert (await client.wait_done("R1"))["outcome"] in ("completed", "skipped")
    assert (await client.wait_done("R2"))["outcome"] == "completed"
    assert len(await agent.get_branches("u0")) == 2
    assert (await agent.get_branches("u0"))[0]["id"] == first_answer


async def test_clear_resets_overlap(host: Any, connect: Any) -> None:
    model = Gated()
    agent = await host.get_agent(chat_class("drop", model), "r")
    client = await connect(agent)
    await start_blocked_turn(agent, client, model)
    await client.send({"type": "cf_agent_chat_clear"})
    model.release()
    # the turn before the clear may still be winding down; a submit after the clear is not "overlapping"
    await client.request("R2", [user("fresh", "u9")])
    assert (await client.wait_done("R2"))["outcome"] == "completed"
    assert [m["id"] for m in agent.messages][:1] == ["u9"]
    assert (await client.wait_done("R1"))["outcome"] == "aborted"


def test_unknown_mode_is_rejected_at_class_creation() -> None:
    with pytest.raises(ValueError, match="message_concurrency must be one of"):
        type("Bad", (Think,), {"message_concurrency": "random"})
