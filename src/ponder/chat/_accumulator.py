"""Build one assistant ``UIMessage`` from a stream of AI SDK ``UIMessageChunk`` dicts.

Why this module exists: the server must persist exactly the message a stock AI SDK client renders from the same
chunks, recover a partial message from buffered chunks after a crash, and keep a message it continues (recovery)
intact. It also guards clients against providers that replay earlier tool round-trips: a replayed chunk that
would move a tool part backwards (for example an approved call back to "approval requested") is *suppressed* —
not applied, and reported so the caller does not rebroadcast it. A tool result for a call that lives in an
earlier stored message is reported as a *cross-message* update for the caller to apply there.

This is the hot streaming path: chunks are applied in place to plain dicts, tool and data parts are indexed for
O(1) lookup, and text deltas are buffered and joined lazily so a long reply costs linear, not quadratic, time.
"""

from __future__ import annotations

import copy
import enum
import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, ClassVar

from ._ids import new_message_id
from ._parts import is_settled_tool_part, merge_objects, normalize_tool_input
from ._types import TERMINAL_TOOL_STATES, UIMessage, UIMessageChunk, UIMessagePart


class ChunkOutcome(enum.Enum):
    """What :meth:`MessageAccumulator.apply` did with a chunk."""

    APPLIED = "applied"
    """The chunk was applied (or is a well-formed no-op such as ``finish-step``); relay it as usual."""
    SUPPRESSED = "suppressed"
    """The chunk would regress a known tool part (provider replay); it was not applied — do not relay it."""
    CROSS_MESSAGE = "cross-message"
    """A tool result/approval chunk for a call that is not in this message: apply it to the stored message
    that holds the call (:func:`apply_tool_chunk_to_message`)."""
    UNHANDLED = "unhandled"
    """Unknown chunk type, or a chunk missing a required field; nothing changed."""


@dataclass(frozen=True, slots=True)
class ChunkResult:
    """Outcome of applying one chunk.

    ``tool_call_id`` is set for suppressed and cross-message tool chunks; ``reason`` names why a chunk was
    suppressed (``"duplicate-tool-start"``, ``"stale-tool-input"``, ``"unknown-tool-call"``,
    ``"tool-already-answered"``, ``"tool-already-settled"``) or unhandled (``"unknown-chunk-type"``,
    ``"malformed-chunk"``).
    """

    outcome: ChunkOutcome
    tool_call_id: str | None = None
    reason: str | None = None

    @property
    def applied(self) -> bool:
        return self.outcome is ChunkOutcome.APPLIED

    @property
    def suppressed(self) -> bool:
        return self.outcome is ChunkOutcome.SUPPRESSED

    @property
    def cross_message(self) -> bool:
        return self.outcome is ChunkOutcome.CROSS_MESSAGE

    @property
    def handled(self) -> bool:
        """False only for unknown or malformed chunks."""
        return self.outcome is not ChunkOutcome.UNHANDLED


_APPLIED = ChunkResult(ChunkOutcome.APPLIED)
_UNKNOWN = ChunkResult(ChunkOutcome.UNHANDLED, reason="unknown-chunk-type")
_MALFORMED = ChunkResult(ChunkOutcome.UNHANDLED, reason="malformed-chunk")

_APPROVAL_STATES = frozenset({"approval-requested", "approval-responded"})
_ANSWERED_STATES = TERMINAL_TOOL_STATES | {"approval-responded"}


def _suppressed(tool_call_id: str, reason: str) -> ChunkResult:
    return ChunkResult(ChunkOutcome.SUPPRESSED, tool_call_id, reason)


class _OpenPart:
    """A text or reasoning part still receiving deltas; deltas are buffered until someone reads the part."""

    __slots__ = ("part", "pieces")

    def __init__(self, part: UIMessagePart) -> None:
        self.part = part
        self.pieces: list[str] = []


