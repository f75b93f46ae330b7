"""Errors of the model layer.

Why this module exists: callers need to tell "the provider failed this call" (``ModelError``: show it, maybe
retry) from "this model cannot be set up" (``ModelConfigError``: a bad model string, a missing API key or a
missing optional dependency), and each message must say exactly what to do about it.
"""

from __future__ import annotations


class ModelError(Exception):
    """A provider failed a model call (HTTP error, error event mid-stream, broken connection...).

    ``retryable`` says whether trying the same request again may succeed (rate limits, overload, 5xx,
    timeouts, dropped connections); ``status_code`` is the HTTP status when known.
    """

    def __init__(self, message: str, *, retryable: bool = False, status_code: int | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.retryable = retryable
        self.status_code = status_code

    def __repr__(self) -> str:
        return f"ModelError({self.message!r}, retryable={self.retryable!r}, status_code={self.status_code!r})"


class ModelConfigError(ValueError):
    """A model string or model configuration cannot be used: unknown provider, missing key, missing extra."""


class MissingExtraError(ModelConfigError, ImportError):
    """The provider SDK for a model is not installed; the message names the ``pip install`` command."""
