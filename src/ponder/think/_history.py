"""Think's transcript: a :class:`ponder.sessions.Session`, its events as frames, branches and search.

Why this module exists: Think keeps its messages in a ``Session`` (branches, compaction overlays, search,
read-time truncation, a hydration budget, media eviction). This mixin owns that session — its settings, the
``configure_session`` hook, opening it, turning its events into ``cf_agent_session`` frames, the branch and
search RPCs — and the rule for a client's copy of a stored reply (the server's version wins; only answers to
calls still waiting are taken). The turn lifecycle stays in ``_think.py``.
"""

from __future__ import annotations

import asyncio
import copy
import logging
from typing import TYPE_CHECKING, Any, ClassVar

from ..chat import is_tool_part
from ..runtime import callable
from ..sessions import (
    DEFAULT_HYDRATION_BYTE_BUDGET,
    MediaEviction,
    Session,
    SessionEvent,
    search_history_tool,
)
from ..storage import Migration, register_migrations

if TYPE_CHECKING:
    from ._think import Think

    _Base = Think
else:
    _Base = object

__all__ = ["SessionHistory", "take_client_answers"]

logger = logging.getLogger("ponder.think")

# Think's first message table (the ``MessageTree`` era). Nothing writes it any more; the migration stays so
# stores keep one history of the ``think`` component, and ``Session.open()`` imports its rows once per agent.
register_migrations(
    Migration(
        component="think",
        version=1,
        sql="""
        CREATE TABLE IF NOT EXISTS ponder_think_messages (
            agent_id TEXT NOT NULL,
            id TEXT NOT NULL,
            parent_id TEXT,
            role TEXT NOT NULL,
            message TEXT NOT NULL,
            created_at REAL NOT NULL,
            seq INTEGER NOT NULL,
            PRIMARY KEY (agent_id, id)
        );
        CREATE INDEX IF NOT EXISTS ponder_think_messages_seq ON ponder_think_messages (agent_id, seq)
        """,
    )
)

_CLIENT_ANSWERABLE = frozenset({"input-available", "approval-requested"})
_CLIENT_ANSWERS = frozenset({"output-available", "output-error", "approval-responded", "output-denied"})
_ANSWER_KEYS = ("state", "output", "errorText", "approval", "preliminary")


