"""The live part of the resume handshake: attaching a connection to a turn that is streaming or about to.

Why this module exists: the stock clients never read a stream they did not start unless the server offers it.
After ``cf_agent_tool_result`` with ``autoContinue`` the hook sends ``cf_agent_stream_resume_request`` and waits
to be told about the continuation; a tab that connects mid-turn asks the same question. The answer follows
Cloudflare's ``ResumeHandshake`` (``reference/js-client-protocol.md`` §7):

- a turn is streaming → ``cf_agent_stream_resuming {id}``; the connection gets no live chunks until it ACKs,
  then every chunk so far is replayed (``replay: true``, original ``seq``), then ``replayComplete``, then
  live frames;
- a turn is accepted (queued, debouncing, or a client-tool continuation waiting for its batch) but not yet
  streaming → the connection is *parked* with ``cf_agent_stream_pending``; when the next stream starts it
  gets ``cf_agent_stream_resuming``; if the queue empties without a stream it gets ``resume_none``;
- otherwise → ``cf_agent_stream_resume_none {reason: "idle"}``, after ``cf_agent_chat_recovering
  {recovering: false}`` (a reconnecting client may still show a recovery whose end it missed).

The chunks replayed for a running turn are held in memory. After a restart, a stream the dead process left
``streaming`` (no live producer) is offered the same way: its durable chunks replay, and the closing
``{done: true, replay: true}`` is sent once recovery has decided (the retried or continued turn then streams
live under the same request id). A turn that ended in an error nobody saw (recovery gave up) is replayed to
connecting clients as its chunks then ``{body: errorText, done: true, error: true}`` until the next turn.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..runtime import Connection
    from ._think import Think
    from ._turn import Turn

__all__ = ["ResumeHandshake"]

_RESPONSE = "cf_agent_use_chat_response"


class ResumeHandshake:
    """Which connections wait for an ACK or for a stream to start, and the frames that move them along."""

    __slots__ = ("agent", "awaiting_ack", "parked")

    def __init__(self, agent: Think) -> None:
        self.agent = agent
        #: Connections offered the running stream that have not ACKed: live chunks skip them.
        self.awaiting_ack: set[str] = set()
        #: Connection id → the probe id it asked with, for connections waiting for a stream to start.
        self.parked: dict[str, str | None] = {}

    # -- client events ----------------------------------------------------------------------------

    def on_connect(self, connection: Connection) -> bool:
        """Offer a running stream to a new connection; return whether to send the transcript."""
        recovering = self.agent._recovery.recovering_frame()
        if recovering is not None:
            connection.send(recovering)
        turn = self.agent._streaming
        if turn is not None:
            if turn.spec.recovery and turn.spec.continuation:
                # A recovered continuation appends to the stored partial: the client needs it first.
                connection.send(self.agent._messages_frame_text(connect=True))
            connection.send({"type": "cf_agent_stream_resuming", "id": turn.request_id})
            self.awaiting_ack.add(connection.id)
            return False  # the transcript would clobber the message the client rebuilds from the replay
        stored = self.agent._recovery.offer()
        if stored is not None:
            connection.send({"type": "cf_agent_stream_resuming", "id": stored})
            self.awaiting_ack.add(connection.id)
            return False
        pending = self.agent._pending_request_for(connection.id)
        if pending is not None:
            self.parked[connection.id] = None
            connection.send({"type": "cf_agent_stream_pending", "id": pending})
        return True

    def on_probe(self, connection: Connection, probe_id: str | None) -> None:
        """Answer ``cf_agent_stream_resume_request``."""
        turn = self.agent._streaming
        if turn is not None:
            owner = turn.spec.owner if turn.spec.continuation else None
            if owner is not None and owner != connection.id and self.agent.get_connection(owner) is not None:
                self._send(
                    connection,
                    {"type": "cf_agent_stream_resume_none", "reason": "continuation-owned"},
                    probe_id,
                )
                return
            self._send(connection, {"type": "cf_agent_stream_resuming", "id": turn.request_id}, probe_id)
            self.awaiting_ack.add(connection.id)
            return
        stored = self.agent._recovery.offer()
        if stored is not None:
            self._send(connection, {"type": "cf_agent_stream_resuming", "id": stored}, probe_id)
            self.awaiting_ack.add(connection.id)
            return
        pending = self.agent._pending_request_for(connection.id)
        if pending is not None:
            self.parked[connection.id] = probe_id
            self._send(connection, {"type": "cf_agent_stream_pending", "id": pending}, probe_id)
            return
        # Idle: no turn runs or waits to run, so no recovery is in progress either. The stock hook probes after
        # every reconnect; if it saw "recovering" and missed the clear (it was offline, or the process died
        # first), nothing else would ever reset its ``isRecovering``.
        connection.send({"type": "cf_agent_chat_recovering", "recovering": False})
        self._send(connection, {"type": "cf_agent_stream_resume_none", "reason": "idle"}, probe_id)

    def on_ack(self, connection: Connection, request_id: str) -> None:
        """Answer ``cf_agent_stream_resume_ack``: replay the running stream, or end an unknown one."""
        turn = self.agent._streaming
        if turn is None or turn.request_id != request_id:
            if self.agent._recovery.replay(connection, request_id):
                return
            self.awaiting_ack.discard(connection.id)
            connection.send({"type": _RESPONSE, "id": request_id, "body": "", "done": True, "replay": True})
            return
        continuation = turn.spec.continuation
        for seq, body in enumerate(turn.bodies):
            frame: dict[str, Any] = {"type": _RESPONSE, "id": request_id, "body": body, "done": False}
            if continuation:
                frame["continuation"] = True
            frame["replay"] = True
            frame["seq"] = seq
            connection.send(frame)
        complete: dict[str, Any] = {"type": _RESPONSE, "id": request_id, "body": "", "done": False}
        if continuation:
            complete["continuation"] = True
        complete["replay"] = True
        complete["replayComplete"] = True
        connection.send(complete)
        self.awaiting_ack.discard(connection.id)

    def forget(self, connection_id: str) -> None:
        self.awaiting_ack.discard(connection_id)
        self.parked.pop(connection_id, None)

    # -- turn events ------------------------------------------------------------------------------

    def stream_started(self, turn: Turn) -> None:
        """A turn sends its first chunk: parked connections are offered it."""
        if not self.parked:
            return
        parked, self.parked = self.parked, {}
        for connection_id, probe_id in parked.items():
            connection = self.agent.get_connection(connection_id)
            if connection is None:
                continue
            self._send(connection, {"type": "cf_agent_stream_resuming", "id": turn.request_id}, probe_id)
            self.awaiting_ack.add(connection_id)

    def stream_ended(self) -> None:
        """The stream is over: connections that never ACKed get the terminal frames like everyone else."""
        self.awaiting_ack.clear()

    def release_parked(self) -> None:
        """No stream is coming: parked connections are told ``resume_none``."""
        if not self.parked:
            return
        parked, self.parked = self.parked, {}
        for connection_id, probe_id in parked.items():
            connection = self.agent.get_connection(connection_id)
            if connection is not None:
                self._send(connection, {"type": "cf_agent_stream_resume_none", "reason": "idle"}, probe_id)

    @staticmethod
    def _send(connection: Connection, frame: dict[str, Any], probe_id: str | None) -> None:
        if probe_id is not None:
            frame["probeId"] = probe_id
        connection.send(frame)
