"""Programmatic turns: ``run_turn`` and its shortcuts ``save_messages``, ``submit_messages``, ``chat`` and
``continue_last_turn``.

Why this module exists: server code (a scheduled task, a webhook, a parent agent talking to a sub-agent) must be
able to start a turn without a client, in three flavours — wait for the result (``save_messages``), hand it to
the durable submission queue and return at once (``submit_messages``), or stream its chunks to callbacks
(``chat``, also the sub-agent streaming API with ``on_start``/``on_event``/``on_done``/``on_error`` and
``cancel_chat``). All of them go through the agent's one turn queue, so they interleave with WebSocket and HTTP
turns in FIFO order. A blocking call made from inside a turn of the same agent would wait for itself, so it
raises; ``submit_messages`` and ``add_messages`` are allowed there.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any, Literal

from ..chat import new_message_id, user_message
from ._requests import check_message
from ._turn import TurnSpec, maybe_await
from ._types import ChatResult

if TYPE_CHECKING:
    from ._submissions import SubmissionInspection
    from ._think import Think

    _Base = Think
else:
    _Base = object

__all__ = ["TURN_MODES", "ProgrammaticTurns"]

logger = logging.getLogger("ponder.think")

TURN_MODES = ("wait", "submit", "stream")

MessagesInput = dict[str, Any] | str | Iterable[dict[str, Any]] | Callable[[list[dict[str, Any]]], Any]


class ProgrammaticTurns(_Base):
    """The programmatic-turn part of :class:`Think` (mixed into it; not useful on its own)."""

    def _check_not_nested(self, what: str) -> None:
        from ._think import _current_turn

        if _current_turn.get() is self:
            raise RuntimeError(
                f"{what} cannot be called from inside an active turn of the same agent (it would wait for "
                "itself); use submit_messages() or add_messages() instead"
            )

    async def run_turn(
        self,
        input: MessagesInput | None = None,
        *,
        continuation: bool = False,
        mode: Literal["wait", "submit", "stream"] = "wait",
        callback: Any = None,
        body: dict[str, Any] | None = None,
        submission_id: str | None = None,
        idempotency_key: str | None = None,
        metadata: Any = None,
    ) -> ChatResult | SubmissionInspection:
        """Run a turn on ``input`` (or continue the last assistant message with ``continuation=True``).

        ``mode="wait"`` ≡ ``save_messages`` (returns a ``ChatResult``), ``"submit"`` ≡ ``submit_messages``
        (returns a ``SubmissionInspection`` once the submission is stored), ``"stream"`` ≡ ``chat`` (chunks go
        to ``callback``). ``wait`` and ``stream`` raise inside an active turn of this agent.
        """
        if mode not in TURN_MODES:
            raise ValueError(f"mode must be one of {', '.join(TURN_MODES)}, not {mode!r}")
        if continuation:
            if input is not None:
                raise ValueError("run_turn() takes input or continuation=True, not both")
            if mode == "submit":
                raise ValueError("a continuation cannot be submitted; use mode='wait' or 'stream'")
            return await self.continue_last_turn(body, callback=callback)
        if mode != "submit" and (
            submission_id is not None or idempotency_key is not None or metadata is not None
        ):
            raise ValueError("submission_id, idempotency_key and metadata only apply to mode='submit'")
        if mode == "submit":
            if callable(input) and not isinstance(input, dict | str):
                raise ValueError("submit_messages() takes messages, not a function")
            return await self.submit_messages(
                input,  # type: ignore[arg-type]
                submission_id=submission_id,
                idempotency_key=idempotency_key,
                metadata=metadata,
            )
        if input is None or (isinstance(input, list | tuple) and not input):
            self._check_not_nested("run_turn()")
            return ChatResult("", "skipped")
        if mode == "stream":
            return await self.chat(input, callback)  # type: ignore[arg-type]
        return await self.save_messages(input)

    async def save_messages(self, messages: MessagesInput) -> ChatResult:
        """Store messages (a text, a message, a list, or ``fn(current) -> list``), run a turn, return its result."""
        return await self._programmatic(messages, None, "save_messages()")

    async def chat(self, message: MessagesInput, callback: Any = None) -> ChatResult:
        """Send a user message and stream the reply's chunks to ``callback``; return the turn's result.

        ``callback`` is a function of each chunk dict, or an object with any of ``on_start(info)`` (called
        first, with ``{"request_id": …}`` — keep it to ``cancel_chat`` later), ``on_event(chunk)``,
        ``on_done(result)``, ``on_error(error_text)`` and ``on_interrupted()``. Exactly one of the last three
        ends the call: ``on_interrupted()`` when the model stream stalled (``chat_stream_stall_timeout``) and the
        turn was handed to bounded recovery — the result's status is then ``"recovering"``, and the recovered
        answer lands in the transcript later, from a continuation this call does not wait for. This is also how
        a parent talks to a sub-agent: ``await (await self.sub_agent(Helper, "h")).chat("hi", callback)``.
        Chunks are also broadcast to the agent's own clients.
        """
        request_id = new_message_id()
        on_event = callback
        is_object = callback is not None and not callable(callback)
        if is_object:
            on_event = getattr(callback, "on_event", None) or getattr(callback, "on_chunk", None)
            on_start = getattr(callback, "on_start", None)
            if on_start is not None:
                await maybe_await(on_start({"request_id": request_id}))
        try:
            result = await self._programmatic(message, on_event, "chat()", request_id)
        except Exception as exc:
            if is_object and hasattr(callback, "on_error"):
                await maybe_await(callback.on_error(str(exc) or type(exc).__name__))
            raise
        if is_object:
            if result.status == "recovering" and hasattr(callback, "on_interrupted"):
                await maybe_await(callback.on_interrupted())
            elif result.status == "error" and hasattr(callback, "on_error"):
                await maybe_await(callback.on_error(result.error or "error"))
            elif hasattr(callback, "on_done"):
                await maybe_await(callback.on_done(result))
        return result

    def cancel_chat(self, request_id: str) -> bool:
        """Abort a programmatic turn (running or still queued) by the request id ``chat`` reported."""
        if self._abort(request_id):
            return True
        if any(spec.request_id == request_id for spec in self._inflight):
            self._cancelled.add(request_id)
            return True
        return False

    async def continue_last_turn(
        self, body: dict[str, Any] | None = None, *, callback: Any = None
    ) -> ChatResult:
        """Continue the last assistant message (a new step appended to it); ``skipped`` when the newest message
        is not from the assistant. ``body`` defaults to the last request's custom body."""
        self._check_not_nested("continue_last_turn()")
        await self._ensure_loaded()
        leaf_id = self.session.active_leaf_id
        leaf = self.session.get(leaf_id) if leaf_id is not None else None
        if leaf is None or leaf.get("role") != "assistant":
            return ChatResult("", "skipped", continuation=True)
        on_event = callback
        if callback is not None and not callable(callback):
            on_event = getattr(callback, "on_event", None) or getattr(callback, "on_chunk", None)
        spec = TurnSpec(
            request_id=new_message_id(),
            parent_id=leaf_id,
            continue_id=leaf_id,
            body=dict(body) if body is not None else self.last_body,
            callback=on_event,
            client_tools=self._config.get("client_tools"),
        )
        return await self._enqueue(spec)

    async def _programmatic(
        self, messages: Any, callback: Any, what: str, request_id: str | None = None
    ) -> ChatResult:
        self._check_not_nested(what)
        await self._ensure_loaded()
        if callable(messages) and not isinstance(messages, dict | str):
            messages = await maybe_await(messages(self.messages))
        items = _as_messages(messages)
        last = await self._store_incoming(items) if items else self.session.active_leaf_id
        if items:
            self._broadcast_messages()
        spec = TurnSpec(
            request_id=request_id or new_message_id(),
            parent_id=last,
            message_ids=_trailing_user_ids(items),
            callback=callback,
            client_tools=self._config.get("client_tools"),
        )
        return await self._enqueue(spec)


def _as_messages(value: Any) -> list[dict[str, Any]]:
    if value is None:
        return []
    if isinstance(value, str):
        return [user_message(value)]
    if isinstance(value, dict):
        value = [value]
    items: list[dict[str, Any]] = []
    for item in value:
        if isinstance(item, str):
            item = user_message(item)
        check_message(item)
        items.append(item)
    return items


def _trailing_user_ids(messages: list[dict[str, Any]]) -> list[str]:
    ids: list[str] = []
    for message in reversed(messages):
        if message.get("role") != "user":
            break
        ids.append(message["id"])
    ids.reverse()
    return ids
