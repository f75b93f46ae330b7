"""``ponder.demo``: how ``ponder demo`` picks its model, the calculator, the clock, the memory block, the CLI.

No network and no model: the Ollama probe is a fake (or a tiny HTTP server on a free loopback port), and
turns run on ``ScriptedModel``. The real local model in a real browser is ``tests/e2e/test_demo.py``.
"""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from ponder import AgentHost
from ponder.cli import main
from ponder.demo import (
    ANTHROPIC_DEMO_MODEL,
    CALCULATE,
    CHAT_PROMPT,
    CURRENT_TIME,
    OPENAI_DEMO_MODEL,
    TOOLS_PROMPT,
    DemoAgent,
    calculate,
    choose_demo_model,
    current_time,
    demo_agent_class,
    demo_app,
    describe_model,
    model_calls_tools,
    probe_ollama,
)
from ponder.models import ToolMessage, ToolResult, UserMessage
from ponder.testing import ScriptedModel, tool_call
from ponder.think import StepConfig, StepContext
from ponder.tools import ToolInputError
from tests.support.server import free_port

# -- choosing the model --------------------------------------------------------------------------------


class Probe:
    """A fake Ollama probe that records whether it was called."""

    def __init__(self, result: list[str] | None) -> None:
        self.result = result
        self.calls = 0

    def __call__(self) -> list[str] | None:
        self.calls += 1
        return self.result


def test_the_flag_wins_over_everything() -> None:
    probe = Probe(["llama3.2:3b"])
    env = {"OPENAI_API_KEY": "sk-x", "ANTHROPIC_API_KEY": "sk-ant-x"}
    assert choose_demo_model("local:qwen2.5-coder-0.5b", env, probe) == (
        "local:qwen2.5-coder-0.5b",
        "--model was given",
    )
    assert probe.calls == 0


def test_api_keys_come_next_openai_first() -> None:
    probe = Probe(["llama3.2:3b"])
    both = {"OPENAI_API_KEY": "sk-x", "ANTHROPIC_API_KEY": "sk-ant-x"}
    assert choose_demo_model(None, both, probe) == (OPENAI_DEMO_MODEL, "OPENAI_API_KEY is set")
    model, reason = choose_demo_model("", {"OPENAI_API_KEY": "  ", "ANTHROPIC_API_KEY": "sk-ant-x"}, probe)
    assert model == ANTHROPIC_DEMO_MODEL and model.startswith("anthropic:")
    assert reason == "ANTHROPIC_API_KEY is set (and OPENAI_API_KEY is not)"
    assert OPENAI_DEMO_MODEL.startswith("openai:")
    assert probe.calls == 0  # no network look-up when a key decides


def test_then_ollama_first_chat_model() -> None:
    model, reason = choose_demo_model(None, {}, Probe(["nomic-embed-text:latest", "llama3.2:3b", "qwen3"]))
    assert model == "ollama:llama3.2:3b"
    assert "Ollama on localhost:11434 has 'llama3.2:3b'" in reason


def test_else_local_and_the_reason_says_why() -> None:
    assert choose_demo_model(None, {}, Probe(None)) == (
        "local",
        "no --model, no OPENAI_API_KEY or ANTHROPIC_API_KEY, and no Ollama server answers on localhost:11434",
    )
    model, reason = choose_demo_model(None, {}, Probe([]))
    assert model == "local" and reason.endswith("Ollama on localhost:11434 has no chat model")
    model, _ = choose_demo_model(None, {}, Probe(["nomic-embed-text"]))
    assert model == "local"


class _Tags(BaseHTTPRequestHandler):
    body = b""

    def do_GET(self) -> None:
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.end_headers()
        self.wfile.write(type(self).body)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def tags_server() -> Iterator[tuple[str, type[_Tags]]]:
    handler = type("Tags", (_Tags,), {})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/api/tags", handler
    finally:
        server.shutdown()
        server.server_close()


def test_probe_ollama_reads_api_tags(tags_server: tuple[str, type[_Tags]]) -> None:
    url, handler = tags_server
    handler.body = json.dumps({"models": [{"name": "llama3.2:3b"}, {"model": "qwen3"}, {"x": 1}]}).encode()
    assert probe_ollama(url=url) == ["llama3.2:3b", "qwen3"]
    handler.body = b"not json"
    assert probe_ollama(url=url) is None
    handler.body = b'{"models": "nope"}'
    assert probe_ollama(url=url) is None


def test_probe_ollama_is_none_when_nothing_listens() -> None:
    assert probe_ollama(url=f"http://127.0.0.1:{free_port()}/api/tags", timeout=0.5) is None


