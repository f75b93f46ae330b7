"""ponder.sessions: an agent's message tree — branches, compaction overlays, search, and bounded memory.

A :class:`Session` stores one agent's chat messages (AI SDK ``UIMessage`` dicts) as an append-only tree:
regenerating an answer adds a sibling, compaction adds an overlay that replaces a span with a summary when the
path is read for the model, and nothing is deleted except by an explicit ``delete`` or ``clear``. A message of
any size is stored whole (split across continuation rows past 1.5 MiB); only the model's view is shortened —
older tool outputs and long texts are cut at a cutoff that moves in steps so provider prompt caches keep
hitting, and aged inline media is moved to workspace files. A wake loads only the newest messages that fit the
hydration budget. See ``docs/sessions.md``.
"""

from . import _schema as _schema  # registers the sessions tables
from ._compaction import (
    SUMMARY_ID_PREFIX,
    CompactFunction,
    Compaction,
    CompactionPlan,
    build_summary_prompt,
    create_compact_function,
    summarize_with_model,
    summary_message,
)
from ._eviction import (
    EVICTED_DIR,
    AttachmentSink,
    EvictionResult,
    MediaEviction,
    StoreAttachmentSink,
    StoredFile,
    evict_message_media,
    eviction_cutoff,
)
from ._legacy import LEGACY_TABLE
from ._rows import ROW_BUDGET_BYTES, estimate_message_tokens, estimate_tokens
from ._search import search_history_tool
from ._session import DEFAULT_HYDRATION_BYTE_BUDGET, HydrationInfo, Session, SessionEvent
from ._truncate import truncate_message, truncate_older_messages, truncate_value, truncation_cutoff

__all__ = [
    "DEFAULT_HYDRATION_BYTE_BUDGET",
    "EVICTED_DIR",
    "LEGACY_TABLE",
    "ROW_BUDGET_BYTES",
    "SUMMARY_ID_PREFIX",
    "AttachmentSink",
    "CompactFunction",
    "Compaction",
    "CompactionPlan",
    "EvictionResult",
    "HydrationInfo",
    "MediaEviction",
    "Session",
    "SessionEvent",
    "StoreAttachmentSink",
    "StoredFile",
    "build_summary_prompt",
    "create_compact_function",
    "estimate_message_tokens",
    "estimate_tokens",
    "evict_message_media",
    "eviction_cutoff",
    "search_history_tool",
    "summarize_with_model",
    "summary_message",
    "truncate_message",
    "truncate_older_messages",
    "truncate_value",
    "truncation_cutoff",
]
