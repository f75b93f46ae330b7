"""The demo agent that ``ponder demo`` serves, and how the command picks its model.

Why this module exists: the README's first command must end with something a person can talk to, on a
machine with no account and no key. ``DemoAgent`` is a small ``Think`` agent that shows what ponder is (a
durable conversation, a memory block that outlives a restart and shows live in the page, safe tools, a tool that waits for the user's
approval) with a system prompt a 135M-parameter model can follow. ``choose_demo_model`` picks the best model
the machine offers (a ``--model`` flag, an OpenAI or Anthropic key, a running Ollama, else the bundled
``"local"`` model) and says why, so the choice is never a surprise. See ``docs/demo.md``.
"""

from __future__ import annotations

import ast
import asyncio
import json
import math
import operator
import os
import urllib.request
from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any, ClassVar, TextIO
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from .context import ContextBlock, context_tools
from .models import ModelClient
from .think import StepConfig, StepContext, Think, Tool, TurnConfig, TurnContext

__all__ = [
    "ANTHROPIC_DEMO_MODEL",
    "OLLAMA_TAGS_URL",
    "OPENAI_DEMO_MODEL",
    "DemoAgent",
    "calculate",
    "choose_demo_model",
    "current_time",
    "demo_agent_class",
    "demo_app",
    "describe_model",
    "model_calls_tools",
    "prepare_model",
    "probe_ollama",
]

OPENAI_DEMO_MODEL = "openai:gpt-4.1-mini"
ANTHROPIC_DEMO_MODEL = "anthropic:claude-haiku-4-5"
#: Ollama's model list. Loopback only: the demo never probes another host.
OLLAMA_TAGS_URL = "http://localhost:11434/api/tags"

# -- choosing the model --------------------------------------------------------------------------------

OllamaProbe = Callable[[], "list[str] | None"]


def probe_ollama(timeout: float = 0.5, *, url: str = OLLAMA_TAGS_URL) -> list[str] | None:
    """The models of an Ollama server on ``localhost:11434`` (``None`` when none answers there).

    One ``GET /api/tags`` with a short timeout, never through a proxy (the target is this machine).
    ``url`` exists for tests.
    """
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    try:
        with opener.open(url, timeout=timeout) as response:
            if response.status != 200:
                return None
            data = json.loads(response.read(1_000_000))
    except (OSError, ValueError):
        return None
    models = data.get("models") if isinstance(data, dict) else None
    if not isinstance(models, list):
        return None
    names = [m.get("name") or m.get("model") for m in models if isinstance(m, dict)]
    return [name for name in names if isinstance(name, str) and name]


def choose_demo_model(
    flag: str | None, env: Mapping[str, str], probe_ollama: OllamaProbe = probe_ollama
) -> tuple[str, str]:
    """``(model string, reason)`` for ``ponder demo``; the first match wins.

    1. ``flag`` (``--model``); 2. ``OPENAI_API_KEY`` → :data:`OPENAI_DEMO_MODEL`;
    3. ``ANTHROPIC_API_KEY`` → :data:`ANTHROPIC_DEMO_MODEL`; 4. an Ollama server on ``localhost:11434``
    → its first chat model (names containing ``embed`` are skipped: embedding models cannot chat);
    5. ``"local"``. ``probe_ollama`` is only called when steps 1-3 found nothing.
    """
    if flag and flag.strip():
        return flag.strip(), "--model was given"
    if env.get("OPENAI_API_KEY", "").strip():
        return OPENAI_DEMO_MODEL, "OPENAI_API_KEY is set"
    if env.get("ANTHROPIC_API_KEY", "").strip():
        return ANTHROPIC_DEMO_MODEL, "ANTHROPIC_API_KEY is set (and OPENAI_API_KEY is not)"
    names = probe_ollama()
    chat_models = [name for name in names or () if "embed" not in name.lower()]
    if chat_models:
        return (
            f"ollama:{chat_models[0]}",
            f"no OPENAI_API_KEY or ANTHROPIC_API_KEY, and Ollama on localhost:11434 has {chat_models[0]!r}",
        )
    ollama = (
        "no Ollama server answers on localhost:11434"
        if names is None
        else "Ollama on localhost:11434 has no chat model"
    )
    return "local", f"no --model, no OPENAI_API_KEY or ANTHROPIC_API_KEY, and {ollama}"


