from __future__ import annotations

import asyncio
from typing import Any

import pytest

from ponder.models import ModelError, ToolMessage, UserMessage
from ponder.testing import ScriptedModel, error, reasoning, reply, tool_call
from ponder.think import (
    ChatResult,
    StepResult,
    Think,
    ToolCallContext,
    ToolCallDecision,
    ToolCallResult,
    TurnConfig,
    TurnContext,
    tool,
)


@tool
def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


@tool
def explode(reason: str) -> str:
    """Always fails."""
    raise RuntimeError(f"boom: {reason}")


@tool
async def count(n: int):
    """Count up, reporting progress."""
    for i in range(1, n + 1):
        yield {"at": i}


class Bot(Think):
    model: Any = None
    errors: list[Any]

    def get_model(self) -> Any:
        return type(self).model

    def get_tools(self) -> Any:
        return [add, explode, count]

    async def on_chat_error(self, error: BaseException, ctx: Any = None) -> Any:
        self.__dict__.setdefault("errors", []).append((error, ctx))
        return None


def bot(model: ScriptedModel) -> type[Bot]:
    return type("Bot", (Bot,), {"model": model})


def tool_parts(message: dict[str, Any]) -> list[dict[str, Any]]:
    return [p for p in message["parts"] if p["type"].startswith("tool-")]


def results_in(request: Any) -> list[Any]:
    return [r for m in request.messages if isinstance(m, ToolMessage) for r in m.results]


async def test_text_turn_is_persisted(host: Any) -> None:
    model = ScriptedModel(["Hello there!"])
    agent = await host.get_agent(bot(model), "a")
    result = await agent.save_messages("hi")
    assert result.status == "completed"
    assert [m["role"] for m in agent.messages] == ["user", "assistant"]
    assert agent.messages[1] == result.message
    assert result.message["parts"] == [
        {"type": "step-start"},
        {"type": "text", "text": "Hello there!", "state": "done"},
    ]
    assert model.requests[0].system == "You are a helpful assistant."
    # the transcript survives a fresh instance
    host.evict_idle() if hasattr(host, "evict_idle") else None
    rows = await host.store.fetch_all(
        "SELECT id FROM ponder_session_messages WHERE agent_id = ?", (agent.id,)
    )
    assert len(rows) == 2


async def test_tool_call_and_output(host: Any) -> None:
    model = ScriptedModel([tool_call("add", {"a": 2, "b": 3}), "It is 5."])
    agent = await host.get_agent(bot(model), "a")
    result = await agent.save_messages("2+3?")
    (part,) = tool_parts(result.message)
    assert part["state"] == "output-available" and part["output"] == 5
    assert [r.output for r in results_in(model.requests[1])] == [5]
    assert result.message["parts"][-1]["text"] == "It is 5."


@pytest.mark.parametrize(
    ("call", "expected"),
    [
        (tool_call("add", '{"a": '), "not a JSON object"),
        (
            tool_call("add", {"a": "x", "b": 1}),
            "Invalid input for tool add: a: Input should be a valid integer",
        ),
        (
            tool_call("nope", {}),
            "Model tried to call unavailable tool 'nope'. Available tools: add, count, explode, search_history.",
        ),
        (tool_call("explode", {"reason": "bad"}), "boom: bad"),
    ],
)
async def test_tool_errors_reach_the_model(host: Any, call: Any, expected: str) -> None:
    model = ScriptedModel([call, "Sorry."])
    agent = await host.get_agent(bot(model), "a")
    result = await agent.save_messages("go")
    assert result.status == "completed"
    (part,) = tool_parts(result.message)
    assert part["state"] == "output-error"
    assert expected in part["errorText"]
    (seen,) = results_in(model.requests[1])
    assert seen.is_error and expected in seen.error


async def test_generator_tool_streams_preliminary_outputs(host: Any) -> None:
    model = ScriptedModel([tool_call("count", {"n": 3}), "Done."])
    agent = await host.get_agent(bot(model), "a")
    chunks: list[dict[str, Any]] = []
    result = await agent.chat("count", chunks.append)
    outputs = [c for c in chunks if c["type"] == "tool-output-available"]
    assert [c.get("preliminary") for c in outputs] == [True, True, True, None]
    assert tool_parts(result.message)[0]["output"] == {"at": 3}
    assert "preliminary" not in tool_parts(result.message)[0]


