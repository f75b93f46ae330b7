"""Compaction overlays: a span of the path replaced by one summary at read time.

Why this module exists: a long conversation eventually outgrows the model's context, but deleting or
rewriting old messages would break the append-only history (and the transcript users scroll through).
Instead a compaction is a separate row — ``(summary, from_message_id, to_message_id)`` — and whoever reads
the path *for the model* sees one synthetic summary message in place of that span. The stored messages stay
exactly as they were, so a bad summary can be undone by deleting one overlay row, and the UI still shows the
real transcript.

``create_compact_function`` is the stock policy: keep the first few messages (the task statement), keep a
token-budgeted tail of recent messages, summarize everything in between — folding in the previous summary so
one effective overlay grows over time instead of summaries of summaries piling up — and never cut between a
tool call and its result.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..models import ModelClient, ModelRequest, ModelSettings, TextDelta, UserMessage
from ._rows import estimate_message_tokens
from ._truncate import truncate_value

__all__ = [
    "SUMMARY_ID_PREFIX",
    "CompactFunction",
    "Compaction",
    "CompactionPlan",
    "build_summary_prompt",
    "create_compact_function",
    "plan_spans",
    "summarize_with_model",
    "summary_message",
]

SUMMARY_ID_PREFIX = "compaction_"

Summarize = Callable[[str], Awaitable[str]]
"""``async summarize(prompt) -> summary text``."""


@dataclass(frozen=True, slots=True)
class Compaction:
    """A stored overlay: at read time ``from_message_id … to_message_id`` (inclusive) become ``summary``."""

    id: str
    seq: int
    summary: str
    from_message_id: str
    to_message_id: str
    created_at: float


@dataclass(frozen=True, slots=True)
class CompactionPlan:
    """What a compact function returns: the summary and the span of the active path it replaces."""

    summary: str
    from_message_id: str
    to_message_id: str


CompactFunction = Callable[[list[dict[str, Any]]], Awaitable[CompactionPlan | None]]
"""``async fn(view) -> CompactionPlan | None``; ``view`` is the active path with overlays already applied."""


def summary_message(overlay: Compaction) -> dict[str, Any]:
    """The synthetic assistant message the model sees in place of an overlay's span."""
    return {
        "id": f"{SUMMARY_ID_PREFIX}{overlay.id}",
        "role": "assistant",
        "parts": [{"type": "text", "text": overlay.summary}],
        "metadata": {
            "compaction": {
                "id": overlay.id,
                "fromMessageId": overlay.from_message_id,
                "toMessageId": overlay.to_message_id,
            }
        },
    }


def _overlay_info(message: Mapping[str, Any]) -> Mapping[str, Any] | None:
    metadata = message.get("metadata")
    info = metadata.get("compaction") if isinstance(metadata, Mapping) else None
    if isinstance(info, Mapping) and str(message.get("id", "")).startswith(SUMMARY_ID_PREFIX):
        return info
    return None


def plan_spans(
    positions: Mapping[str, int], overlays: Sequence[Compaction]
) -> list[tuple[int, int, Compaction]]:
    """The overlays that apply to a path, as non-overlapping ``(start, end, overlay)`` index spans.

    An overlay applies when both of its ends are on the path in order. Walking the path from the root, at a
    span start the newest overlay starting there wins; overlays starting inside a span already taken are
    ignored (an older, smaller summary that the newer one absorbed).
    """
    best: dict[int, tuple[int, Compaction]] = {}
    for overlay in overlays:
        start = positions.get(overlay.from_message_id)
        end = positions.get(overlay.to_message_id)
        if start is None or end is None or end < start:
            continue
        current = best.get(start)
        if current is None or overlay.seq > current[1].seq:
            best[start] = (end, overlay)
    spans: list[tuple[int, int, Compaction]] = []
    reached = -1
    for start in sorted(best):
        if start <= reached:
            continue
        end, overlay = best[start]
        spans.append((start, end, overlay))
        reached = end
    return spans


# -- the stock compact function ------------------------------------------------------------------------

_INSTRUCTIONS = """\
Summarize the conversation excerpt below. Your summary replaces those messages in the context of an \
ongoing conversation, so keep every fact, decision, name, number, file path, tool result and unresolved \
question that later turns may need, and drop pleasantries. Write it with these sections:

## Topic
## Key Points
## Current State
## Open Items"""

_TOOL_PREVIEW_CHARS = 500


def _render(message: Mapping[str, Any]) -> str:
    lines: list[str] = []
    for part in message.get("parts") or ():
        if not isinstance(part, Mapping):
            continue
        kind = str(part.get("type", ""))
        if kind == "text" and part.get("text"):
            lines.append(str(part["text"]))
        elif kind == "file":
            lines.append(
                f"[file {part.get('mediaType') or 'unknown type'} {part.get('filename') or ''}]".strip()
            )
        elif kind == "dynamic-tool" or kind.startswith("tool-"):
            name = part.get("toolName") if kind == "dynamic-tool" else kind[5:]
            args = json.dumps(truncate_value(part.get("input"), _TOOL_PREVIEW_CHARS), ensure_ascii=False)
            if "output" in part:
                outcome = truncate_value(part.get("output"), _TOOL_PREVIEW_CHARS)
                result = outcome if isinstance(outcome, str) else json.dumps(outcome, ensure_ascii=False)
            elif part.get("errorText"):
                result = f"error: {part['errorText']}"
            else:
                result = f"({part.get('state', 'pending')})"
            lines.append(f"[tool {name}({args}) -> {result}]")
    return f"{message.get('role', 'unknown')}: " + "\n".join(lines)


