"""``/agents/<class>/<name>/submissions``: durable submissions over HTTP, served by any ``Think`` agent.

Why this module exists: a webhook or a job runner that cannot hold a WebSocket or an SSE stream open still
needs to hand an agent a message and know it was stored — and be able to retry the POST safely. The routes
map one to one onto :meth:`~ponder.think.Think.submit_messages` and friends:

- ``POST …/submissions`` with ``{"messages": [UIMessage, …]}`` or ``{"input": "text"}`` (optional
  ``submission_id``, ``metadata``) and an optional ``Idempotency-Key`` header → ``202`` with the new submission
  (``accepted: true``) once it is stored, ``200`` with ``accepted: false`` for one already known, ``409`` when
  the id and the key name different submissions, ``400`` (nothing stored) for a bad body;
- ``GET …/submissions[?status=…&limit=…]`` → ``{"submissions": [...]}``;
- ``GET …/submissions/<id>`` → the inspection, ``404`` when unknown;
- ``DELETE …/submissions/<id>`` → cancels it: ``{"outcome", "previous_status", "messages_applied",
  "submission"}``, ``404`` when unknown.

The App's ``on_before_request`` hook runs before any of this, exactly as for every other agent route.
"""

from __future__ import annotations

import json
from typing import Any

from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse, Response

from ..think import SUBMISSION_STATUSES, SubmissionConflictError, Think

__all__ = ["handle_submissions_http"]

_ALLOWED_KEYS = frozenset({"messages", "input", "submission_id", "metadata", "idempotency_key"})


def _error(message: str, status: int, **headers: str) -> JSONResponse:
    return JSONResponse({"error": message}, status_code=status, headers=headers or None)


async def handle_submissions_http(
    agent: Any, request: Request, rest: tuple[str, ...], max_body_bytes: int
) -> Response | None:
    """Answer the submission routes of a ``Think`` agent; ``None`` when the request is not one of them."""
    if not isinstance(agent, Think) or not rest or rest[0] != "submissions" or len(rest) > 2:
        return None
    if len(rest) == 1:
        if request.method == "POST":
            return await _post(agent, request, max_body_bytes)
        if request.method == "GET":
            return await _list(agent, request)
        return _error("use GET to list submissions or POST to submit", 405, allow="GET, POST")
    submission_id = rest[1]
    if request.method == "GET":
        found = await agent.inspect_submission(submission_id)
        if found is None:
            return _error(f"unknown submission {submission_id!r}", 404)
        return JSONResponse(found.to_dict())
    if request.method == "DELETE":
        reason = request.query_params.get("reason") or None
        outcome = await agent.cancel_submission(submission_id, reason)
        if outcome.outcome == "not_found":
            return _error(f"unknown submission {submission_id!r}", 404)
        return JSONResponse(
            {
                "outcome": outcome.outcome,
                "previous_status": outcome.previous_status,
                "messages_applied": outcome.messages_applied,
                "submission": outcome.submission.to_dict() if outcome.submission is not None else None,
            }
        )
    return _error("use GET to inspect a submission or DELETE to cancel it", 405, allow="GET, DELETE")


async def _list(agent: Think, request: Request) -> Response:
    statuses = [s for value in request.query_params.getlist("status") for s in value.split(",") if s]
    unknown = [s for s in statuses if s not in SUBMISSION_STATUSES]
    if unknown:
        return _error(f"unknown status {unknown[0]!r}; use one of {', '.join(SUBMISSION_STATUSES)}", 400)
    raw_limit = request.query_params.get("limit", "50")
    if not raw_limit.isdigit() or int(raw_limit) < 1:
        return _error("limit must be a positive integer", 400)
    found = await agent.list_submissions(status=statuses or None, limit=int(raw_limit))
    return JSONResponse({"submissions": [s.to_dict() for s in found]})


async def _read_json(request: Request, limit: int) -> tuple[Any, Response | None]:
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        return None, _error(f"the body exceeds the {limit}-byte limit", 413)
    chunks: list[bytes] = []
    size = 0
    try:
        async for chunk in request.stream():
            size += len(chunk)
            if size > limit:
                return None, _error(f"the body exceeds the {limit}-byte limit", 413)
            chunks.append(chunk)
    except ClientDisconnect:
        return None, Response(status_code=400)
    try:
        return json.loads(b"".join(chunks).decode("utf-8")), None
    except (UnicodeDecodeError, ValueError, RecursionError):
        return None, _error("the body must be a JSON object", 400)


async def _post(agent: Think, request: Request, max_body_bytes: int) -> Response:
    body, failure = await _read_json(request, max_body_bytes)
    if failure is not None:
        return failure
    if not isinstance(body, dict):
        return _error("the body must be a JSON object", 400)
    extra = sorted(set(body) - _ALLOWED_KEYS)
    if extra:
        return _error(f"unknown field {extra[0]!r}; use messages or input, submission_id, metadata", 400)
    has_messages, has_input = "messages" in body, "input" in body
    if has_messages == has_input:
        return _error('send either "messages" (a list of UIMessages) or "input" (a text)', 400)
    if has_input:
        if not isinstance(body["input"], str) or not body["input"].strip():
            return _error('"input" must be a non-empty string', 400)
        messages: Any = body["input"]
    else:
        if not isinstance(body["messages"], list) or not body["messages"]:
            return _error('"messages" must be a non-empty list of UIMessages', 400)
        if not all(isinstance(m, dict) for m in body["messages"]):
            return _error('every item of "messages" must be a UIMessage object', 400)
        messages = body["messages"]
    submission_id = body.get("submission_id")
    if submission_id is not None and (not isinstance(submission_id, str) or not submission_id):
        return _error('"submission_id" must be a non-empty string', 400)
    header_key = request.headers.get("idempotency-key")
    body_key = body.get("idempotency_key")
    if body_key is not None and (not isinstance(body_key, str) or not body_key):
        return _error('"idempotency_key" must be a non-empty string', 400)
    if header_key is not None and body_key is not None and header_key != body_key:
        return _error("the Idempotency-Key header and the body's idempotency_key differ", 400)
    key = header_key if header_key is not None else body_key
    if key is not None and not key.strip():
        return _error("the Idempotency-Key header must not be empty", 400)
    try:
        submission = await agent.submit_messages(
            messages, submission_id=submission_id, idempotency_key=key, metadata=body.get("metadata")
        )
    except SubmissionConflictError as exc:
        return _error(str(exc), 409)
    except ValueError as exc:
        return _error(f"invalid submission: {exc}", 400)
    return JSONResponse(submission.to_dict(), status_code=202 if submission.accepted else 200)