class MessageAccumulator:
    """Apply ``UIMessageChunk`` dicts to one assistant message.

    ``MessageAccumulator()`` starts an empty assistant message with a fresh id (a ``start`` chunk carrying
    ``messageId`` replaces it). ``MessageAccumulator(message=stored, continuation=True)`` continues ``stored``
    — a recovered turn streaming into the same message: the id is kept (``start`` cannot change it), text and
    reasoning parts left ``streaming`` are closed as ``done``, new parts are appended after the existing ones,
    and a ``start`` chunk's metadata replaces the same top-level metadata keys instead of deep-merging.

    The seed message is copied (message dict, parts list and each part dict), never mutated. The
    accumulator's own message is mutated in place as chunks arrive: :attr:`message` returns that live dict
    (after flushing buffered text), so tool results applied to it with :func:`apply_tool_result` while the
    stream is open are kept. Read :attr:`message` again after applying chunks rather than holding an old
    reference: text deltas are joined into the dict lazily, when :attr:`message` or :attr:`parts` is read.
    """

    __slots__ = (
        "_active",
        "_data",
        "_last_open",
        "_message",
        "_parts",
        "_pending",
        "_provisional",
        "_raw_input",
        "_tools",
        "aborted",
        "continuation",
        "error_text",
        "finish_reason",
    )

    _handlers: ClassVar[dict[str, Callable[[MessageAccumulator, UIMessageChunk], ChunkResult]]]

    def __init__(
        self,
        message_id: str | None = None,
        *,
        message: UIMessage | None = None,
        continuation: bool = False,
    ) -> None:
        self.continuation = continuation
        self.finish_reason: str | None = None
        self.error_text: str | None = None
        self.aborted = False
        self._active: dict[str, dict[Any, _OpenPart]] = {"text": {}, "reasoning": {}}
        self._last_open: dict[str, _OpenPart | None] = {"text": None, "reasoning": None}
        self._pending: list[_OpenPart] = []
        self._tools: dict[str, UIMessagePart] = {}
        self._data: dict[tuple[str, Any], UIMessagePart] = {}
        self._raw_input: dict[str, list[str]] = {}
        self._provisional: set[str] = set()
        if message is None:
            self._message: UIMessage = {
                "id": message_id or new_message_id(),
                "role": "assistant",
                "parts": [],
            }
        else:
            self._message = self._seed(message, message_id)
        self._parts: list[UIMessagePart] = self._message["parts"]
        for part in self._parts:
            self._index(part)

    @staticmethod
    def _seed(message: UIMessage, message_id: str | None) -> UIMessage:
        if message.get("role", "assistant") != "assistant":
            raise ValueError("MessageAccumulator can only continue an assistant message")
        if message_id is not None and message_id != message.get("id"):
            raise ValueError(
                f"message_id {message_id!r} does not match the seed message id {message.get('id')!r}"
            )
        seeded = dict(message)
        seeded.setdefault("id", message_id or new_message_id())
        seeded.setdefault("role", "assistant")
        parts = [dict(part) for part in message.get("parts") or ()]
        for part in parts:
            if part.get("type") in ("text", "reasoning") and part.get("state") == "streaming":
                part["state"] = "done"
        seeded["parts"] = parts
        if isinstance(seeded.get("metadata"), dict):
            seeded["metadata"] = dict(seeded["metadata"])
        return seeded

    def _index(self, part: UIMessagePart) -> None:
        tool_call_id = part.get("toolCallId")
        if isinstance(tool_call_id, str):
            self._tools[tool_call_id] = part
            return
        part_type = part.get("type")
        if isinstance(part_type, str) and part_type.startswith("data-") and part.get("id") is not None:
            self._data.setdefault((part_type, part["id"]), part)

    # ------------------------------------------------------------------ reading

    @property
    def message_id(self) -> str:
        return self._message["id"]

    @property
    def message(self) -> UIMessage:
        """The live assistant message (buffered text flushed first). Mutations by the caller are kept."""
        if self._pending:
            self._flush()
        return self._message

    @property
    def parts(self) -> list[UIMessagePart]:
        """The live parts list (buffered text flushed first)."""
        if self._pending:
            self._flush()
        return self._parts

    @property
    def metadata(self) -> Any:
        """The message metadata, or ``None`` when no chunk set any."""
        return self._message.get("metadata")

    def has_parts(self) -> bool:
        """True once the message holds at least one part (a message worth persisting)."""
        return bool(self._parts)

    def snapshot(self) -> UIMessage:
        """A deep copy of the current message, safe to hand to another task or to persist later."""
        return copy.deepcopy(self.message)

    def _flush(self) -> None:
        for open_part in self._pending:
            if open_part.pieces:
                open_part.part["text"] += "".join(open_part.pieces)
                open_part.pieces.clear()
        self._pending.clear()

    # ------------------------------------------------------------------ applying

    def apply(self, chunk: UIMessageChunk) -> ChunkResult:
        """Apply one chunk; see :class:`ChunkResult` for what the caller should do next."""
        chunk_type = chunk.get("type")
        if type(chunk_type) is not str:
            return _MALFORMED
        handler = self._handlers.get(chunk_type)
        if handler is not None:
            return handler(self, chunk)
        if chunk_type.startswith("data-"):
            return self._apply_data(chunk)
        return _UNKNOWN

    def apply_all(self, chunks: Iterable[UIMessageChunk]) -> UIMessage:
        """Apply every chunk of an iterable (e.g. a replayed stream buffer) and return :attr:`message`."""
        apply = self.apply
        for chunk in chunks:
            apply(chunk)
        return self.message

    # -- message-level chunks

    def _merge_metadata(self, value: Any, *, replace_top_level: bool = False) -> None:
        if value is None:
            return
        current = self._message.get("metadata")
        if isinstance(current, dict) and isinstance(value, dict):
            if replace_top_level:
                merged = dict(current)
                merged.update(value)
                self._message["metadata"] = merged
            else:
                self._message["metadata"] = merge_objects(current, value)
        else:
            self._message["metadata"] = value

    def _apply_start(self, chunk: UIMessageChunk) -> ChunkResult:
        message_id = chunk.get("messageId")
        if not self.continuation and isinstance(message_id, str) and message_id:
            self._message["id"] = message_id
        self._merge_metadata(chunk.get("messageMetadata"), replace_top_level=self.continuation)
        return _APPLIED

    def _apply_finish(self, chunk: UIMessageChunk) -> ChunkResult:
        reason = chunk.get("finishReason")
        if reason is not None:
            self.finish_reason = reason
        self._merge_metadata(chunk.get("messageMetadata"))
        return _APPLIED

    def _apply_message_metadata(self, chunk: UIMessageChunk) -> ChunkResult:
        self._merge_metadata(chunk.get("messageMetadata"))
        return _APPLIED

    def _apply_error(self, chunk: UIMessageChunk) -> ChunkResult:
        error_text = chunk.get("errorText")
        self.error_text = error_text if isinstance(error_text, str) else json.dumps(chunk, default=str)
        return _APPLIED

    def _apply_abort(self, chunk: UIMessageChunk) -> ChunkResult:
        self.aborted = True
        return _APPLIED

    def _apply_step_start(self, chunk: UIMessageChunk) -> ChunkResult:
        self._parts.append({"type": "step-start"})
        return _APPLIED

    def _apply_finish_step(self, chunk: UIMessageChunk) -> ChunkResult:
        # As in the AI SDK, a step boundary forgets which text/reasoning ids are open.
        self._active["text"].clear()
        self._active["reasoning"].clear()
        return _APPLIED

    # -- text and reasoning

    def _open(self, kind: str, chunk: UIMessageChunk, text: str = "") -> _OpenPart:
        part: UIMessagePart = {"type": kind, "text": text, "state": "streaming"}
        provider_metadata = chunk.get("providerMetadata")
        if provider_metadata is not None:
            part["providerMetadata"] = provider_metadata
        self._parts.append(part)
        open_part = _OpenPart(part)
        self._active[kind][chunk.get("id")] = open_part
        self._last_open[kind] = open_part
        return open_part

    def _find_open(self, kind: str, chunk: UIMessageChunk) -> _OpenPart | None:
        open_part = self._active[kind].get(chunk.get("id"))
        if open_part is None:
            # Chunks without (or with unknown) ids go to the latest part of that kind still streaming.
            last = self._last_open[kind]
            if last is not None and last.part.get("state") == "streaming":
                open_part = last
        return open_part

    @staticmethod
    def _merge_provider_metadata(part: UIMessagePart, chunk: UIMessageChunk) -> None:
        provider_metadata = chunk.get("providerMetadata")
        if isinstance(provider_metadata, dict):
            current = part.get("providerMetadata")
            part["providerMetadata"] = (
                {**current, **provider_metadata} if isinstance(current, dict) else provider_metadata
            )

    def _apply_text_start(self, chunk: UIMessageChunk) -> ChunkResult:
        self._open("text", chunk)
        return _APPLIED

    def _apply_reasoning_start(self, chunk: UIMessageChunk) -> ChunkResult:
        self._open("reasoning", chunk)
        return _APPLIED

    def _delta(self, kind: str, chunk: UIMessageChunk) -> ChunkResult:
        delta = chunk.get("delta")
        if not isinstance(delta, str):
            delta = ""
        open_part = self._find_open(kind, chunk)
        if open_part is None:
            # No start seen (a resumed stream): the delta opens a new part.
            open_part = self._open(kind, chunk, delta)
            return _APPLIED
        if delta:
            if not open_part.pieces:
                self._pending.append(open_part)
            open_part.pieces.append(delta)
        self._merge_provider_metadata(open_part.part, chunk)
        return _APPLIED

    def _apply_text_delta(self, chunk: UIMessageChunk) -> ChunkResult:
        return self._delta("text", chunk)

    def _apply_reasoning_delta(self, chunk: UIMessageChunk) -> ChunkResult:
        return self._delta("reasoning", chunk)

    def _end(self, kind: str, chunk: UIMessageChunk) -> ChunkResult:
        open_part = self._find_open(kind, chunk)
        if open_part is None:
            return _APPLIED
        if open_part.pieces:
            open_part.part["text"] += "".join(open_part.pieces)
            open_part.pieces.clear()
        open_part.part["state"] = "done"
        self._merge_provider_metadata(open_part.part, chunk)
        active = self._active[kind]
        for key, value in list(active.items()):
            if value is open_part:
                del active[key]
        return _APPLIED

    def _apply_text_end(self, chunk: UIMessageChunk) -> ChunkResult:
        return self._end("text", chunk)

    def _apply_reasoning_end(self, chunk: UIMessageChunk) -> ChunkResult:
        return self._end("reasoning", chunk)

    # -- files and sources

    def _apply_file(self, chunk: UIMessageChunk) -> ChunkResult:
        part: UIMessagePart = {"type": "file", "mediaType": chunk.get("mediaType"), "url": chunk.get("url")}
        if chunk.get("providerMetadata") is not None:
            part["providerMetadata"] = chunk["providerMetadata"]
        self._parts.append(part)
        return _APPLIED

    def _apply_source_url(self, chunk: UIMessageChunk) -> ChunkResult:
        part: UIMessagePart = {
            "type": "source-url",
            "sourceId": chunk.get("sourceId"),
            "url": chunk.get("url"),
        }
        for key in ("title", "providerMetadata"):
            if chunk.get(key) is not None:
                part[key] = chunk[key]
        self._parts.append(part)
        return _APPLIED

    def _apply_source_document(self, chunk: UIMessageChunk) -> ChunkResult:
        part: UIMessagePart = {
            "type": "source-document",
            "sourceId": chunk.get("sourceId"),
            "mediaType": chunk.get("mediaType"),
            "title": chunk.get("title"),
        }
        for key in ("filename", "providerMetadata"):
            if chunk.get(key) is not None:
                part[key] = chunk[key]
        self._parts.append(part)
        return _APPLIED

    # -- data parts

    def _apply_data(self, chunk: UIMessageChunk) -> ChunkResult:
        if chunk.get("transient"):
            return _APPLIED  # broadcast only; never part of the persisted message
        part_type: str = chunk["type"]
        data_id = chunk.get("id")
        if data_id is not None:
            existing = self._data.get((part_type, data_id))
            if existing is not None:
                existing["data"] = chunk.get("data")
                return _APPLIED
        part: UIMessagePart = {"type": part_type}
        if data_id is not None:
            part["id"] = data_id
            self._data[(part_type, data_id)] = part
        part["data"] = chunk.get("data")
        self._parts.append(part)
        return _APPLIED

    # -- tools

    def _new_tool_part(self, chunk: UIMessageChunk, tool_call_id: str, state: str) -> UIMessagePart:
        tool_name = chunk.get("toolName")
        part: UIMessagePart = {
            "type": "dynamic-tool" if chunk.get("dynamic") is True else f"tool-{tool_name}",
            "toolCallId": tool_call_id,
            "toolName": tool_name,
            "state": state,
        }
        self._copy_call_fields(part, chunk)
        self._parts.append(part)
        self._tools[tool_call_id] = part
        return part

    @staticmethod
    def _copy_call_fields(part: UIMessagePart, chunk: UIMessageChunk) -> None:
        if chunk.get("providerExecuted") is not None:
            part["providerExecuted"] = chunk["providerExecuted"]
        if chunk.get("providerMetadata") is not None:
            part["callProviderMetadata"] = chunk["providerMetadata"]
        if chunk.get("title") is not None:
            part["title"] = chunk["title"]

    def _settle_input(self, part: UIMessagePart, tool_call_id: str) -> None:
        """Make sure a part leaving the input phase carries an object ``input``."""
        if "input" not in part:
            raw = self._raw_input.get(tool_call_id)
            part["input"] = normalize_tool_input("".join(raw) if raw else None)
        self._raw_input.pop(tool_call_id, None)
        self._provisional.discard(tool_call_id)

    def _apply_tool_input_start(self, chunk: UIMessageChunk) -> ChunkResult:
        tool_call_id = chunk.get("toolCallId")
        if not isinstance(tool_call_id, str):
            return _MALFORMED
        if tool_call_id in self._tools:
            return _suppressed(tool_call_id, "duplicate-tool-start")
        self._new_tool_part(chunk, tool_call_id, "input-streaming")
        return _APPLIED

    def _apply_tool_input_delta(self, chunk: UIMessageChunk) -> ChunkResult:
        tool_call_id = chunk.get("toolCallId")
        if not isinstance(tool_call_id, str):
            return _MALFORMED
        part = self._tools.get(tool_call_id)
        if part is None:
            return _suppressed(tool_call_id, "unknown-tool-call")
        if part.get("state") != "input-streaming":
            return _suppressed(tool_call_id, "stale-tool-input")
        text = chunk.get("inputTextDelta")
        if isinstance(text, str):
            self._raw_input.setdefault(tool_call_id, []).append(text)
        if "input" in chunk:  # some emitters send a parsed partial input
            part["input"] = chunk["input"]
            self._provisional.add(tool_call_id)
        return _APPLIED

    def _apply_tool_input_available(self, chunk: UIMessageChunk) -> ChunkResult:
        tool_call_id = chunk.get("toolCallId")
        if not isinstance(tool_call_id, str):
            return _MALFORMED
        part = self._tools.get(tool_call_id)
        if part is None:
            part = self._new_tool_part(chunk, tool_call_id, "input-available")
            part["input"] = normalize_tool_input(chunk.get("input"))
            return _APPLIED
        state = part.get("state")
        if state == "input-streaming":
            part["state"] = "input-available"
            part["input"] = normalize_tool_input(chunk.get("input"))
            self._copy_call_fields(part, chunk)
            self._raw_input.pop(tool_call_id, None)
            self._provisional.discard(tool_call_id)
            return _APPLIED
        if state in _APPROVAL_STATES and ("input" not in part or tool_call_id in self._provisional):
            # The canonical input arrived after the approval request: record it, keep the approval state.
            part["input"] = normalize_tool_input(chunk.get("input"))
            self._provisional.discard(tool_call_id)
            self._raw_input.pop(tool_call_id, None)
        return _suppressed(tool_call_id, "stale-tool-input")

    def _apply_tool_input_error(self, chunk: UIMessageChunk) -> ChunkResult:
        tool_call_id = chunk.get("toolCallId")
        if not isinstance(tool_call_id, str):
            return _MALFORMED
        part = self._tools.get(tool_call_id)
        if part is None:
            part = self._new_tool_part(chunk, tool_call_id, "output-error")
            part["input"] = normalize_tool_input(chunk.get("input"))
            part["errorText"] = chunk.get("errorText")
            return _APPLIED
        if part.get("state") in TERMINAL_TOOL_STATES:
            return _suppressed(tool_call_id, "tool-already-settled")
        part["state"] = "output-error"
        part["input"] = normalize_tool_input(chunk["input"] if "input" in chunk else part.get("input"))
        part["errorText"] = chunk.get("errorText")
        self._copy_call_fields(part, chunk)
        self._raw_input.pop(tool_call_id, None)
        self._provisional.discard(tool_call_id)
        return _APPLIED

    def _apply_tool_approval_request(self, chunk: UIMessageChunk) -> ChunkResult:
        tool_call_id = chunk.get("toolCallId")
        if not isinstance(tool_call_id, str):
            return _MALFORMED
        part = self._tools.get(tool_call_id)
        if part is None:
            return ChunkResult(ChunkOutcome.CROSS_MESSAGE, tool_call_id)
        if part.get("state") in _ANSWERED_STATES:
            return _suppressed(tool_call_id, "tool-already-answered")
        if "input" not in part:
            raw = self._raw_input.get(tool_call_id)
            if raw:
                # The request is the first boundary after the deltas: the user must see what they approve.
                part["input"] = normalize_tool_input("".join(raw))
                self._provisional.add(tool_call_id)
        self._raw_input.pop(tool_call_id, None)
        part["state"] = "approval-requested"
        part["approval"] = _approval_from_chunk(chunk)
        return _APPLIED

    def _apply_tool_output_available(self, chunk: UIMessageChunk) -> ChunkResult:
        tool_call_id = chunk.get("toolCallId")
        if not isinstance(tool_call_id, str):
            return _MALFORMED
        part = self._tools.get(tool_call_id)
        if part is None:
            return ChunkResult(ChunkOutcome.CROSS_MESSAGE, tool_call_id)
        if is_settled_tool_part(part):
            return _suppressed(tool_call_id, "tool-already-settled")
        self._settle_input(part, tool_call_id)
        part["state"] = "output-available"
        part["output"] = chunk.get("output")
        if chunk.get("preliminary") is not None:
            part["preliminary"] = chunk["preliminary"]
        else:
            part.pop("preliminary", None)
        _copy_result_fields(part, chunk)
        return _APPLIED

    def _apply_tool_output_error(self, chunk: UIMessageChunk) -> ChunkResult:
        tool_call_id = chunk.get("toolCallId")
        if not isinstance(tool_call_id, str):
            return _MALFORMED
        part = self._tools.get(tool_call_id)
        if part is None:
            return ChunkResult(ChunkOutcome.CROSS_MESSAGE, tool_call_id)
        if is_settled_tool_part(part):
            return _suppressed(tool_call_id, "tool-already-settled")
        self._settle_input(part, tool_call_id)
        part["state"] = "output-error"
        part["errorText"] = chunk.get("errorText")
        part.pop("output", None)
        part.pop("preliminary", None)
        _copy_result_fields(part, chunk)
        return _APPLIED

    def _apply_tool_output_denied(self, chunk: UIMessageChunk) -> ChunkResult:
        tool_call_id = chunk.get("toolCallId")
        if not isinstance(tool_call_id, str):
            return _MALFORMED
        part = self._tools.get(tool_call_id)
        if part is None:
            return ChunkResult(ChunkOutcome.CROSS_MESSAGE, tool_call_id)
        if part.get("state") in _ANSWERED_STATES:
            # Never flip a settled call, nor a call the user approved, into a denial.
            return _suppressed(tool_call_id, "tool-already-answered")
        self._settle_input(part, tool_call_id)
        part["state"] = "output-denied"
        return _APPLIED