def build_summary_prompt(messages: Sequence[Mapping[str, Any]], previous_summary: str | None = None) -> str:
    """The prompt the stock compact function sends to ``summarize`` (previous summary folded in)."""
    sections = [_INSTRUCTIONS]
    if previous_summary:
        sections.append(
            "The earlier part of the conversation was already summarized as follows. Fold it into your "
            f"summary; do not drop anything from it that still matters.\n\n<previous-summary>\n"
            f"{previous_summary}\n</previous-summary>"
        )
    transcript = "\n\n".join(_render(message) for message in messages)
    sections.append(f"<conversation>\n{transcript}\n</conversation>")
    return "\n\n".join(sections)


def _tool_call_ids(message: Mapping[str, Any]) -> set[str]:
    ids: set[str] = set()
    for part in message.get("parts") or ():
        if isinstance(part, Mapping):
            call_id = part.get("toolCallId")
            if isinstance(call_id, str) and call_id:
                ids.add(call_id)
    return ids


def _has_open_tool_call(message: Mapping[str, Any]) -> bool:
    for part in message.get("parts") or ():
        if (
            isinstance(part, Mapping)
            and part.get("toolCallId")
            and part.get("state")
            not in (
                "output-available",
                "output-error",
                "output-denied",
            )
        ):
            return True
    return False


def create_compact_function(
    summarize: Summarize,
    *,
    keep_recent_tokens: int = 20_000,
    protect_head: int = 3,
    min_tail_messages: int = 2,
    token_counter: Callable[[Mapping[str, Any]], int] | None = None,
) -> CompactFunction:
    """The stock compaction policy (see the module docstring).

    ``summarize`` is an async function of a prompt returning the summary text (see
    :func:`summarize_with_model`). The first ``protect_head`` messages and a tail of at least
    ``min_tail_messages`` and about ``keep_recent_tokens`` tokens stay; the middle is summarized. Span ends
    move so that no tool call id appears on both sides of a boundary and an unsettled tool call is never
    hidden. When the middle starts with an earlier summary, the new overlay starts where that one started
    and the earlier summary is part of the prompt. Returns ``None`` when there is nothing to compact.
    """
    count = token_counter or estimate_message_tokens

    async def compact(view: list[dict[str, Any]]) -> CompactionPlan | None:
        n = len(view)
        head = min(max(0, protect_head), n)
        tail = n
        used = 0
        while tail > head:
            cost = count(view[tail - 1])
            if n - tail >= min_tail_messages and used + cost > keep_recent_tokens:
                break
            used += cost
            tail -= 1
        # Never cut between a tool call and its result, nor hide a call that is still waiting for one.
        while tail > head:
            last = view[tail - 1]
            later = set().union(*(_tool_call_ids(m) for m in view[tail:])) if tail < n else set()
            if _has_open_tool_call(last) or (_tool_call_ids(last) & later):
                tail -= 1
            else:
                break
        while head < tail and head > 0:
            earlier = set().union(*(_tool_call_ids(m) for m in view[:head]))
            if _tool_call_ids(view[head]) & earlier:
                head += 1
            else:
                break
        middle = view[head:tail]
        real = [m for m in middle if _overlay_info(m) is None]
        if not real:
            return None
        previous = [m for m in middle if _overlay_info(m) is not None]
        previous_summary = "\n\n".join(
            str(p.get("text", "")) for m in previous for p in m.get("parts") or () if isinstance(p, Mapping)
        )
        first_info = _overlay_info(middle[0])
        last_info = _overlay_info(middle[-1])
        from_id = str(first_info["fromMessageId"]) if first_info else str(middle[0]["id"])
        to_id = str(last_info["toMessageId"]) if last_info else str(middle[-1]["id"])
        summary = (await summarize(build_summary_prompt(real, previous_summary or None))).strip()
        if not summary:
            return None
        return CompactionPlan(summary, from_id, to_id)

    return compact


def summarize_with_model(
    model: ModelClient,
    *,
    system: str | None = "You write faithful, compact summaries of conversations.",
    settings: ModelSettings | None = None,
) -> Summarize:
    """A ``summarize`` function for :func:`create_compact_function` that asks ``model`` for the summary."""

    async def summarize(prompt: str) -> str:
        request = ModelRequest(
            system=system, messages=[UserMessage(prompt)], settings=settings or ModelSettings()
        )
        pieces: list[str] = []
        async for event in model.stream(request):
            if isinstance(event, TextDelta):
                pieces.append(event.text)
        return "".join(pieces).strip()

    return summarize
