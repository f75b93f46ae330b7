"""Think's prompt context: context blocks, the frozen system prompt, reminders, config and overflow handling.

Why this module exists: ``ponder.context`` is a standalone package; this mixin wires it into Think. At load it
builds ``self.context`` from ``configure_context()`` plus the blocks ``configure_session()`` declared with
``session.with_context()``, restores the loaded skills from the transcript, loads the per-agent config (so
``get_config()`` is synchronous) and parses the ``context_overflow`` policy (a typo fails at start, not at the
first overflow). The turn loop asks it for the system prompt, the block tools, the reminder to attach, and
whether an error is a context overflow. An ``unload_context`` rewrites the skill's earlier ``load_context``
result in the transcript here, so the skill text stops reaching the model.
"""

from __future__ import annotations

import asyncio
import copy
import inspect
import logging
from typing import TYPE_CHECKING, Any, ClassVar

from ..context import (
    ConfigStore,
    Context,
    ContextOverflowPolicy,
    context_tools,
    default_context_overflow_classifier,
    loaded_skills_in_history,
    merge_blocks,
    reclaim_skill_result,
)
from ..models import ModelMessage, TextContent, UserMessage
from ..runtime import Connection, callable
from ..tools import to_tools

if TYPE_CHECKING:
    from ._think import Think

    _Base = Think
else:
    _Base = object

__all__ = ["CONTEXT_BLOCKS_FRAME", "ContextOverflowError", "PromptContext", "attach_reminder"]

logger = logging.getLogger("ponder.think")

#: The ponder-specific frame that carries the blocks to clients (stock clients ignore unknown types):
#: ``{"type": "ponder_context_blocks", "blocks": [...snapshot...]}``.
CONTEXT_BLOCKS_FRAME = "ponder_context_blocks"