class SessionHistory(_Base):
    """The session part of :class:`Think` (mixed into it; not useful on its own)."""

    #: Bytes of stored messages a wake loads into memory (the newest part of the active path); older ones
    #: stay in the store (``get_history()`` reads them). ``0`` or ``math.inf`` loads everything.
    hydration_byte_budget: ClassVar[float] = DEFAULT_HYDRATION_BYTE_BUDGET
    #: The model sees older tool outputs and long texts cut; the cutoff moves in steps of this many messages,
    #: so the prompt prefix stays byte-identical between moves (provider prompt caches keep hitting).
    truncation_step: ClassVar[float] = 8
    #: Move large inline media of aged messages out to files (``True``, ``False`` or a ``MediaEviction``).
    media_eviction: ClassVar[MediaEviction | bool] = True
    #: Give the model a ``search_history`` tool over every stored message of this agent.
    search_tool: ClassVar[bool] = True
    #: Seconds a turn waits for a background compaction that is running when it starts (so the model sees
    #: the summary rather than the whole span); past this the turn goes on with the uncompacted history.
    compaction_wait: ClassVar[float] = 30.0

    session: Session

    def _make_session(self) -> Session:
        session = Session(
            self.host.store,
            self.id,
            hydration_byte_budget=self.hydration_byte_budget,
            truncation_step=self.truncation_step,
            media_eviction=self.media_eviction,
        )
        session.add_listener(self._on_session_event)
        return session

    def configure_session(self, session: Session) -> Any:
        """Called once per wake before the session opens (may be async): set up compaction here, e.g.
        ``session.on_compaction(create_compact_function(summarize_with_model(model))).compact_after(100_000)``.
        """
        return None

    def _on_session_event(self, event: SessionEvent) -> None:
        if event.kind == "status":
            self.broadcast(self.session.status_frame())
        elif event.kind == "compact":
            self._context_compacted()  # rebuilds the frozen system prompt
        elif event.kind == "compaction_error":
            self.broadcast(Session.error_frame(event.data.get("error") or "compaction failed"))

    def _evicted(self) -> None:
        # Drop the message index (10,000 messages are ~40,000 objects in the agent's reference cycles); an
        # evicted instance someone still holds reloads it from the store on its next async use.
        self.session.release()
        self._loaded = False
        super()._evicted()  # type: ignore[misc]

    def _is_idle(self, now: float, idle_timeout: float) -> bool:
        # An agent is evicted only once its session has no background pass running (compaction, eviction):
        # eviction has no hook of its own, and a pass must not outlive the instance that owns the session.
        return not self.session._tasks and super()._is_idle(now, idle_timeout)  # type: ignore[misc]

    def _builtin_tools(self) -> dict[str, Any]:
        """Tools every turn gets before ``get_tools()`` (which may replace them by name)."""
        if not self.search_tool:
            return {}
        tool = self.__dict__.get("_search_tool")
        if tool is None:
            tool = self.__dict__["_search_tool"] = search_history_tool(self.session)
        return {tool.name: tool}

    async def _await_compaction(self) -> None:
        """Wait (bounded by ``compaction_wait``) for a background compaction that is running right now."""
        session = self.session
        if session.status()["phase"] != "compacting" or not session._tasks:
            return
        _, pending = await asyncio.wait(list(session._tasks), timeout=max(0.0, float(self.compaction_wait)))
        if pending:
            logger.warning(
                "%r: compaction still running after %ss; the turn goes on without it",
                self,
                self.compaction_wait,
            )

    # -- reading --------------------------------------------------------------------------------------

    async def _full_path(self) -> list[dict[str, Any]]:
        """The whole active path: the hydrated window (live dicts), or every message read from the store
        when the window is shorter than the path."""
        if self.session.hydration.truncated:
            return await self.session.get_history()
        return self.session.active_messages()

    async def _stored(self, message_id: str) -> dict[str, Any] | None:
        """A stored message: the cached one (live, read-only) or one read from the store."""
        cached = self.session.get(message_id)
        if cached is not None or message_id not in self.session:
            return cached
        return await self.session.get_message(message_id)

    async def get_branches(self, message_id: str) -> list[dict[str, Any]]:
        """Every answer stored under ``message_id`` (regenerations are siblings), oldest first."""
        await self._ensure_loaded()
        return await self.session.get_branches(message_id)

    # -- RPCs -----------------------------------------------------------------------------------------

    @callable
    async def set_active_branch(self, message_id: str) -> list[dict[str, Any]]:
        """Show the branch through ``message_id`` (its newest message becomes the active leaf) to every client.

        The choice is stored and lasts until the next message is added. Returns the new active path.
        """
        await self._ensure_loaded()
        if not isinstance(message_id, str) or message_id not in self.session:
            raise KeyError(f"unknown message id {message_id!r}")
        if self._busy():
            raise RuntimeError("cannot switch branches while a turn is queued or running")
        await self.session.set_active_leaf(message_id)
        await self._restore_loaded_skills()  # type: ignore[attr-defined]  # the skills this branch loaded
        frame = self._messages_frame()
        self.broadcast(frame)
        return copy.deepcopy(frame["messages"])

    @callable
    async def search_messages(self, query: str, limit: int = 10) -> list[dict[str, Any]]:
        """Full-text search over every stored message: ``[{"id", "role", "content"}]``, best first."""
        await self._ensure_loaded()
        if not isinstance(query, str):
            raise TypeError("query must be a string")
        limit = max(1, min(int(limit), 100))
        return await self.session.search(query, limit)


def take_client_answers(stored: dict[str, Any], incoming: dict[str, Any]) -> dict[str, Any]:
    """The server's copy of an assistant message it already stores, plus the client's answers.

    A client's copy of a stored reply is never trusted as a whole: after ``stop()`` a hook sends back its own
    partial copy (fewer chunks, text still ``streaming``), which must not replace the partial the server
    stored. Only a tool call the server still has waiting (``input-available`` / ``approval-requested``)
    takes the client's answer from it: a result (an HTTP client tool) or the user's approval decision.
    Returns ``stored`` itself when nothing is taken.
    """
    answers: dict[str, dict[str, Any]] = {}
    for part in incoming.get("parts") or ():
        call_id = part.get("toolCallId")
        if is_tool_part(part) and part.get("state") in _CLIENT_ANSWERS and isinstance(call_id, str):
            answers[call_id] = part
    if not answers:
        return stored
    merged: dict[str, Any] | None = None
    for index, part in enumerate(stored.get("parts") or ()):
        if not is_tool_part(part) or part.get("state") not in _CLIENT_ANSWERABLE:
            continue
        answer = answers.get(part.get("toolCallId"))  # type: ignore[arg-type]
        if answer is None:
            continue
        if merged is None:
            merged = copy.deepcopy(stored)
        updated = dict(part)
        for key in _ANSWER_KEYS:
            if key in answer:
                updated[key] = copy.deepcopy(answer[key])
            elif key != "approval":
                updated.pop(key, None)
        merged["parts"][index] = updated
    return merged if merged is not None else stored