async def test_model_error_reports_and_next_turn_works(host: Any) -> None:
    model = ScriptedModel([reply("partial answer", error("provider down")), "Recovered."])
    agent = await host.get_agent(bot(model), "a")
    result = await agent.save_messages("first")
    assert result.status == "error" and result.error == "provider down"
    assert isinstance(agent.errors[0][0], ModelError)
    assert agent.errors[0][1].stage == "stream"
    # the partial reply was persisted, closed
    assert result.message["parts"][-1] == {"type": "text", "text": "partial answer", "state": "done"}
    second = await agent.save_messages("again")
    assert second.status == "completed"
    assert [m["role"] for m in agent.messages] == ["user", "assistant", "user", "assistant"]


async def test_max_steps_stops_the_loop(host: Any) -> None:
    model = ScriptedModel(default=tool_call("add", {"a": 1, "b": 1}))
    cls = bot(model)
    cls.max_steps = 3
    agent = await host.get_agent(cls, "a")
    result = await agent.save_messages("loop")
    assert model.calls == 3
    assert len(tool_parts(result.message)) == 3
    assert result.status == "completed"


async def test_reasoning_can_be_hidden(host: Any) -> None:
    model = ScriptedModel([reply(reasoning("let me think"), "Answer."), reply(reasoning("hmm"), "Two.")])
    agent = await host.get_agent(bot(model), "a")
    shown = await agent.save_messages("q")
    assert [p["type"] for p in shown.message["parts"]] == ["step-start", "reasoning", "text"]
    type(agent).send_reasoning = False
    hidden = await agent.save_messages("q2")
    assert [p["type"] for p in hidden.message["parts"]] == ["step-start", "text"]


async def test_hooks_fire_and_change_the_turn(host: Any) -> None:
    main = ScriptedModel([tool_call("add", {"a": 1, "b": 2}), tool_call("explode", {"reason": "x"}), "ok"])
    other = ScriptedModel(["from the other model"])
    calls: list[str] = []

    class Hooked(Bot):
        model = main

        async def before_turn(self, ctx: TurnContext) -> TurnConfig | None:
            calls.append("before_turn")
            if ctx.body.get("use_other"):
                return TurnConfig(model=other, system="Be brief.", tool_choice="none")
            return TurnConfig(system="Custom system.", tool_choice="required")

        async def before_tool_call(self, ctx: ToolCallContext) -> ToolCallDecision | None:
            calls.append(f"before:{ctx.tool_name}")
            if ctx.tool_name == "add":
                return ToolCallDecision.substitute(42)
            return ToolCallDecision.block("not allowed here")

        async def after_tool_call(self, result: ToolCallResult) -> None:
            calls.append(f"after:{result.tool_name}:{result.success}")

        async def on_step_finish(self, step: StepResult) -> None:
            calls.append(f"step:{step.step}:{step.finish_reason}")

        async def on_chat_response(self, result: ChatResult) -> None:
            calls.append(f"response:{result.status}")

    agent = await host.get_agent(Hooked, "h")
    result = await agent.save_messages("go")
    parts = tool_parts(result.message)
    assert parts[0]["output"] == 42
    assert parts[1]["state"] == "output-available" and parts[1]["output"] == "not allowed here"
    assert main.requests[0].system == "Custom system."
    assert main.requests[0].settings.tool_choice == "required"
    assert calls == [
        "before_turn",
        "before:add",
        "after:add:True",
        "step:0:tool-calls",
        "before:explode",
        "after:explode:True",
        "step:1:tool-calls",
        "step:2:stop",
        "response:completed",
    ]
    # before_turn can swap the model per turn (here driven by the turn's body)
    from ponder.think._turn import TurnSpec

    spec = TurnSpec(request_id="r-other", parent_id=agent.session.active_leaf_id, body={"use_other": True})
    other_result = await agent._enqueue(spec)
    assert other_result.message["parts"][-1]["text"] == "from the other model"
    assert other.requests[0].system == "Be brief." and other.requests[0].settings.tool_choice == "none"