def _local_spec(model: str | ModelClient) -> Any:
    """The catalog entry of a ``local`` / ``local:<name>`` model string, else ``None``."""
    from .models._local_catalog import local_model_spec

    if not isinstance(model, str):
        return None
    lowered = model.strip().lower()
    if lowered == "local":
        return local_model_spec("")
    if lowered.startswith(("local:", "local/")):
        return local_model_spec(model.strip()[6:])
    return None


def model_calls_tools(model: str | ModelClient) -> bool:
    """Whether the demo should give ``model`` its tools (``False`` only for a local model that cannot call them)."""
    if not isinstance(model, str):
        return True
    try:
        spec = _local_spec(model)
    except ValueError:  # an unknown local model: resolving it reports that properly
        return True
    return spec is None or spec.supports_tools


def describe_model(model: str) -> str:
    """A short description of a model string for the startup lines."""
    try:
        spec = _local_spec(model)
    except ValueError:
        spec = None
    if spec is None:
        return model
    tools = "calls tools" if spec.supports_tools else "chat only, cannot call tools"
    return f"{model} ({spec.title}, runs on this machine; {tools})"


def prepare_model(model: str, out: TextIO) -> None:
    """Resolve ``model`` now so a mistake is one line at startup; fetch and start a local model.

    Raises ``ModelConfigError`` (a missing key, SDK or ``llama-server``, an unknown model) or
    ``ModelError`` (a failed download, a server that does not start).
    """
    from .models import resolve_model

    client = resolve_model(model)
    spec = _local_spec(model)
    if spec is None:
        return
    from .models._local import LocalModel
    from .models._local_files import format_size, is_cached, model_dir

    if not spec.supports_tools:
        print(
            f"ponder demo: {spec.name} only chats; for tools and memory run "
            "`ponder demo --model local:qwen2.5-coder-0.5b` (a 491 MB download) or use a hosted model",
            file=out,
            flush=True,
        )
    if is_cached(spec):
        print(f"ponder demo: model file cached in {model_dir(spec)}", file=out, flush=True)
    else:
        print(
            f"ponder demo: first run: downloading the model ({format_size(spec.download_size)}, once) "
            f"into {model_dir(spec)}",
            file=out,
            flush=True,
        )
    assert isinstance(client, LocalModel)
    client.model_path_sync()  # the download (with its own progress lines), or a quick sha256 check
    print(
        f"ponder demo: starting the local model server (llama-server) for {spec.name}", file=out, flush=True
    )
    client.start_sync()


# -- tools ---------------------------------------------------------------------------------------------

_BINARY: dict[type[ast.operator], Callable[[Any, Any], Any]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: operator.pow,
}
_UNARY: dict[type[ast.unaryop], Callable[[Any], Any]] = {ast.UAdd: operator.pos, ast.USub: operator.neg}
MAX_EXPRESSION_CHARS = 300
MAX_EXPONENT = 1000
MAX_INT_BITS = 4096


def _number(value: Any) -> int | float:
    if isinstance(value, int) and value.bit_length() > MAX_INT_BITS:
        raise ValueError("the result is too large")
    if isinstance(value, float) and not math.isfinite(value):
        raise ValueError("the result is too large")
    if not isinstance(value, int | float):  # e.g. (-8) ** 0.5 is complex
        raise ValueError("the result is not a real number")
    return value


def _evaluate(node: ast.AST) -> int | float:
    if isinstance(node, ast.Expression):
        return _evaluate(node.body)
    if isinstance(node, ast.Constant):
        if isinstance(node.value, bool) or not isinstance(node.value, int | float):
            raise ValueError(f"only numbers are allowed, not {node.value!r}")
        return _number(node.value)
    if isinstance(node, ast.UnaryOp) and type(node.op) in _UNARY:
        return _number(_UNARY[type(node.op)](_evaluate(node.operand)))
    if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
        left, right = _evaluate(node.left), _evaluate(node.right)
        if isinstance(node.op, ast.Pow):
            if abs(right) > MAX_EXPONENT:
                raise ValueError(f"exponents are limited to ±{MAX_EXPONENT}")
            if isinstance(left, int) and isinstance(right, int) and right > 0:
                if left.bit_length() * right > MAX_INT_BITS:
                    raise ValueError("the result is too large")
        try:
            return _number(_BINARY[type(node.op)](left, right))
        except ZeroDivisionError:
            raise ValueError("division by zero") from None
        except OverflowError:
            raise ValueError("the result is too large") from None
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitXor):
        raise ValueError("^ is not allowed; write powers with **, e.g. 2 ** 10")
    raise ValueError(f"only numbers, + - * / // % ** and parentheses are allowed (found {_what(node)})")