def test_model_descriptions_and_tool_support() -> None:
    assert not model_calls_tools("local")
    assert not model_calls_tools("local:smollm2")
    assert model_calls_tools("local:qwen2.5-coder-0.5b")
    assert model_calls_tools("openai:gpt-4.1-mini")
    assert model_calls_tools(ScriptedModel())
    assert describe_model("local").startswith("local (SmolLM2-135M-Instruct")
    assert "cannot call tools" in describe_model("local")
    assert "calls tools" in describe_model("local:qwen2.5-coder-0.5b")
    assert describe_model("openai:gpt-4.1-mini") == "openai:gpt-4.1-mini"
    assert describe_model("local:nope") == "local:nope"  # resolving it reports the mistake


# -- the calculator and the clock ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("expression", "expected"),
    [
        ("1 + 2 * 3", 7),
        ("(17 + 25) * 3", 126),
        ("2 ** 10", 1024),
        ("7 / 2", 3.5),
        ("10 / 4 * 2", 5),
        ("7 // 2", 3),
        ("-7 % 3", 2),
        ("0.1 + 0.2", 0.3),
        ("1 / 3", 0.333333333333),
        ("-(2 ** -2)", -0.25),
        ("  12 * 7.5 ", 90),
        ("2 ** 1000 // 2 ** 999", 2),
        ("(" * 149 + "1" + ")" * 149, 1),
        ("-" * 299 + "1", -1),
    ],
)
def test_calculate(expression: str, expected: float) -> None:
    assert calculate(expression) == expected


@pytest.mark.parametrize(
    ("expression", "message"),
    [
        ("", "empty"),
        ("__import__('os').system('id')", "function call"),
        ("a + 1", "the name 'a'"),
        ("abs(-1)", "function call"),
        ("2 ^ 3", "write powers with **"),
        ("1 << 3", "only numbers"),
        ("2 ** 100000", "exponents are limited"),
        ("9 ** 9 ** 9", "exponents are limited"),
        ("99 ** 999", "too large"),
        ("1 / 0", "division by zero"),
        ("5 % 0", "division by zero"),
        ("True + 1", "only numbers"),
        ("'a' * 3", "only numbers"),
        ("[1, 2]", "only numbers"),
        ("1, 2", "only numbers"),
        ("(-8) ** 0.5", "not a real number"),
        ("1e308 * 10", "too large"),
        ("1 if 1 else 2", "only numbers"),
        ("lambda: 1", "only numbers"),
        ("1 +", "not an arithmetic expression"),
        ("1" + " + 1" * 200, "longer than"),
        ("2**" * 99 + "2", "exponents are limited"),
    ],
)
def test_calculate_rejects(expression: str, message: str) -> None:
    with pytest.raises(ValueError, match=message.replace("*", r"\*")):
        calculate(expression)


def test_current_time() -> None:
    assert "UTC" in current_time()
    assert "(UTC+0900)" in current_time("Asia/Tokyo")
    with pytest.raises(ValueError, match="unknown time zone 'Mars/Olympus'"):
        current_time("Mars/Olympus")
    with pytest.raises(ValueError, match="unknown time zone"):
        current_time("../../etc/passwd")


def test_tools_forgive_copied_schema_keywords_only() -> None:
    assert CALCULATE.validate({"expression": "1 + 1", "type": "object", "required": ["expression"]}) == {
        "expression": "1 + 1"
    }
    assert CURRENT_TIME.validate({"additionalProperties": False, "properties": {}}) == {"timezone": "UTC"}
    with pytest.raises(ToolInputError, match="Extra inputs are not permitted"):
        CALCULATE.validate({"expression": "1", "shell": "rm -rf /"})
    with pytest.raises(ToolInputError, match="expression"):
        CALCULATE.validate({"type": "object"})


# -- the agent: memory, prompt, tools ------------------------------------------------------------------


@pytest.fixture
async def host(tmp_path: Path) -> Any:
    async with AgentHost(tmp_path / "store.sqlite3") as agent_host:
        yield agent_host


