"""The WebSocket chat protocol: the ``cf_agent_*`` frames a client sends, and the auto-continuation barrier.

Why this module exists: ``Think`` owns the turn lifecycle; this mixin is the part of it that reads client
frames (``reference/js-client-protocol.md`` §5.2) and turns them into calls on that lifecycle: a chat
request goes to :meth:`Think.handle_chat_request` (the same path HTTP uses), cancel/clear/resume frames to
the queue and the :class:`~ponder.think._resume.ResumeHandshake`, and tool results and approvals are applied
to the message that holds the call, continuing the turn once every call of the batch is answered.
"""

from __future__ import annotations

import copy
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..chat import apply_tool_approval, apply_tool_result, find_tool_part, is_tool_part, new_message_id
from ..runtime import Connection
from ._client_tools import parse_client_tools
from ._requests import ChatRequestError
from ._turn import TurnSpec
from ._types import ChatErrorContext

if TYPE_CHECKING:
    from ._think import Think

    _Base = Think
else:
    _Base = object

__all__ = ["RESPONSE", "ChatProtocol", "PendingContinuation", "batch_settled", "text_or"]

logger = logging.getLogger("ponder.think")

RESPONSE = "cf_agent_use_chat_response"
_WAITING_STATES = frozenset({"input-streaming", "input-available", "approval-requested"})
_RESPONSE = RESPONSE


@dataclass(slots=True)
class PendingContinuation:
    """A continuation asked for (``autoContinue``) whose tool batch is not settled yet."""

    message_id: str
    request_id: str
    owner: str | None


def batch_settled(message: dict[str, Any]) -> bool:
    """No tool call of the message still waits for input, a result or an approval."""
    return not any(is_tool_part(p) and p.get("state") in _WAITING_STATES for p in message.get("parts") or ())


def text_or(replacement: Any, default: str) -> str:
    """``replacement`` when ``on_chat_error`` returned a non-empty string, else ``default``."""
    return replacement if isinstance(replacement, str) and replacement else default