def _what(node: ast.AST) -> str:
    if isinstance(node, ast.Name):
        return f"the name {node.id!r}"
    if isinstance(node, ast.Call):
        return "a function call"
    if isinstance(node, ast.BinOp | ast.UnaryOp):
        return f"the operator {type(node.op).__name__}"
    return type(node).__name__


def calculate(expression: str) -> int | float:
    """Evaluate an arithmetic expression.

    Args:
        expression: Numbers with + - * / // % ** and parentheses; nothing else.
    """
    text = expression.strip()
    if not text:
        raise ValueError("the expression is empty")
    if len(text) > MAX_EXPRESSION_CHARS:
        raise ValueError(f"the expression is longer than {MAX_EXPRESSION_CHARS} characters")
    try:
        tree = ast.parse(text, mode="eval")
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        raise ValueError(f"not an arithmetic expression: {text!r}") from None
    try:
        result = _evaluate(tree)
    except RecursionError:
        raise ValueError("the expression is nested too deeply") from None
    if isinstance(result, float):
        if result.is_integer() and abs(result) < 2**53:
            return int(result)
        return float(f"{result:.12g}")
    return result


def current_time(timezone: str = "UTC") -> str:
    """The current date and time in a time zone.

    Args:
        timezone: An IANA time zone name such as "UTC", "Europe/Paris" or "Asia/Tokyo".
    """
    try:
        zone = ZoneInfo(timezone.strip() or "UTC")
    except (ZoneInfoNotFoundError, ValueError):
        raise ValueError(
            f"unknown time zone {timezone!r}; use an IANA name such as 'Europe/Paris' or 'UTC'"
        ) from None
    now = datetime.now(zone)
    return now.strftime("%A %d %B %Y, %H:%M:%S %Z (UTC%z)")


# -- the agent -----------------------------------------------------------------------------------------

DEMO_TOOLS = ("current_time", "calculate", "set_context", "clear_memory")
MEMORY_LABEL = "memory"
MEMORY_MAX_TOKENS = 500
MEMORY_DESCRIPTION = (
    "Facts about the user to keep for later chats. To add one, call set_context with "
    'label "memory", mode "append" and one short sentence as content'
)

CHAT_PROMPT = """You are the assistant in the ponder demo. You are a small language model running on \
this computer. Answer in a few short sentences. If you do not know something, say so."""

TOOLS_PROMPT = """You are the assistant in the ponder demo. Answer in a few short sentences.
Call a tool only when the user asks for the time, for a calculation, or to remember or forget something. \
To remember something, call set_context with label "memory" and mode "append"; to forget something, \
call it with mode "replace" and the memory without it. Otherwise just answer."""

_SCHEMA_KEYWORDS = frozenset(
    {"type", "properties", "required", "additionalProperties", "description", "title", "$schema", "$defs"}
)


class _ForgivingTool(Tool):
    """A tool that ignores JSON Schema keywords a small model copies into its arguments.

    Qwen2.5-Coder-0.5B often sends ``{"expression": "12 * 7.5", "type": "object"}``, or the schema itself
    for a tool without parameters. Those keys (when they are not real parameters) are dropped before
    validation; anything else unknown is still refused.
    """

    def validate(self, args: Mapping[str, Any]) -> dict[str, Any]:
        known = self.parameters.get("properties", {})
        return super().validate({k: v for k, v in args.items() if k in known or k not in _SCHEMA_KEYWORDS})


CALCULATE = _ForgivingTool(calculate, idempotent=True)
CURRENT_TIME = _ForgivingTool(current_time, idempotent=True)