async def test_the_memory_is_a_context_block(host: AgentHost) -> None:
    agent = await host.get_agent(demo_agent_class("test"), "memory")
    [block] = await agent.context.snapshot()
    assert (block["label"], block["content"], block["max_tokens"], block["writable"]) == (
        "memory",
        "",
        500,
        True,
    )
    assert "set_context" in block["description"]
    prompt = await agent.context.frozen_prompt()
    assert prompt.startswith(TOOLS_PROMPT)
    assert "MEMORY (Facts about the user" in prompt

    await agent.context.set_block("memory", "The user's name is Ada")
    await agent.context.set_block("memory", "Likes green tea", "append")
    assert await agent.context.read("memory") == "The user's name is Ada\nLikes green tea"
    assert "Ada" not in await agent.context.frozen_prompt()  # frozen: shown after a rebuild
    assert "The user's name is Ada\nLikes green tea" in await agent.refresh_system_prompt()
    assert await agent.clear_memory() == "Cleared the memory (2 lines)."
    assert await agent.context.read("memory") == ""
    assert await agent.storage.get("demo:memory") is None  # the old stop-gap's storage is gone
    for gone in ("remember", "forget", "render_memory", "load_memory"):
        assert not hasattr(agent, gone)

    # The memory is the agent's own and durable: another agent does not see it.
    await agent.context.set_block("memory", "Remember me")
    other = await host.get_agent(demo_agent_class("test"), "someone-else")
    assert await other.context.read("memory") == ""


async def test_memory_survives_a_restart(tmp_path: Path) -> None:
    async with AgentHost(tmp_path / "store.sqlite3") as first:
        agent = await first.get_agent(demo_agent_class("test"), "ada")
        await agent.context.set_block("memory", "The user's name is Ada")
    async with AgentHost(tmp_path / "store.sqlite3") as second:
        agent = await second.get_agent(demo_agent_class("test"), "ada")
        assert await agent.context.read("memory") == "The user's name is Ada"
        assert "The user's name is Ada" in await agent.refresh_system_prompt()


async def test_the_memory_is_full_at_500_tokens(host: AgentHost) -> None:
    agent = await host.get_agent(demo_agent_class("test"), "full")
    with pytest.raises(ValueError, match="exceeds max_tokens"):
        await agent.context.set_block("memory", "word " * 400)
    assert await agent.context.read("memory") == ""


async def test_tools_and_prompt_depend_on_the_model(host: AgentHost) -> None:
    chat_only = await host.get_agent(demo_agent_class("local"), "smol")
    assert await chat_only.get_tools() == {}
    assert await chat_only.get_system_prompt() == CHAT_PROMPT
    await chat_only.context.set_block("memory", "The user's name is Ada")  # by an earlier, tool-calling model
    assert "The user's name is Ada" in await chat_only.refresh_system_prompt()
    assert (await chat_only.refresh_system_prompt()).startswith(CHAT_PROMPT + "\n\n")
    config = await chat_only.before_turn(None)  # type: ignore[arg-type]
    assert config is not None and config.active_tools == []  # not even set_context

    assert demo_agent_class("local").search_tool is False  # Think's own search_history tool
    assert demo_agent_class("local:qwen2.5-coder-0.5b").search_tool is False
    assert demo_agent_class("openai:gpt-4.1-mini").search_tool is True

    tools = {t.name: t for t in await (await host.get_agent(demo_agent_class("test"), "t")).get_tools()}
    assert list(tools) == ["current_time", "calculate", "set_context", "clear_memory"]
    assert [name for name, t in tools.items() if t.needs_approval] == ["clear_memory"]
    assert tools["set_context"].parameters["required"] == ["label", "content"]
    assert tools["set_context"].validate({"label": "memory", "content": "x", "type": "object"}) == {
        "label": "memory",
        "content": "x",
        "mode": "replace",
    }
    assert tools["clear_memory"].parameters["properties"] == {}


async def test_small_local_models_get_steady_settings_and_answer_after_a_tool(host: AgentHost) -> None:
    local = await host.get_agent(demo_agent_class("local:qwen2.5-coder-0.5b"), "q")
    config = await local.before_turn(None)  # type: ignore[arg-type]
    assert config is not None and config.temperature == 0 and config.max_tokens == 400
    assert config.active_tools == ["current_time", "calculate", "set_context", "clear_memory"]
    tools = {t.name: t for t in await local.get_tools()}
    after_tool = [UserMessage("1+1?"), ToolMessage([ToolResult("c1", "calculate", 2)])]
    step = await local.before_step(StepContext("r", 1, "", after_tool, tools, ScriptedModel()))
    assert step == StepConfig(tool_choice="none")
    assert await local.before_step(StepContext("r", 0, "", after_tool[:1], tools, ScriptedModel())) is None

    hosted = await host.get_agent(demo_agent_class("openai:gpt-4.1-mini"), "h")
    assert await hosted.before_turn(None) is None  # type: ignore[arg-type]
    assert await hosted.before_step(StepContext("r", 1, "", after_tool, tools, ScriptedModel())) is None


