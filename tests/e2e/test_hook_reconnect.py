"""Issue 6 with the stock React hook: a client that reconnects mid-stream ends with exactly one assistant
message holding the full reply.

``tests/js/hook-driver.mjs`` keeps the real ``useAgent`` + ``useAgentChat`` mounted under Node while the
test works underneath it; the hook's own PartySocket reconnects and the hook resumes by itself (the test
only ever sends the message). The server is ``tests/e2e/apps/reconnect_app.py``, whose ``ScriptedModel``
streams ``FULL_REPLY`` one word every 50 ms and, after a restart, writes only the rest of it.

* Dropped socket (the server keeps running the turn): the socket is terminated without a close handshake
  (a network failure), or closed and reopened by PartySocket's ``reconnect()``. The hook re-attaches through
  the resume handshake: one ACK, a replay of the chunks so far, then the live chunks.
* Server restart mid-reply: ``kill -9`` after some words, restart on the same store and port. Recovery
  persists the partial and streams a continuation (``continuation: true``) into the same message id.
  Upstream Cloudflare bug #1951 (continuation replay after a reconnect duplicates parts) must not happen.
* Server restart before any text: ``kill -9`` after the turn's ``start`` chunk, while the model is still
  "thinking"; recovery retries the request (same request id, user message not stored twice).

Every case ends with the hook ``ready``, one assistant message whose text is exactly ``FULL_REPLY``, and
the hook's messages equal to ``GET …/get-messages``. Kill and drop points come from the frames the hook
reports, so nothing here sleeps to synchronise. Needs ``npm ci --prefix tests/js``.

Not asserted, because only the final state is the acceptance criterion: while a recovered turn is still
streaming, the hook may show it split. A recovered *continuation* resumed through the hook's resume stream
shows as a second assistant message until the turn's final transcript (the AI SDK starts a resumed stream in
a new message unless its ``start`` chunk names one, and a continuation's ``start`` must not); a recovered
*retry* shows beside the killed attempt's empty message, because the retry answers under a new message id.
"""

from __future__ import annotations

import json
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.server import REPO, ServerProcess

from ._hook_driver import HookDriver
from ._node import node_binary
from .apps.reconnect_app import FULL_REPLY

pytestmark = pytest.mark.slow

APP = REPO / "tests" / "e2e" / "apps" / "reconnect_app.py"
AGENT = "reconnect-chat"
RESPONSE = "cf_agent_use_chat_response"
PROMPT = "Tell me a long story"


@pytest.fixture
def server(tmp_path: Path) -> Iterator[ServerProcess]:
    node_binary()  # fail early, with the install hint, when the npm clients are missing
    store = f"sqlite:///{tmp_path / 'store.sqlite3'}"
    with ServerProcess(APP, store, tmp_path / "server.log") as proc:  # restarts keep its port
        yield proc


def _driver(server: ServerProcess, tmp_path: Path, prefix: str = "") -> HookDriver:
    name = f"{prefix}reconnect-{uuid.uuid4().hex[:8]}"
    return HookDriver(
        f"127.0.0.1:{server.port}",
        name,
        AGENT,
        tmp_path / "driver.stderr",
        context=lambda: f"--- server log ({server.log_path})\n{server.log()}",
    )


def _stored(server: ServerProcess, name: str) -> list[dict[str, Any]]:
    with urllib.request.urlopen(f"{server.base_url}/agents/{AGENT}/{name}/get-messages", timeout=5) as r:
        return json.loads(r.read())


def _chunk(frame: dict[str, Any]) -> dict[str, Any] | None:
    if frame.get("type") != RESPONSE or not frame.get("body") or frame.get("error"):
        return None
    return json.loads(frame["body"])


def _is_chunk(event: dict[str, Any], kind: str) -> bool:
    return event["event"] == "frame" and (_chunk(event["data"]) or {}).get("type") == kind


def _text(message: dict[str, Any]) -> str:
    return "".join(p.get("text", "") for p in message["parts"] if p["type"] == "text")


