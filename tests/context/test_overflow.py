"""The bundled overflow classifier over real provider error shapes, and ContextOverflowPolicy parsing."""

from __future__ import annotations

import re
from typing import Any

import pytest

from ponder.context import (
    ContextOverflowPolicy,
    ProactiveOverflowPolicy,
    classify_context_overflow,
    default_context_overflow_classifier,
)
from ponder.models import ModelError

OVERFLOWS = {
    "openai": "Error code: 400 - {'error': {'message': \"This model's maximum context length is 128000 tokens. "
    'However, your messages resulted in 130532 tokens. Please reduce the length of the messages.", '
    "'type': 'invalid_request_error', 'param': 'messages', 'code': 'context_length_exceeded'}}",
    "openai-responses": "Your input exceeds the context window of this model. Please adjust your input and try again.",
    "anthropic": "Error code: 400 - {'type': 'error', 'error': {'type': 'invalid_request_error', "
    "'message': 'prompt is too long: 208437 tokens > 200000 maximum'}}",
    "anthropic-max-tokens": "input length and `max_tokens` exceed context limit: 195000 + 8192 > 200000, "
    "decrease input length or `max_tokens` and try again",
    "google": "400 INVALID_ARGUMENT. {'error': {'code': 400, 'message': 'The input token count (1195353) exceeds "
    "the maximum number of tokens allowed (1048576).', 'status': 'INVALID_ARGUMENT'}}",
    "google-short": "400 INVALID_ARGUMENT: request token count is above the limit",
    "bedrock": "An error occurred (ValidationException) when calling the Converse operation: "
    "Input is too long for requested model.",
    "bedrock-tokens": "ValidationException: too many input tokens. Max input tokens: 200000, request input token "
    "count: 201234",
}

NOT_OVERFLOWS = {
    "openai-rate-limit": "Rate limit reached for gpt-4o in organization org-x on tokens per min (TPM): "
    "Limit 30000, Used 29000, Requested 2000.",
    "openai-auth": "Incorrect API key provided: sk-****. You can find your API key at https://platform.openai.com",
    "anthropic-output-limit": "max_tokens: 100000 > 64000, which is the maximum allowed number of output "
    "tokens for claude-sonnet",
    "anthropic-overloaded": "Overloaded",
    "google-quota": "429 RESOURCE_EXHAUSTED. Resource has been exhausted (e.g. check quota).",
    "google-bad-arg": "400 INVALID_ARGUMENT: Request contains an invalid argument.",
    "bedrock-malformed": "ValidationException: Malformed input request: #: extraneous key [foo] is not permitted",
    "bedrock-throttle": "ThrottlingException: Too many requests, please wait before trying again.",
    "network": "Connection reset by peer",
}


@pytest.mark.parametrize("name", sorted(OVERFLOWS))
def test_overflow_shapes_match(name: str) -> None:
    text = OVERFLOWS[name]
    assert default_context_overflow_classifier(text)
    assert default_context_overflow_classifier(ModelError(text, status_code=400))
    assert default_context_overflow_classifier(RuntimeError(text))
    assert classify_context_overflow(ModelError(text)) == "context_overflow"


@pytest.mark.parametrize("name", sorted(NOT_OVERFLOWS))
def test_other_errors_do_not_match(name: str) -> None:
    text = NOT_OVERFLOWS[name]
    assert not default_context_overflow_classifier(text)
    assert not default_context_overflow_classifier(ModelError(text, retryable=True, status_code=429))
    assert classify_context_overflow(text) is None


def test_cause_chain_code_and_body_are_read() -> None:
    try:
        try:
            raise ValueError("prompt is too long: 300000 tokens > 200000 maximum")
        except ValueError as inner:
            raise ModelError("provider call failed") from inner
    except ModelError as outer:
        assert default_context_overflow_classifier(outer)

    class SdkError(Exception):
        code = "context_length_exceeded"

    assert default_context_overflow_classifier(SdkError("Bad request"))

    class BodyError(Exception):
        body = {"error": {"message": "This model's maximum context length is 8192 tokens"}}

    assert default_context_overflow_classifier(BodyError("400"))
    assert default_context_overflow_classifier({"error": {"code": "context_length_exceeded"}})
    assert not default_context_overflow_classifier(None)


def test_policy_defaults_and_full_config() -> None:
    off = ContextOverflowPolicy.parse(None)
    assert (off.reactive, off.max_retries, off.proactive, off.enabled) == (False, 1, None, False)
    policy = ContextOverflowPolicy.parse(
        {"reactive": True, "max_retries": 2, "proactive": {"max_input_tokens": 1000, "headroom": 0.8}}
    )
    assert policy.reactive and policy.max_retries == 2 and policy.enabled
    assert policy.proactive == ProactiveOverflowPolicy(1000, 0.8, 1)
    camel = ContextOverflowPolicy.parse(
        {"reactive": True, "maxRetries": 0, "proactive": {"maxInputTokens": 5}}
    )
    assert camel.max_retries == 0 and camel.proactive == ProactiveOverflowPolicy(5)
    assert ContextOverflowPolicy.parse(policy) is policy


def test_should_compact_proactively() -> None:
    policy = ContextOverflowPolicy.parse({"proactive": {"max_input_tokens": 1000, "max_compactions": 1}})
    assert not policy.should_compact_proactively(None, 0)
    assert not policy.should_compact_proactively(899, 0)
    assert policy.should_compact_proactively(900, 0)  # 1000 × 0.9
    assert not policy.should_compact_proactively(5000, 1)  # budget spent
    assert not ContextOverflowPolicy(reactive=True).should_compact_proactively(10**9, 0)


def test_should_retry() -> None:
    policy = ContextOverflowPolicy.parse({"reactive": True})
    assert policy.should_retry(0) and not policy.should_retry(1)
    assert not ContextOverflowPolicy().should_retry(0)


@pytest.mark.parametrize(
    ("config", "message"),
    [
        ("yes", "must be a dict"),
        ({"reactive": "yes"}, "reactive must be true or false"),
        ({"max_retries": -1}, "max_retries must be an integer >= 0"),
        ({"max_retries": 1.5}, "max_retries"),
        ({"max_retries": True}, "max_retries"),
        ({"retries": 1}, "unknown option 'retries'"),
        ({"proactive": 1000}, "proactive must be a dict"),
        ({"proactive": {}}, "max_input_tokens is required"),
        ({"proactive": {"max_input_tokens": 0}}, "max_input_tokens must be an integer >= 1"),
        ({"proactive": {"max_input_tokens": 10, "headroom": 0}}, "headroom must be in"),
        ({"proactive": {"max_input_tokens": 10, "headroom": 1.5}}, "headroom must be in"),
        ({"proactive": {"max_input_tokens": 10, "max_compactions": -1}}, "max_compactions"),
        ({"proactive": {"max_input_tokens": 10, "limit": 3}}, "unknown option proactive.'limit'"),
    ],
)
def test_policy_errors(config: Any, message: str) -> None:
    with pytest.raises(ValueError, match=re.escape(message)):
        ContextOverflowPolicy.parse(config)
