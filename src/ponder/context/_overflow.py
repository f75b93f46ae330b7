"""Context-window overflow: recognising the providers' errors, and the opt-in recovery policy.

Why this module exists: a long tool-heavy turn can outgrow the model's window mid-turn. Think recovers by
compacting and retrying (reactive) or by compacting before a step that is about to cross the limit
(proactive). Both need a reliable "is this an overflow?" test over the real error shapes of each provider,
and a validated policy object so a typo in the config fails at start-up rather than at the first overflow.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

__all__ = [
    "ContextOverflowPolicy",
    "ProactiveOverflowPolicy",
    "classify_context_overflow",
    "default_context_overflow_classifier",
]

# Lower-cased patterns over the error text. Each is specific to a window overflow; rate limits ("tokens per
# min"), output-limit errors ("maximum allowed number of output tokens") and malformed requests do not match.
_PATTERNS = [
    # OpenAI (and OpenAI-compatible servers: vLLM, llama.cpp, Groq, Mistral...)
    re.compile(r"context_length_exceeded"),
    re.compile(r"maximum context length"),
    re.compile(r"exceeds the context window"),
    re.compile(r"context window (?:of this model )?(?:is )?exceeded"),
    # Anthropic
    re.compile(r"prompt is too long"),
    re.compile(r"input length and `?max_tokens`? exceed context limit"),
    # Google (Gemini / Vertex)
    re.compile(r"exceeds the maximum number of tokens"),
    re.compile(r"invalid_argument.*token count"),
    re.compile(r"token count.*exceeds"),
    # AWS Bedrock (ValidationException bodies)
    re.compile(r"too many input tokens"),
    re.compile(r"input is too long"),
]


def _texts(error: Any, depth: int = 0) -> list[str]:
    """Every piece of text an error carries: message, args, code, body, and its cause chain."""
    if error is None or depth > 5:
        return []
    if isinstance(error, str):
        return [error]
    if isinstance(error, Mapping):
        try:
            return [json.dumps(error, default=str)]
        except (TypeError, ValueError):
            return [str(error)]
    texts = [type(error).__name__, str(error)]
    for attr in ("message", "code", "type", "body", "response_body"):
        value = getattr(error, attr, None)
        if isinstance(value, str | Mapping):
            texts += _texts(value, depth + 1)
    if isinstance(error, BaseException):
        texts += _texts(error.__cause__ or error.__context__, depth + 1)
    return texts


def default_context_overflow_classifier(error: Any) -> bool:
    """Whether ``error`` (a ``ModelError``, any exception, a message string or an error body dict) says the
    request did not fit the model's context window, for OpenAI, Anthropic, Google and Bedrock shapes."""
    text = "\n".join(_texts(error)).lower()
    return any(pattern.search(text) for pattern in _PATTERNS)


def classify_context_overflow(error: Any) -> Literal["context_overflow"] | None:
    """``"context_overflow"`` or ``None``: the shape a ``classify_chat_error`` hook returns."""
    return "context_overflow" if default_context_overflow_classifier(error) else None


def _int(value: Any, name: str, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ValueError(f"context_overflow: {name} must be an integer >= {minimum}, got {value!r}")
    return value


def _options(config: Mapping[str, Any], allowed: dict[str, str], where: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in config.items():
        name = allowed.get(key)
        if name is None:
            known = ", ".join(sorted({v for v in allowed.values()}))
            raise ValueError(f"context_overflow: unknown option {where}{key!r} (known: {known})")
        out[name] = value
    return out


@dataclass(frozen=True, slots=True)
class ProactiveOverflowPolicy:
    """Compact before a step once the previous step used ``max_input_tokens × headroom`` input tokens."""

    max_input_tokens: int
    headroom: float = 0.9
    max_compactions: int = 1

    def __post_init__(self) -> None:
        _int(self.max_input_tokens, "proactive.max_input_tokens", 1)
        _int(self.max_compactions, "proactive.max_compactions", 0)
        if (
            isinstance(self.headroom, bool)
            or not isinstance(self.headroom, int | float)
            or not 0 < self.headroom <= 1
        ):
            raise ValueError(f"context_overflow: proactive.headroom must be in (0, 1], got {self.headroom!r}")

    @property
    def threshold(self) -> float:
        return self.max_input_tokens * self.headroom


@dataclass(frozen=True, slots=True)
class ContextOverflowPolicy:
    """The opt-in overflow recovery: ``reactive`` compact-and-retry (``max_retries`` times per turn) and an
    optional ``proactive`` guard. Both off by default."""

    reactive: bool = False
    max_retries: int = 1
    proactive: ProactiveOverflowPolicy | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.reactive, bool):
            raise ValueError(f"context_overflow: reactive must be true or false, got {self.reactive!r}")
        _int(self.max_retries, "max_retries", 0)

    @property
    def enabled(self) -> bool:
        return self.reactive or self.proactive is not None

    @classmethod
    def parse(cls, config: ContextOverflowPolicy | Mapping[str, Any] | None) -> ContextOverflowPolicy:
        """From ``{"reactive": True, "max_retries": 1, "proactive": {"max_input_tokens": N, "headroom": 0.9,
        "max_compactions": 1}}`` (upstream camelCase keys accepted too); ``None`` means off."""
        if config is None:
            return cls()
        if isinstance(config, ContextOverflowPolicy):
            return config
        if not isinstance(config, Mapping):
            raise ValueError(f"context_overflow must be a dict or None, got {type(config).__name__}")
        options = _options(
            config,
            {
                "reactive": "reactive",
                "max_retries": "max_retries",
                "maxRetries": "max_retries",
                "proactive": "proactive",
            },
            "",
        )
        proactive = options.pop("proactive", None)
        if proactive is not None:
            if not isinstance(proactive, Mapping):
                raise ValueError(
                    f"context_overflow: proactive must be a dict, got {type(proactive).__name__}"
                )
            values = _options(
                proactive,
                {
                    "max_input_tokens": "max_input_tokens",
                    "maxInputTokens": "max_input_tokens",
                    "headroom": "headroom",
                    "max_compactions": "max_compactions",
                    "maxCompactions": "max_compactions",
                },
                "proactive.",
            )
            if "max_input_tokens" not in values:
                raise ValueError("context_overflow: proactive.max_input_tokens is required")
            options["proactive"] = ProactiveOverflowPolicy(**values)
        return cls(**options)

    def should_retry(self, retries_done: int) -> bool:
        """Whether a classified overflow may be compacted and retried after ``retries_done`` retries."""
        return self.reactive and retries_done < self.max_retries

    def should_compact_proactively(self, last_input_tokens: int | None, compactions_done: int) -> bool:
        """Whether to compact before the next step: the previous step's input tokens (fall back to its total
        tokens) reached the threshold and this turn has compactions left. Unknown usage never compacts."""
        proactive = self.proactive
        if proactive is None or last_input_tokens is None:
            return False
        if compactions_done >= proactive.max_compactions:
            return False
        return last_input_tokens >= proactive.threshold