def _shapes(message: dict[str, Any]) -> list[str]:
    return [f"{p['type']}:{p['state']}" if "state" in p else p["type"] for p in message["parts"]]


def _send_and_wait_for(driver: HookDriver, kind: str, count: int = 1) -> tuple[str, str, int]:
    """Send the prompt; return once the hook has received ``count`` chunks of ``kind``.

    Returns the request id, the assistant message id of the turn's ``start`` chunk, and the index of the
    driver's first event of this turn.
    """
    driver.call("connected")
    mark = driver.mark()
    driver.call("send", text=PROMPT)
    sent = driver.wait_event(
        lambda e: e["event"] == "sent" and e["data"].get("type") == "cf_agent_use_chat_request",
        "the chat request",
        since=mark,
    )
    start = driver.wait_event(lambda e: _is_chunk(e, "start"), "the start chunk", since=mark)
    at = mark
    for n in range(count):
        at = driver.wait_event(lambda e: _is_chunk(e, kind), f"{n + 1} {kind} chunks", since=at)["i"] + 1
    return sent["data"]["id"], _chunk(start["data"])["messageId"], mark


def _check_final(driver: HookDriver, server: ServerProcess, message_id: str | None = None) -> dict[str, Any]:
    """The hook ends ready with one assistant message holding exactly FULL_REPLY, as the server stored it."""
    final = driver.call("idle", contains=[FULL_REPLY[-10:]], timeout_ms=20000, timeout=30)
    messages = final["messages"]
    assert final["status"] == "ready" and final["error"] is None, driver.report()
    assert [m["role"] for m in messages] == ["user", "assistant"], driver.report()
    assert _text(messages[0]) == PROMPT
    assistant = messages[1]
    assert _text(assistant) == FULL_REPLY, driver.report()
    if message_id is not None:
        assert assistant["id"] == message_id, "the reply is not in the message the turn started"
    assert messages == _stored(server, driver.name), "the hook's messages differ from GET …/get-messages"
    return assistant


def _drop_and_reopen(driver: HookDriver, drop: Any, after_close: Any = None) -> tuple[int, int]:
    """Run ``drop()`` (and ``after_close()`` once the hook's socket closed); return the event indexes of the
    hook's socket closing and of it opening again."""
    mark = driver.mark()
    drop()
    closed = driver.wait_event(lambda e: e["event"] == "close", "the hook's socket to close", since=mark)
    if after_close is not None:
        after_close()
    opened = driver.wait_event(
        lambda e: e["event"] == "open", "the hook's socket to reopen", since=closed["i"], timeout=30
    )
    return closed["i"], opened["i"]


def _response_frames(driver: HookDriver, request_id: str, since: int, until: int | None = None) -> list[Any]:
    return [
        f
        for f in driver.frames(since=since, until=until)
        if f.get("type") == RESPONSE and f["id"] == request_id
    ]


def _acks(driver: HookDriver, since: int, request_id: str) -> list[dict[str, Any]]:
    return [
        e["data"]
        for e in driver.of("sent", since=since)
        if e["data"].get("type") == "cf_agent_stream_resume_ack" and e["data"].get("id") == request_id
    ]


# -- a dropped socket, the server keeps streaming -----------------------------------------------------


@pytest.mark.parametrize("how", ["terminate", "reconnect"])
def test_a_hook_whose_socket_drops_mid_stream_ends_with_the_full_reply(
    how: str, server: ServerProcess, tmp_path: Path
) -> None:
    with _driver(server, tmp_path) as driver:
        request_id, message_id, mark = _send_and_wait_for(driver, "text-delta", 8)
        closed, opened = _drop_and_reopen(driver, lambda: driver.call("drop", how=how))

        assistant = _check_final(driver, server, message_id)

        # The turn was still streaming when the socket dropped: its end came over the new socket, after
        # one ACK (#1733: a second ACK would replay everything twice), the replay and the live chunks.
        assert not [f for f in _response_frames(driver, request_id, mark, closed) if f["done"]]
        assert len(_acks(driver, opened, request_id)) == 1, driver.report()
        frames = _response_frames(driver, request_id, opened)
        replay = [f for f in frames if f.get("replay") and f.get("body")]
        live = [f for f in frames if not f.get("replay") and f.get("body")]
        assert replay and live, driver.report()
        seqs = [f["seq"] for f in replay + live]
        assert seqs == list(range(len(seqs))), (
            "the replay and the live chunks must join without gap or repeat"
        )
        assert frames[-1]["done"] is True and frames[-1].get("outcome") == "completed"
        assert not any(f.get("continuation") for f in frames)  # the same turn, not a recovery
        assert _shapes(assistant) == ["step-start", "text:done"]