class ChatProtocol(_Base):
    """The frame handlers of :class:`Think` (mixed into it; not useful on its own)."""

    async def _on_connected(self, connection: Connection) -> None:
        await self._ensure_loaded()
        if self._resume.on_connect(connection):
            connection.send(self._messages_frame_text(connect=True))

    async def _on_disconnected(self, connection: Connection) -> None:
        self._resume.forget(connection.id)

    async def _on_chat_request_frame(self, connection: Connection, frame: dict[str, Any]) -> None:
        request_id = frame.get("id")
        init = frame.get("init")
        if not isinstance(request_id, str) or not request_id or not isinstance(init, dict):
            logger.info("%r: dropped a chat request without an id or init from %s", self, connection.id)
            return
        if str(init.get("method", "POST")).upper() != "POST" or "body" not in init:
            return
        try:
            if not isinstance(init["body"], str):
                error = ValueError("Invalid chat request: init.body must be a JSON string")
                replacement = await self._report_error(error, ChatErrorContext("parse", request_id))
                raise ChatRequestError(text_or(replacement, str(error)))
            admission = await self.handle_chat_request(init["body"], request_id=request_id, origin=connection)
        except ChatRequestError as exc:
            connection.send(
                {
                    "type": _RESPONSE,
                    "id": request_id,
                    "body": exc.message,
                    "done": True,
                    "error": True,
                    "outcome": "error",
                }
            )
            return
        if admission.status == "dropped":
            # Roll the client back to the stored transcript, then end its request.
            connection.send(self._messages_frame_text())
            connection.send(
                {"type": _RESPONSE, "id": request_id, "body": "", "done": True, "outcome": "skipped"}
            )

    async def _on_cancel_frame(self, connection: Connection, frame: dict[str, Any]) -> None:
        request_id = frame.get("id")
        if not isinstance(request_id, str) or self._abort(request_id):
            return
        if any(spec.request_id == request_id for spec in self._inflight):
            self._cancelled.add(request_id)  # still queued: skipped when it reaches the head
            self._wake_submits()

    async def _on_clear_frame(self, connection: Connection, frame: dict[str, Any]) -> None:
        await self._clear(exclude=(connection,))

    async def _on_resume_request_frame(self, connection: Connection, frame: dict[str, Any]) -> None:
        await self._ensure_loaded()
        probe = frame.get("probeId")
        self._resume.on_probe(connection, probe if isinstance(probe, str) else None)

    async def _on_resume_ack_frame(self, connection: Connection, frame: dict[str, Any]) -> None:
        request_id = frame.get("id")
        if isinstance(request_id, str):
            self._resume.on_ack(connection, request_id)

    async def _on_client_messages_frame(self, connection: Connection, frame: dict[str, Any]) -> None:
        if not self._warned_client_messages:
            self._warned_client_messages = True
            logger.warning(
                "%r: ignoring cf_agent_chat_messages from a client (the server owns the transcript)", self
            )

    async def _on_tool_result_frame(self, connection: Connection, frame: dict[str, Any]) -> None:
        call_id = frame.get("toolCallId")
        if not isinstance(call_id, str):
            return
        await self._ensure_loaded()
        if frame.get("clientTools") is not None:
            try:
                await self._config.set("client_tools", parse_client_tools(frame["clientTools"]) or None)
            except ValueError as exc:
                logger.info("%r: ignoring invalid clientTools in a tool result: %s", self, exc)
        state = "output-error" if frame.get("state") == "output-error" else "output-available"
        error = frame.get("errorText")

        def apply(message: dict[str, Any]) -> dict[str, Any] | None:
            return apply_tool_result(
                message,
                call_id,
                output=frame.get("output"),
                state=state,  # type: ignore[arg-type]
                error_text=error if isinstance(error, str) else None,
            )

        await self._apply_interaction(call_id, apply, frame.get("autoContinue") is True, connection)

    async def _on_tool_approval_frame(self, connection: Connection, frame: dict[str, Any]) -> None:
        call_id = frame.get("toolCallId")
        if not isinstance(call_id, str):
            return
        approved = frame.get("approved") is True
        reason = frame.get("reason") if isinstance(frame.get("reason"), str) else None
        await self._apply_interaction(
            call_id,
            lambda message: apply_tool_approval(message, call_id, approved, reason=reason),
            frame.get("autoContinue") is True,
            connection,
        )

    async def _apply_interaction(
        self,
        call_id: str,
        apply: Callable[[dict[str, Any]], dict[str, Any] | None],
        auto_continue: bool,
        connection: Connection | None = None,
    ) -> None:
        """Apply a tool result or approval — to the message a running turn is building if it holds the call,
        else to the stored one — broadcast it, and continue the turn once its tool batch is settled."""
        await self._ensure_loaded()
        async with self._interaction_lock:
            updated: dict[str, Any] | None = None
            for turn in list(self._turns.values()):
                if call_id in turn.server_calls:
                    logger.info("%r: ignoring a client answer for server tool call %s", self, call_id)
                    return
                if apply(turn.acc.message) is not None:  # mutated in place; persisted when the turn ends
                    updated = copy.deepcopy(turn.acc.message)
                    break
            if updated is None:
                path = self.session.active_messages()
                found = find_tool_part(path, call_id)
                if found is None and self.session.hydration.truncated:
                    path = await self.session.get_history()
                    found = find_tool_part(path, call_id)
                if found is None:
                    return
                message = copy.deepcopy(path[found[0]])
                if apply(message) is None:
                    return
                await self.session.upsert(message)
                updated = message
            self.broadcast({"type": "cf_agent_message_updated", "message": updated})
            self._after_interaction(updated, auto_continue, connection.id if connection is not None else None)

    def _after_interaction(self, message: dict[str, Any], auto_continue: bool, owner: str | None) -> None:
        """The auto-continuation barrier.

        ``autoContinue`` records a pending continuation of ``message``; any later answer for the same message
        (even one sent with ``autoContinue: false``, such as an errored client result) re-checks it, and so
        does the end of the turn that was still building the message. The continuation is queued only when no
        tool call of the message still waits, so parallel calls wait for every answer, and at most one per
        message waits in the queue (it sees every answer given before it starts).
        """
        message_id = message["id"]
        pending = self._pending_continuation
        if auto_continue and (pending is None or pending.message_id != message_id):
            pending = PendingContinuation(message_id, new_message_id(), owner)
            self._pending_continuation = pending
        if pending is None or pending.message_id != message_id:
            return
        if message.get("role") != "assistant" or not batch_settled(message):
            return  # wait for the rest of the batch
        self._pending_continuation = None
        if message_id in self._queued_continuations:
            return  # a continuation of this message is queued and will see this answer too
        self._queued_continuations.add(message_id)
        spec = TurnSpec(
            request_id=pending.request_id,
            continue_id=message_id,
            owner=pending.owner,
            body=self._config.get("body") or {},
            client_tools=self._config.get("client_tools"),
        )
        self._admit(spec)
