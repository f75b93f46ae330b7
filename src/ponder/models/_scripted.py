"""``ScriptedModel``: a deterministic ``ModelClient`` for tests (public as ``ponder.testing.ScriptedModel``).

Why this module exists: every test in ponder, and users' own tests, must run without a network or a key,
yet exercise real streaming — text word by word, reasoning, single and parallel tool calls, provider errors,
slow chunks and stalls. It lives in the model layer (next to the protocol it implements, and so the
``"test"`` model string resolves without importing anything above this layer); ``ponder.testing`` re-exports
it.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import operator
import re
from collections import deque
from collections.abc import AsyncIterator, Callable, Iterable
from dataclasses import dataclass
from typing import Any, TypeAlias

from ._errors import ModelError
from ._events import (
    Finish,
    FinishReason,
    ModelEvent,
    ReasoningDelta,
    ReasoningEnd,
    TextDelta,
    ToolCallDelta,
    ToolCallEnd,
    ToolCallStart,
    Usage,
    parse_tool_args,
)
from ._messages import AssistantMessage, SystemMessage, TextContent, ToolMessage, UserMessage
from ._types import ModelRequest

_CHUNK = re.compile(r"\s*\S+\s*|\s+")


@dataclass(frozen=True, slots=True)
class Reasoning:
    """Scripted reasoning, streamed word by word (see ``reasoning()``)."""

    text: str


@dataclass(frozen=True, slots=True)
class ScriptedToolCall:
    """A scripted tool call (see ``tool_call()``). ``args`` as a string is sent raw (may be invalid JSON)."""

    name: str
    args: dict[str, Any] | str
    id: str | None = None


@dataclass(frozen=True, slots=True)
class ScriptedError:
    """Raise ``ModelError`` at this point of the stream (see ``error()``)."""

    message: str
    retryable: bool = False
    status_code: int | None = None


@dataclass(frozen=True, slots=True)
class Stall:
    """Emit nothing for ``seconds`` (see ``stall()``)."""

    seconds: float


ReplyItem: TypeAlias = str | Reasoning | ScriptedToolCall | ScriptedError | Stall


@dataclass(frozen=True, slots=True)
class Reply:
    """One model response made of several items, streamed in order (see ``reply()``)."""

    items: tuple[ReplyItem, ...]
    finish: FinishReason | None = None


ReplyFunction: TypeAlias = Callable[[ModelRequest], Any]
"""``fn(request)`` returning a reply (or an awaitable of one)."""
ReplySpec: TypeAlias = ReplyItem | Reply | list[ReplyItem] | ReplyFunction

_ITEM_TYPES = (str, Reasoning, ScriptedToolCall, ScriptedError, Stall)


def reasoning(text: str) -> Reasoning:
    """A reply (or reply item) of model reasoning, one ``ReasoningDelta`` per word, then ``ReasoningEnd``."""
    return Reasoning(text)


def tool_call(name: str, args: dict[str, Any] | str | None = None, id: str | None = None) -> ScriptedToolCall:
    """A tool call. Ids default to ``call_1``, ``call_2``... per model. A list of them is a parallel call."""
    return ScriptedToolCall(name, {} if args is None else args, id)


def error(message: str, *, retryable: bool = False, status_code: int | None = None) -> ScriptedError:
    """Fail the call with ``ModelError(message)`` (after any items before it in a ``reply()``)."""
    return ScriptedError(message, retryable, status_code)


def stall(seconds: float) -> Stall:
    """Emit nothing for ``seconds``: a provider that hangs (for watchdog and cancellation tests)."""
    return Stall(seconds)


def reply(*items: ReplyItem, finish: FinishReason | None = None) -> Reply:
    """Several items in one response, in order: ``reply(reasoning("hmm"), "Sure.", tool_call("x", {}))``.

    ``finish`` overrides the finish reason (default: ``"tool-calls"`` if there is a tool call, else
    ``"stop"``).
    """
    for item in items:
        _check_item(item)
    return Reply(tuple(items), finish)


class ScriptedModelExhausted(RuntimeError):
    """A ``ScriptedModel`` was called more times than it has replies."""


class ScriptedModel:
    """A deterministic ``ModelClient``: each call consumes the next scripted reply.

    A reply is a string (text, one ``TextDelta`` per word with its spacing), ``reasoning(text)``,
    ``tool_call(name, args)``, a list of items (in order, e.g. parallel tool calls), ``reply(*items)``,
    ``error(message)``, ``stall(seconds)``, or a function ``fn(request) -> reply`` (sync or async) that sees
    the ``ModelRequest``. ``chunk_delay`` seconds pass between streamed chunks. Every request is recorded in
    ``requests``. ``default`` (a reply) answers every call once the scripted replies run out; without it an
    extra call raises ``ScriptedModelExhausted``.
    """

    def __init__(
        self,
        replies: Iterable[ReplySpec] = (),
        *,
        chunk_delay: float = 0.0,
        default: ReplySpec | None = None,
        name: str = "scripted",
    ) -> None:
        self._replies: deque[ReplySpec] = deque()
        self._scripted = 0
        self.chunk_delay = chunk_delay
        self.default = default
        self.name = name
        self.requests: list[ModelRequest] = []
        self._tool_calls = 0
        if default is not None:
            _check_spec(default)
        self.add(*replies)

    @classmethod
    def echo(cls, *, chunk_delay: float = 0.0) -> ScriptedModel:
        """A model that answers every call with ``echo: <last user text>`` (the ``"test"`` model)."""
        return cls(default=_echo, chunk_delay=chunk_delay, name="test")

    def __repr__(self) -> str:
        return f"ScriptedModel(name={self.name!r}, calls={self.calls}, remaining={self.remaining})"

    def add(self, *replies: ReplySpec) -> None:
        """Script more replies after the current ones."""
        for spec in replies:
            _check_spec(spec)
            self._replies.append(spec)
        self._scripted += len(replies)

    @property
    def calls(self) -> int:
        """How many times ``stream`` was called."""
        return len(self.requests)

    @property
    def remaining(self) -> int:
        """How many scripted replies are left (not counting ``default``)."""
        return len(self._replies)

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        self.requests.append(request)
        spec = self._next_reply(request)
        if callable(spec):
            spec = spec(request)
            if inspect.isawaitable(spec):
                spec = await spec
            _check_spec(spec, from_function=True)
        items, finish = _normalize(spec)  # type: ignore[arg-type]

        delay = self.chunk_delay
        first = True
        output_words = 0
        has_tool_calls = False
        for item in items:
            if isinstance(item, str | Reasoning):
                text = item if isinstance(item, str) else item.text
                for chunk in _CHUNK.findall(text):
                    if delay and not first:
                        await asyncio.sleep(delay)
                    first = False
                    output_words += 1
                    yield TextDelta(chunk) if isinstance(item, str) else ReasoningDelta(chunk)
                if isinstance(item, Reasoning):
                    yield ReasoningEnd()
            elif isinstance(item, ScriptedToolCall):
                if delay and not first:
                    await asyncio.sleep(delay)
                first = False
                has_tool_calls = True
                self._tool_calls += 1
                call_id = item.id or f"call_{self._tool_calls}"
                raw = item.args if isinstance(item.args, str) else json.dumps(item.args)
                output_words += len(raw.split())
                yield ToolCallStart(call_id, item.name)
                if raw:
                    yield ToolCallDelta(call_id, raw)
                args, invalid = parse_tool_args(raw)
                yield ToolCallEnd(call_id, item.name, args, invalid_args=invalid)
            elif isinstance(item, ScriptedError):
                raise ModelError(item.message, retryable=item.retryable, status_code=item.status_code)
            else:
                await asyncio.sleep(item.seconds)
        yield Usage(input_tokens=_request_words(request), output_tokens=output_words)
        yield Finish(finish or ("tool-calls" if has_tool_calls else "stop"))

    def _next_reply(self, request: ModelRequest) -> ReplySpec:
        if self._replies:
            return self._replies.popleft()
        if self.default is not None:
            return self.default
        last = request.last_user_text()
        raise ScriptedModelExhausted(
            f"ScriptedModel {self.name!r} has no reply for call {self.calls}: it was scripted with "
            f"{self._scripted} repl{'y' if self._scripted == 1 else 'ies'} and all were used "
            f"(last user message: {last!r}). Script more replies, or pass default=... to answer every "
            "further call."
        )


def _echo(request: ModelRequest) -> str:
    return f"echo: {request.last_user_text()}"


def _check_item(item: object) -> None:
    if not isinstance(item, _ITEM_TYPES):
        raise TypeError(
            f"not a scripted reply item: {item!r} (use a str, reasoning(), tool_call(), error() or stall())"
        )


def _check_spec(spec: object, *, from_function: bool = False) -> None:
    if isinstance(spec, Reply):
        return
    if isinstance(spec, list | tuple):
        for item in spec:
            _check_item(item)
        return
    if callable(spec) and not from_function:
        return
    _check_item(spec)


def _normalize(
    spec: ReplyItem | Reply | list[ReplyItem],
) -> tuple[tuple[ReplyItem, ...], FinishReason | None]:
    if isinstance(spec, Reply):
        return spec.items, spec.finish
    if isinstance(spec, list | tuple):
        return tuple(spec), None
    return (spec,), None


#: Word counts of message contents already counted, by object id: ``id → (object, source, words)``. A
#: session shares its converted message objects across turns, so a long history is counted once, not on
#: every call. An entry holds its object (its id cannot be reused) and the value it counted (a changed
#: text or output is recounted). Bounded: cleared when full.
_WORD_CACHE: dict[int, tuple[Any, Any, int]] = {}
_WORD_CACHE_SIZE = 16_384
#: The messages of the last request counted and the running word totals after each of them: the next
#: request of a conversation starts with the same message objects, so only its new tail is counted (a
#: message object sent is not changed afterwards; sessions and turns build new ones).
_LAST_MESSAGES: list[Any] = []
_LAST_TOTALS: list[int] = [0]


def _count_words(obj: Any, source: Any, text: Callable[[], str]) -> int:
    hit = _WORD_CACHE.get(id(obj))
    if hit is not None and hit[0] is obj and hit[1] is source:
        return hit[2]
    words = len(text().split())
    if len(_WORD_CACHE) >= _WORD_CACHE_SIZE:
        _WORD_CACHE.clear()
    _WORD_CACHE[id(obj)] = (obj, source, words)
    return words


def _message_words(message: Any) -> int:
    words = 0
    if isinstance(message, UserMessage | AssistantMessage):
        for part in message.content:
            if isinstance(part, TextContent):
                words += _count_words(part, part.text, part.text.__str__)
    elif isinstance(message, SystemMessage):
        words += len(message.text.split())
    elif isinstance(message, ToolMessage):
        for result in message.results:
            value = result.error if result.is_error else result.output
            words += _count_words(result, value, lambda value=value: str(value))
    return words


def _request_words(request: ModelRequest) -> int:
    """Whitespace-separated words of the system prompt, texts and tool results of a request."""
    global _LAST_MESSAGES, _LAST_TOTALS
    words = len(request.system.split()) if request.system else 0
    messages = list(request.messages)
    last = _LAST_MESSAGES
    shared = min(len(messages), len(last))
    # A turn resends the previous request's message objects plus a few new ones: compare identities in C
    # first, and walk element by element only when something before the end differs.
    if not all(map(operator.is_, messages[:shared], last[:shared])):
        start = 0
        while all(map(operator.is_, messages[start : start + 256], last[start : start + 256])):
            start += 256
        shared = start
        while messages[shared] is last[shared]:
            shared += 1
    totals = _LAST_TOTALS[: shared + 1]
    for message in messages[shared:]:
        totals.append(totals[-1] + _message_words(message))
    _LAST_MESSAGES, _LAST_TOTALS = messages, totals
    return words + totals[-1]