class ScriptedDemo(DemoAgent):
    model = ScriptedModel()

    async def get_model(self) -> Any:
        return type(self).model


async def test_a_turn_that_remembers_then_a_turn_that_sees_it(host: AgentHost) -> None:
    ScriptedDemo.model = model = ScriptedModel(
        [
            tool_call(
                "set_context", {"label": "memory", "content": "The user's name is Ada", "type": "object"}
            ),
            "I'll remember that.",
            tool_call("calculate", {"expression": "6 * 7"}),
            "42, and hello Ada.",
            "Hello again, Ada.",
            tool_call("clear_memory", {}),
        ]
    )
    agent = await host.get_agent(ScriptedDemo, "turns")
    first = await agent.save_messages("Remember that my name is Ada.")
    assert first.status == "completed"
    parts = first.message["parts"]
    remembered = next(p for p in parts if p["type"] == "tool-set_context")
    assert remembered["state"] == "output-available"
    assert remembered["output"].startswith("Written to memory. Usage:")
    assert await agent.context.read("memory") == "The user's name is Ada"

    second = await agent.save_messages("What is 6 times 7?")
    assert second.status == "completed"
    # The prompt is frozen (provider caches keep hitting): the note is in the history, not yet the prompt.
    assert "The user's name is Ada" not in (model.requests[2].system or "")
    calc = next(p for p in second.message["parts"] if p["type"] == "tool-calculate")
    assert calc["output"] == 42

    await agent.clear_messages()  # a rebuild: the next conversation's prompt carries the memory
    third = await agent.save_messages("Hello")
    assert third.status == "completed"
    assert "The user's name is Ada" in (model.requests[4].system or "")

    fourth = await agent.save_messages("Forget everything.")
    clear = next(p for p in fourth.message["parts"] if p["type"] == "tool-clear_memory")
    assert clear["state"] == "approval-requested"  # nothing deleted until the user approves
    assert await agent.context.read("memory") == "The user's name is Ada"


# -- the app and the command ----------------------------------------------------------------------------


def test_demo_app_serves_demo_agent_at_root(tmp_path: Path) -> None:
    from starlette.testclient import TestClient

    app = demo_app("test", str(tmp_path / "store.sqlite3"))
    assert list(app.host.agent_classes) == ["demo-agent"]
    with TestClient(app) as client:
        page = client.get("/")
    assert page.status_code == 200
    assert "&quot;agentPath&quot;:&quot;/agents/demo-agent/default&quot;" in page.text
    assert "<title>ponder demo · ponder</title>" in page.text


def test_cli_demo_reports_a_bad_model_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    store = f"sqlite:///{tmp_path / 'store.sqlite3'}"
    port = str(free_port())
    assert main(["demo", "--model", "nope:x", "--port", port, "--store", store]) == 2
    err = capsys.readouterr().err
    assert "ponder demo: model nope:x, because --model was given" in err
    assert err.strip().splitlines()[-1].startswith("ponder: error: unknown model provider 'nope'")
    assert "Traceback" not in err

    assert main(["demo", "--model", "anthropic:claude-haiku-4-5", "--port", port, "--store", store]) == 2
    assert "ANTHROPIC_API_KEY" in capsys.readouterr().err.strip().splitlines()[-1]


def test_cli_demo_says_how_to_choose_another_model_when_the_chosen_one_fails(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test")
    monkeypatch.setattr("ponder.models.resolve_model", _missing_sdk)
    store = f"sqlite:///{tmp_path / 'store.sqlite3'}"
    assert main(["demo", "--port", str(free_port()), "--store", store]) == 2
    last = capsys.readouterr().err.strip().splitlines()[-1]
    assert last == (
        'ponder: error: pip install "ponder[anthropic]" (the demo chose anthropic:claude-haiku-4-5 because '
        "ANTHROPIC_API_KEY is set (and OPENAI_API_KEY is not); pass --model, e.g. --model local, for another)"
    )


def _missing_sdk(model: str) -> Any:
    from ponder.models import MissingExtraError

    raise MissingExtraError('pip install "ponder[anthropic]"')


def test_cli_demo_port_in_use(capsys: pytest.CaptureFixture[str]) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        assert main(["demo", "--model", "test", "--port", str(port)]) == 2
    err = capsys.readouterr().err
    assert f"port {port} on 127.0.0.1 is already in use" in err
    assert "ponder demo: model" not in err  # fails before choosing anything