class _ThinkContext(Context):
    """A :class:`Context` that tells its agent after every write (``set_block``, skill load and unload)."""

    def __init__(self, *args: Any, on_change: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._on_change = on_change

    async def set_block(self, *args: Any, **kwargs: Any) -> str:
        result = await super().set_block(*args, **kwargs)
        await self._on_change()
        return result

    async def load_skill(self, label: str, key: str) -> str:
        result = await super().load_skill(label, key)
        await self._on_change()
        return result

    async def unload_skill(self, label: str, key: str) -> str:
        result = await super().unload_skill(label, key)
        await self._on_change()
        return result


class ContextOverflowError(RuntimeError):
    """The conversation does not fit the model's context window and could not be compacted."""


class PromptContext(_Base):
    """The prompt-context part of :class:`Think` (mixed into it; not useful on its own)."""

    #: Overflow recovery (off by default): ``{"reactive": True, "max_retries": 1, "proactive":
    #: {"max_input_tokens": N, "headroom": 0.9, "max_compactions": 1}}``; see ``docs/context.md``.
    context_overflow: ClassVar[ContextOverflowPolicy | dict[str, Any] | None] = None

    _context: Context | None = None
    _overflow_policy: ContextOverflowPolicy
    _config_store: ConfigStore
    _user_config: dict[str, Any]
    #: A ``compact`` session event happened since the prompt was last rebuilt.
    _context_stale: bool = False
    #: Input tokens of the newest model call (the proactive overflow guard's measure).
    _last_input_tokens: int | None = None
    #: Bumped whenever an unload rewrote a stored message: a running turn re-reads its model input.
    _skill_reclaims: int = 0

    def configure_context(self) -> Any:
        """The prompt's context blocks in order (may be async): ``ContextBlock`` objects or config dicts.

        Declaring any block makes the system prompt ``get_system_prompt()`` followed by the blocks, frozen (see
        ``docs/context.md``); the block tools (``set_context`` …) are given to the model.
        """
        return []

    def is_context_overflow(self, error: BaseException) -> bool:
        """Whether a model error means the request did not fit the context window (override to extend)."""
        return default_context_overflow_classifier(error)

    @property
    def context(self) -> Context:
        """The agent's :class:`ponder.context.Context` (available once the agent has started)."""
        if self._context is None:
            raise RuntimeError("the context is available once the agent has started (after on_start)")
        return self._context

    async def _load_context(self) -> None:
        """Called once per wake after ``configure_session()``: blocks, config, overflow policy."""
        self._overflow_policy = ContextOverflowPolicy.parse(self.context_overflow)
        declared = await _maybe_await(self.configure_context())
        blocks = merge_blocks(declared or [], self.session.context_blocks)
        base = await _maybe_await(self.get_system_prompt())
        self._context = _ThinkContext(
            self.host.store, self.id, blocks, base_prompt=base or "", on_change=self._broadcast_context_blocks
        )
        self._context.set_unload_callback(self._reclaim_skill)
        await self._restore_loaded_skills()
        self._config_store = ConfigStore(self.host.store, self.id)
        self._user_config = await self._config_store.get()

    # -- the system prompt ----------------------------------------------------------------------------

    async def _system_prompt(self) -> str:
        """The turn's system prompt: the frozen context prompt when blocks are declared, else
        ``get_system_prompt()``. A compaction since the last rebuild rebuilds the frozen prompt first."""
        context = self._context
        if context is None or not context.blocks:
            return await _maybe_await(self.get_system_prompt())
        await self._rebuild_if_stale()
        return await context.frozen_prompt()

    async def _rebuild_if_stale(self) -> None:
        """Rebuild the frozen prompt once after a compaction (from the ``compact`` session event's task or
        the next turn, whichever comes first; the lock keeps a turn from reading it half-way)."""
        lock = self.__dict__.get("_context_lock")
        if lock is None:
            lock = self.__dict__["_context_lock"] = asyncio.Lock()
        async with lock:
            if not self._context_stale:
                return
            self._context_stale = False
            context = self._context
            if context is not None and context.blocks:
                await context.rebuild()

    def _context_compacted(self) -> None:
        """A ``compact`` session event: the prompt is rebuilt now in the background (so an eviction or a
        restart before the next turn does not lose it), or by the next turn if that comes first."""
        self._context_stale = True
        if self._context is not None and self._context.blocks:
            self.create_task(self._rebuild_if_stale(), name="ponder:context-rebuild")

    async def refresh_system_prompt(self) -> str:
        """Re-read every block and re-render the frozen system prompt now; returns it."""
        await self._ensure_loaded()
        self._context_stale = False
        return await self.context.rebuild()

    def _context_tools(self) -> dict[str, Any]:
        context = self._context
        if context is None or not context.blocks:
            return {}
        return to_tools(context_tools(context))

    async def _take_reminder(self) -> str | None:
        context = self._context
        if context is None or not context.blocks:
            return None
        return await context.take_reminders()

    async def _context_cleared(self) -> None:
        """History clear: no skill is loaded any more; rebuild the frozen prompt (block memory is kept)."""
        self._context_stale = False
        if self._context is not None:
            self._context.clear_loaded_skills()
        if self._context is not None and self._context.blocks:
            await self._context.rebuild()

    # -- loaded skills and the transcript -------------------------------------------------------------

    async def _restore_loaded_skills(self) -> None:
        """At load (every wake) and after a branch switch: the loaded skills are the ``load_context`` results
        of the active path that were not unloaded since — so ``unload_context`` works for a skill loaded before
        a restart, and a branch's skills are the ones loaded on that branch."""
        context = self._context
        if context is None or not any(block.kind == "skill" for block in context.blocks):
            return
        session = self.session
        history = await session.get_history() if session.hydration.truncated else session.active_messages()
        context.restore_loaded_skills(loaded_skills_in_history(history))

    async def _reclaim_skill(self, label: str, key: str) -> None:
        """An unload: rewrite every ``load_context`` result for ``(label, key)`` to ``[skill unloaded: key]`` —
        in the message a running turn is building (persisted when it ends) and in the stored messages of the
        active path (upserted under the same id and sent to clients as ``cf_agent_message_updated``)."""
        for turn in list(self._turns.values()):
            reclaim_skill_result(turn.acc.message, label, key)
        session = self.session
        path = await session.get_history() if session.hydration.truncated else session.active_messages()
        rewritten = False
        for stored in path:
            if stored.get("role") != "assistant":
                continue
            message = copy.deepcopy(stored)
            if not reclaim_skill_result(message, label, key):
                continue
            await session.upsert(message)
            self.broadcast({"type": "cf_agent_message_updated", "message": message})
            rewritten = True
        if rewritten:
            self._skill_reclaims += 1

    # -- blocks for clients (the web page's Memory panel) ----------------------------------------------

    @callable
    async def get_context_blocks(self) -> list[dict[str, Any]]:
        """Every context block as it is now (``Context.snapshot()``: label, description, content, tokens,
        max_tokens, writable, kind, when_changed); ``[]`` when the agent declares none."""
        await self._ensure_loaded()
        return await self.context.snapshot()

    async def _context_blocks_frame(self) -> dict[str, Any] | None:
        context = self._context
        if context is None or not context.blocks:
            return None
        return {"type": CONTEXT_BLOCKS_FRAME, "blocks": await context.snapshot()}

    async def _broadcast_context_blocks(self) -> None:
        """After a block write: send every client the blocks as they are now (a failed read is logged, the
        write itself stands)."""
        if not self.connections:
            return
        try:
            frame = await self._context_blocks_frame()
        except Exception:
            logger.exception("%r: could not read the context blocks for clients", self)
            return
        if frame is not None:
            self.broadcast(frame)

    async def _on_connected(self, connection: Connection) -> None:
        await super()._on_connected(connection)
        try:
            frame = await self._context_blocks_frame()
        except Exception:
            logger.exception("%r: could not read the context blocks for a new client", self)
            return
        if frame is not None:
            connection.send(frame)

    # -- config ---------------------------------------------------------------------------------------

    def get_config(self) -> dict[str, Any]:
        """The agent's config (``{}`` until ``configure`` is called), as an independent copy."""
        return copy.deepcopy(getattr(self, "_user_config", None) or {})

    async def configure(self, config: dict[str, Any]) -> None:
        """Replace the agent's config and persist it (a JSON object; ``ConfigError`` and no change otherwise)."""
        await self._ensure_loaded()
        await self._config_store.set(config)
        self._user_config = copy.deepcopy(config)

    # -- overflow -------------------------------------------------------------------------------------

    async def _compact_for_overflow(self, error: BaseException | None, *, proactive: bool = False) -> bool:
        """Compact the session now for overflow handling; True when a compaction was stored.

        Reactive (``proactive=False``): without a compaction function, or when it finds nothing to compact,
        the turn ends with a ``ContextOverflowError``. Proactive: those cases just go on uncompacted.
        """
        session = self.session
        if session._compact_fn is None:
            if proactive:
                logger.warning("%r: context_overflow.proactive needs a compaction function; skipped", self)
                return False
            raise ContextOverflowError(
                "The conversation no longer fits the model's context window and no compaction function is "
                "configured (call session.on_compaction(...) in configure_session())."
            ) from error
        compaction = await session.compact()
        if compaction is None:
            if proactive:
                return False
            raise ContextOverflowError(
                "The conversation no longer fits the model's context window and compaction found nothing "
                "to compact."
            ) from error
        self._context_stale = True
        return True


def attach_reminder(messages: list[ModelMessage], reminder: str) -> list[ModelMessage]:
    """The model input with ``reminder`` riding on it (never stored): an extra text part of the last message
    when it is a user message, else a new user message at the end."""
    out = list(messages)
    if out and isinstance(out[-1], UserMessage):
        out[-1] = UserMessage([*out[-1].content, TextContent(reminder)])
    else:
        out.append(UserMessage(reminder))
    return out


async def _maybe_await(value: Any) -> Any:
    if inspect.isawaitable(value):
        return await value
    return value