async def test_allow_with_new_input(host: Any) -> None:
    model = ScriptedModel([tool_call("add", {"a": 1, "b": 2}), "ok"])

    class Rewrite(Bot):
        async def before_tool_call(self, ctx: ToolCallContext) -> ToolCallDecision | None:
            return ToolCallDecision.allow(input={"a": 10, "b": 20})

    cls = type("Rewrite", (Rewrite,), {"model": model})
    agent = await host.get_agent(cls, "r")
    result = await agent.save_messages("go")
    assert tool_parts(result.message)[0]["output"] == 30


async def test_chat_callback_object_and_add_messages(host: Any) -> None:
    model = ScriptedModel(["one", "two"])
    agent = await host.get_agent(bot(model), "a")

    class Callback:
        def __init__(self) -> None:
            self.events: list[dict[str, Any]] = []
            self.done: ChatResult | None = None

        def on_event(self, chunk: dict[str, Any]) -> None:
            self.events.append(chunk)

        def on_done(self, result: ChatResult) -> None:
            self.done = result

    cb = Callback()
    result = await agent.chat("hello", cb)
    assert cb.done is result
    assert cb.events[0] == {"type": "start", "messageId": result.message["id"]}
    assert cb.events[-1] == {"type": "finish", "finishReason": "stop"}

    note = {"id": "note1", "role": "user", "parts": [{"type": "text", "text": "remember this"}]}
    await agent.add_messages([note])
    await agent.add_messages([note])  # idempotent
    assert [m["id"] for m in agent.messages][-1] == "note1"
    assert len(agent.messages) == 3
    await agent.save_messages(lambda current: [*current[-1:], {**note, "id": "q2"}])
    last_request = model.requests[-1]
    texts = [m.text for m in last_request.messages if isinstance(m, UserMessage)]
    assert texts == ["hello", "remember this", "remember this"]
    agent.messages[0]["parts"].clear()  # a copy
    assert agent.messages[0]["parts"]


async def test_turns_run_one_at_a_time_in_order(host: Any) -> None:
    model = ScriptedModel(default=lambda request: f"re: {request.last_user_text()}", chunk_delay=0.001)
    state = {"active": 0, "max": 0, "order": []}

    class Serial(Bot):
        async def before_turn(self, ctx: TurnContext) -> None:
            state["active"] += 1
            state["max"] = max(state["max"], state["active"])

        async def on_step_finish(self, step: StepResult) -> None:
            state["active"] -= 1
            state["order"].append(step.text)

    agent = await host.get_agent(type("Serial", (Serial,), {"model": model}), "a")
    first = asyncio.create_task(agent.save_messages("m0"))
    await asyncio.sleep(0)  # let the first turn be admitted before the others
    rest = [asyncio.create_task(agent.save_messages(f"m{i}")) for i in (1, 2)]
    results = await asyncio.gather(first, *rest)
    assert [r.status for r in results] == ["completed"] * 3
    assert state["max"] == 1
    assert state["order"][0] == "re: m0"
    # one linear transcript: every reply follows the newest message, no accidental branches
    roles = [m["role"] for m in agent.messages]
    assert roles.count("assistant") == 3 and len(roles) == 6
    assert roles[-1] == "assistant"


async def test_nested_blocking_turn_is_refused(host: Any) -> None:
    seen: list[str] = []

    @tool
    async def recurse(ctx: Any) -> str:
        """Try to start a turn from inside a turn."""
        try:
            await ctx.agent.save_messages("inner")
        except RuntimeError as exc:
            seen.append(str(exc))
        await ctx.agent.add_messages("added from a tool", broadcast=False)
        return "ok"

    model = ScriptedModel([tool_call("recurse", {}), "done"])

    class Nest(Bot):
        def get_tools(self) -> Any:
            return [recurse]

    cls = type("Nest", (Nest,), {"model": model})
    agent = await host.get_agent(cls, "n")
    result = await agent.save_messages("go")
    assert result.status == "completed"
    assert seen and "inside an active turn" in seen[0]


async def test_clear_messages(host: Any) -> None:
    model = ScriptedModel(["a", "b"])
    agent = await host.get_agent(bot(model), "a")
    await agent.save_messages("x")
    await agent.clear_messages()
    assert agent.messages == []
    await agent.save_messages("y")
    assert len(agent.messages) == 2
