"""ponder.context: the system prompt assembled from labelled blocks, frozen for prompt caching.

Blocks (:class:`ContextBlock`) are declared in prompt order; each has a provider whose methods decide what the
model may do with it (read-only, writable memory, skill-like, searchable). :class:`Context` renders the base
prompt and the blocks once, persists the exact string, and reuses it byte for byte until ``rebuild()``;
``when_changed="remind"`` blocks reach the model as a reminder instead. :func:`context_tools` generates
``set_context`` / ``load_context`` / ``unload_context`` / ``search_context``; :func:`loaded_skills_in_history`
and :func:`reclaim_skill_result` keep loaded skills in step with the transcript. Also here: the per-agent
:class:`ConfigStore` and context-window overflow handling (:func:`default_context_overflow_classifier`,
:class:`ContextOverflowPolicy`). See ``docs/context.md``.
"""

from . import _schema as _schema  # registers the context tables
from ._blocks import (
    BlockKind,
    ContextBlock,
    ContextBlockError,
    ContextProvider,
    SearchableContextProvider,
    SkillContextProvider,
    WhenChanged,
    WritableContextProvider,
    block_kind,
    estimate_tokens,
    merge_blocks,
)
from ._config import ConfigError, ConfigStore
from ._context import REMINDER_PREAMBLE, Context, StoredBlockProvider, UnloadCallback, entry_key
from ._overflow import (
    ContextOverflowPolicy,
    ProactiveOverflowPolicy,
    classify_context_overflow,
    default_context_overflow_classifier,
)
from ._render import RULE, BlockState, render_section, render_system_prompt, usage_text
from ._schema import CONTEXT_MIGRATIONS
from ._skills import (
    SKILL_UNLOADED_PREFIX,
    loaded_skills_in_history,
    reclaim_skill_result,
    skill_unloaded_marker,
)
from ._tools import context_tools

__all__ = [
    "CONTEXT_MIGRATIONS",
    "REMINDER_PREAMBLE",
    "RULE",
    "SKILL_UNLOADED_PREFIX",
    "BlockKind",
    "BlockState",
    "ConfigError",
    "ConfigStore",
    "Context",
    "ContextBlock",
    "ContextBlockError",
    "ContextOverflowPolicy",
    "ContextProvider",
    "ProactiveOverflowPolicy",
    "SearchableContextProvider",
    "SkillContextProvider",
    "StoredBlockProvider",
    "UnloadCallback",
    "WhenChanged",
    "WritableContextProvider",
    "block_kind",
    "classify_context_overflow",
    "context_tools",
    "default_context_overflow_classifier",
    "entry_key",
    "estimate_tokens",
    "loaded_skills_in_history",
    "merge_blocks",
    "reclaim_skill_result",
    "render_section",
    "render_system_prompt",
    "skill_unloaded_marker",
    "usage_text",
]