# -- the server is killed and restarted mid-reply -----------------------------------------------------


def _kill_and_restart(driver: HookDriver, server: ServerProcess) -> tuple[int, int]:
    """``kill -9`` the server; once the hook has seen it, restart it on the same store and port.

    Returns the event indexes of the hook's socket closing and of it opening again (by itself)."""
    return _drop_and_reopen(driver, server.kill9, server.start)


def _text_before(driver: HookDriver, request_id: str, since: int, until: int) -> str:
    """The reply text the hook had received for ``request_id`` between two events."""
    chunks = [_chunk(f) for f in _response_frames(driver, request_id, since, until)]
    return "".join(c["delta"] for c in chunks if c and c["type"] == "text-delta")


def test_a_hook_ends_with_the_full_reply_when_the_server_is_killed_mid_text(
    server: ServerProcess, tmp_path: Path
) -> None:
    with _driver(server, tmp_path) as driver:
        request_id, message_id, mark = _send_and_wait_for(driver, "text-delta", 10)
        closed, opened = _kill_and_restart(driver, server)
        shown = _text_before(driver, request_id, mark, closed)
        assert 0 < len(shown) < len(FULL_REPLY) and FULL_REPLY.startswith(shown)  # killed mid-text

        assistant = _check_final(driver, server, message_id)

        # Recovery continued the interrupted reply: continuation frames, whose start names no message (so
        # the client appends to the last one), stored under the message id the turn started with. If the
        # hook reconnected before recovery had decided, it first got a replay of the killed stream.
        frames = _response_frames(driver, request_id, opened)
        continued = [f for f in frames if f.get("continuation")]
        assert [f for f in continued if f.get("body")], driver.report()
        assert all(f.get("replay") for f in frames if not f.get("continuation")), driver.report()
        assert all("messageId" not in c for c in map(_chunk, continued) if c and c["type"] == "start")
        assert frames[-1]["done"] is True and frames[-1].get("continuation") is True, driver.report()
        assert frames[-1].get("outcome") == "completed", driver.report()
        # No part twice (#1951): the text parts are the partial, then the continuation; nothing repeated.
        texts = [p["text"] for p in assistant["parts"] if p["type"] == "text"]
        assert "".join(texts) == FULL_REPLY and len(texts) == 2 and texts[0], assistant


def test_a_hook_ends_with_the_full_reply_when_the_server_is_killed_before_any_text(
    server: ServerProcess, tmp_path: Path
) -> None:
    with _driver(server, tmp_path, prefix="slow-") as driver:
        request_id, _, mark = _send_and_wait_for(driver, "start")
        closed, opened = _kill_and_restart(driver, server)  # the model "thinks" for a second first
        assert _text_before(driver, request_id, mark, closed) == ""

        assistant = _check_final(driver, server)

        # Nothing was streamed, so recovery retried the same request: a fresh, non-continuation stream
        # under the same request id; the user message was not stored again (_check_final).
        frames = _response_frames(driver, request_id, opened)
        live_starts = [c for f in frames if not f.get("replay") and (c := _chunk(f)) and c["type"] == "start"]
        assert [c["messageId"] for c in live_starts] in ([assistant["id"]], []), driver.report()
        assert not any(f.get("continuation") for f in frames), driver.report()
        assert frames[-1]["done"] is True and frames[-1].get("outcome") == "completed", driver.report()
        assert _shapes(assistant) == ["step-start", "text:done"]