class DemoAgent(Think):
    """What ``ponder demo`` serves: a memory block, two safe tools and one tool that needs approval.

    The model is ``demo_model`` (``ponder demo`` sets it through :func:`demo_agent_class`); when it is
    ``None``, ``choose_demo_model`` picks one from the environment on first use. Models that cannot call
    tools (``"local"``, SmolLM2) get no tools and a chat-only prompt; the memory block is in the prompt
    either way. The memory is a context block (``configure_context``): the model writes it with
    ``set_context``, the web page's Memory panel shows it live.
    """

    ui_title: ClassVar[str] = "ponder demo"
    demo_model: ClassVar[str | None] = None
    max_steps = 6

    async def get_model(self) -> str:
        model = type(self).demo_model
        if model is None:  # served without ``ponder demo``: choose the way the command does
            model, _reason = await asyncio.to_thread(choose_demo_model, None, dict(os.environ))
            type(self).demo_model = model
        return model

    async def get_system_prompt(self) -> str:
        return TOOLS_PROMPT if model_calls_tools(await self.get_model()) else CHAT_PROMPT

    def configure_context(self) -> list[ContextBlock]:
        return [ContextBlock(MEMORY_LABEL, description=MEMORY_DESCRIPTION, max_tokens=MEMORY_MAX_TOKENS)]

    async def get_tools(self) -> Any:
        if not model_calls_tools(await self.get_model()):
            return {}
        tools: list[Tool] | None = self.__dict__.get("_demo_tools")
        if tools is None:
            # The block tools (set_context) again, forgiving: a 0.5B model copies schema words into them too.
            block_tools = [_ForgivingTool(t.fn) for t in context_tools(self.context)]
            tools = self.__dict__["_demo_tools"] = [
                CURRENT_TIME,
                CALCULATE,
                *block_tools,
                _ForgivingTool(self.clear_memory, needs_approval=True),
            ]
        return tools

    async def before_turn(self, ctx: TurnContext) -> TurnConfig | None:
        spec = _local_spec_or_none(await self.get_model())
        if spec is not None:
            # Small local models: steady answers (docs/local-model.md recommends 0 for tool calls) and a
            # bounded length, so a rambling 135M model cannot run for minutes.
            # Only the demo's own tools: every extra tool description confuses a 0.5B model; none at all
            # for a model that cannot call tools (the block tools would otherwise still be offered).
            active = list(DEMO_TOOLS) if spec.supports_tools else []
            return TurnConfig(temperature=0, max_tokens=400, active_tools=active)
        return None

    async def before_step(self, ctx: StepContext) -> StepConfig | None:
        # A 0.5B model that has just seen a tool's result tends to call the same tool again, step after
        # step. For local models, a step that follows tool results may not call tools: it answers in words.
        if ctx.tools and ctx.messages and getattr(ctx.messages[-1], "role", None) == "tool":
            if _local_spec_or_none(await self.get_model()) is not None:
                return StepConfig(tool_choice="none")
        return None

    async def clear_memory(self) -> str:
        """Delete everything in the memory. The user is asked to approve this first."""
        before = await self.context.read(MEMORY_LABEL)
        await self.context.set_block(MEMORY_LABEL, "")
        lines = len([line for line in before.splitlines() if line.strip()])
        return f"Cleared the memory ({lines} {'line' if lines == 1 else 'lines'})."


def _local_spec_or_none(model: str | ModelClient) -> Any:
    try:
        return _local_spec(model)
    except ValueError:
        return None


def demo_agent_class(model: str) -> type[DemoAgent]:
    """``DemoAgent`` bound to ``model`` (same name and routes, ``/agents/demo-agent/<name>``).

    A local model also goes without ``Think``'s own ``search_history`` tool: SmolLM2 cannot call tools and
    Qwen does best with only the demo's four.
    """
    attrs = {"demo_model": model, "__module__": __name__, "search_tool": _local_spec_or_none(model) is None}
    return type("DemoAgent", (DemoAgent,), attrs)


def demo_app(model: str, store: str | None = None) -> Any:
    """The ``App`` that ``ponder demo`` serves: the demo agent only, so ``/`` is its page."""
    from .server import App

    return App([demo_agent_class(model)], store=store)