def _approval_from_chunk(chunk: UIMessageChunk) -> dict[str, Any]:
    approval: dict[str, Any] = {"id": chunk.get("approvalId")}
    if chunk.get("approvalDescriptor") is not None:
        approval["descriptor"] = chunk["approvalDescriptor"]
    if chunk.get("signature") is not None:
        approval["signature"] = chunk["signature"]
    return approval


def _copy_result_fields(part: UIMessagePart, chunk: UIMessageChunk) -> None:
    if chunk.get("providerExecuted") is not None:
        part["providerExecuted"] = chunk["providerExecuted"]
    if chunk.get("providerMetadata") is not None:
        part["resultProviderMetadata"] = chunk["providerMetadata"]


MessageAccumulator._handlers = {
    "start": MessageAccumulator._apply_start,
    "finish": MessageAccumulator._apply_finish,
    "message-metadata": MessageAccumulator._apply_message_metadata,
    "error": MessageAccumulator._apply_error,
    "abort": MessageAccumulator._apply_abort,
    "start-step": MessageAccumulator._apply_step_start,
    "step-start": MessageAccumulator._apply_step_start,
    "finish-step": MessageAccumulator._apply_finish_step,
    "text-start": MessageAccumulator._apply_text_start,
    "text-delta": MessageAccumulator._apply_text_delta,
    "text-end": MessageAccumulator._apply_text_end,
    "reasoning-start": MessageAccumulator._apply_reasoning_start,
    "reasoning-delta": MessageAccumulator._apply_reasoning_delta,
    "reasoning-end": MessageAccumulator._apply_reasoning_end,
    "file": MessageAccumulator._apply_file,
    "source-url": MessageAccumulator._apply_source_url,
    "source-document": MessageAccumulator._apply_source_document,
    "tool-input-start": MessageAccumulator._apply_tool_input_start,
    "tool-input-delta": MessageAccumulator._apply_tool_input_delta,
    "tool-input-available": MessageAccumulator._apply_tool_input_available,
    "tool-input-error": MessageAccumulator._apply_tool_input_error,
    "tool-approval-request": MessageAccumulator._apply_tool_approval_request,
    "tool-output-available": MessageAccumulator._apply_tool_output_available,
    "tool-output-error": MessageAccumulator._apply_tool_output_error,
    "tool-output-denied": MessageAccumulator._apply_tool_output_denied,
}
