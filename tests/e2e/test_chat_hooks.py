"""The stock React chat hooks against a real ``ponder serve``: issue 3's acceptance test.

``tests/js/hook-scenario.mjs`` renders the real ``useAgent`` (``agents/react``) and ``useAgentChat``
(``@cloudflare/ai-chat/react``) under Node 20 with ``react-test-renderer`` and ``ws``, drives the
hook the way a UI would (``sendMessage``, ``addToolApprovalResponse``, ``regenerate``, ``stop``,
``clearHistory``, ``onToolCall`` + ``addToolOutput``) and prints JSON lines: every frame its socket
received and sent, every change of the hook's state, and the hook's messages after each step.

One server (``tests/e2e/apps/chat_app.py``, its own SQLite store) serves the whole module. Each
scenario runs once under its own agent name, which also picks the agent's ``ScriptedModel`` script,
and the tests check both what the hook showed and what the server stored (``GET …/get-messages``,
and ``GET …/branches`` for the regenerated answer). Needs ``npm ci --prefix tests/js``.

Two tests pin down server bugs found here (they were strict xfails until fixed): the hook must show no
error through the continuation after an approved tool (the approved call's output reaches WebSocket
clients as ``cf_agent_message_updated``, not as a chunk), and the request after a ``stop()`` must not
overwrite the stored partial reply (the server keeps its own copy of a stored assistant message).
"""

from __future__ import annotations

import copy
import json
import urllib.request
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from tests.support.server import REPO, ServerProcess

from ._node import ScenarioRun, node_binary, run_scenario

pytestmark = pytest.mark.slow

SCRIPT = "hook-scenario.mjs"
APP = REPO / "tests" / "e2e" / "apps" / "chat_app.py"
AGENT = "hook-chat"
RESPONSE = "cf_agent_use_chat_response"

BASIC_REPLY = "Hello from ponder! This reply streams to the hook word by word."
LIVE_REPLY = "Live from the other hook: both hooks see this reply as it streams."
CANCEL_FULL = " ".join(f"word{i}" for i in range(60))
WEATHER = {"city": "Lisbon", "temperature_c": 21, "summary": "sunny"}


# -- the server and the runs --------------------------------------------------------------------------


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    node_binary()  # fail early, with the install hint, when the npm clients are missing
    directory = tmp_path_factory.mktemp("hooks")
    store = "sqlite:////" + str((directory / "store.sqlite3").resolve()).lstrip("/")
    with ServerProcess(APP, store, directory / "server.log") as proc:
        yield proc


def _run(server: ServerProcess, scenario: str, name: str | None = None) -> tuple[ScenarioRun, str]:
    name = name or f"{scenario}-{uuid.uuid4().hex[:8]}"
    run = run_scenario(
        SCRIPT,
        scenario,
        "--host",
        f"127.0.0.1:{server.port}",
        "--name",
        name,
        timeout=40.0,
        context=lambda: f"--- server log ({server.log_path})\n{server.log()}",
    )
    return run, name


def _completed(run: ScenarioRun) -> None:
    finished = run.returncode == 0 and bool(run.of("done")) and not run.of("error") and not run.of("timeout")
    if not finished:
        pytest.fail(f"the hook driver did not complete its scenario\n{run.report()}", pytrace=False)


def _http(server: ServerProcess, path: str, body: Any = None) -> Any:
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(
        f"{server.base_url}{path}", data=data, headers={"content-type": "application/json"}
    )
    with urllib.request.urlopen(request, timeout=5) as resp:
        return json.loads(resp.read())


def _stored(server: ServerProcess, name: str) -> list[dict[str, Any]]:
    return _http(server, f"/agents/{AGENT}/{name}/get-messages")


@pytest.fixture(scope="module")
def basic_run(server: ServerProcess) -> tuple[ScenarioRun, str]:
    return _run(server, "basic")


@pytest.fixture(scope="module")
def tools_run(server: ServerProcess) -> tuple[ScenarioRun, str]:
    return _run(server, "tools")


@pytest.fixture(scope="module")
def approval_run(server: ServerProcess) -> tuple[ScenarioRun, str]:
    return _run(server, "approval")


@pytest.fixture(scope="module")
def regen_run(server: ServerProcess) -> tuple[ScenarioRun, str]:
    return _run(server, "regen")


@pytest.fixture(scope="module")
def cancel_run(server: ServerProcess) -> tuple[ScenarioRun, str]:
    return _run(server, "cancel")


@pytest.fixture(scope="module")
def live_run(server: ServerProcess) -> tuple[ScenarioRun, str]:
    return _run(server, "live")


SEED = [
    {"id": "seed-user-1", "role": "user", "parts": [{"type": "text", "text": "What is ponder?"}]},
    {
        "id": "seed-assistant-1",
        "role": "assistant",
        "parts": [
            {"type": "step-start"},
            {
                "type": "tool-get_weather",
                "toolCallId": "seed-call-1",
                "state": "output-available",
                "input": {"city": "Lisbon"},
                "output": WEATHER,
            },
            {"type": "text", "text": "A Python take on Think.", "state": "done"},
        ],
    },
]


@pytest.fixture(scope="module")
def initial_run(server: ServerProcess) -> tuple[ScenarioRun, str, list[dict[str, Any]]]:
    name = f"initial-{uuid.uuid4().hex[:8]}"
    assert _http(server, f"/agents/{AGENT}/{name}/seed", SEED) == {"stored": 2}
    stored = _stored(server, name)
    run, _ = _run(server, "initial", name)
    return run, name, stored


# -- helpers over a run -------------------------------------------------------------------------------


def _canonical(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Messages as the AI SDK assembles them. The server also stores ``toolName`` on static ``tool-*``
    parts (its documented message shape, docs/chat-messages.md); the AI SDK only keeps it on
    ``dynamic-tool`` parts, so the key is left out of the comparison."""
    out = copy.deepcopy(messages)
    for message in out:
        for part in message.get("parts", []):
            if str(part.get("type", "")).startswith("tool-"):
                part.pop("toolName", None)
    return out


def _text(message: dict[str, Any]) -> str:
    return "".join(p.get("text", "") for p in message["parts"] if p["type"] == "text")


def _shapes(message: dict[str, Any]) -> list[str]:
    return [f"{p['type']}:{p['state']}" if "state" in p else p["type"] for p in message["parts"]]


def _sent(run: ScenarioRun, client: str = "A") -> list[dict[str, Any]]:
    return [e["data"] for e in run.of("sent", client=client)]


def _response_frames(run: ScenarioRun, request_id: str, client: str = "A") -> list[dict[str, Any]]:
    return [f for f in run.frames(client) if f.get("type") == RESPONSE and f.get("id") == request_id]


def _chunks(frames: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [json.loads(f["body"]) for f in frames if f.get("body") and not f.get("error")]


def _check_stream(frames: list[dict[str, Any]], *, continuation: bool = False) -> dict[str, Any]:
    """One request's frames as the hook needs them: chunks numbered by seq from 0, then one terminal frame.

    A connection that resumed the stream (the hook does after a tool result or an approval) also gets a
    replay of the chunks it missed, under the same seqs; if its ACK arrives just after the stream ended,
    the server answers it with one more ``{"done": true, "replay": true}``, which the hook ignores."""
    live_end = next(i for i, f in enumerate(frames) if f["done"] and not f.get("replay"))
    chunk_frames, terminal, after = frames[:live_end], frames[live_end], frames[live_end + 1 :]
    seqs = {f["seq"] for f in chunk_frames if f.get("body")}
    assert seqs == set(range(len(seqs))), frames
    assert all(f["done"] is False and f.get("continuation", False) is continuation for f in chunk_frames), (
        frames
    )
    assert terminal["body"] == "" and terminal.get("continuation", False) is continuation, frames
    assert all(f["done"] is True and f.get("replay") is True and f["body"] == "" for f in after), frames
    return terminal


def _streamed_in_pieces(partials: list[str], final: str) -> bool:
    """At least two growing, strict prefixes of ``final`` were rendered before it was complete."""
    pieces = [p for p in partials if p != final]
    lengths = [len(p) for p in pieces]
    return len(pieces) >= 2 and lengths == sorted(set(lengths)) and all(final.startswith(p) for p in pieces)


# -- send a message, see the streamed reply -----------------------------------------------------------


def test_connect_greeting(basic_run: tuple[ScenarioRun, str]) -> None:
    run, name = basic_run
    _completed(run)
    frames = run.frames("A")
    assert frames[0] == {"type": "cf_agent_identity", "name": name, "agent": AGENT}, run.report()
    assert [f["type"] for f in frames[1:3]] == ["cf_agent_mcp_servers", "cf_agent_chat_messages"]
    assert frames[2] == {"type": "cf_agent_chat_messages", "messages": [], "connect": True}
    probe = _sent(run)[0]
    assert probe["type"] == "cf_agent_stream_resume_request"
    assert {"type": "cf_agent_stream_resume_none", "reason": "idle", "probeId": probe["probeId"]} in frames
    connected = run.one("connected", client="A")
    assert (connected["identified"], connected["name"], connected["agent"]) == (True, name, AGENT)


def test_send_message_streams_the_reply(basic_run: tuple[ScenarioRun, str], server: ServerProcess) -> None:
    run, name = basic_run
    _completed(run)
    result = run.one("result", what="send")
    assert result["send"]["ok"] is True, run.report()
    # The hook's own status, as a UI renders it.
    assert result["statuses"] == ["submitted", "streaming", "ready"], run.report()
    # The reply appeared piece by piece, not all at once.
    assert _streamed_in_pieces(result["partials"], BASIC_REPLY), result["partials"]

    (request,) = result["requests"]
    assert request["body"]["trigger"] == "submit-message"
    (sent_user,) = request["body"]["messages"]
    user, assistant = result["messages"]
    assert user == sent_user and user["role"] == "user" and _text(user) == "Hi there"
    assert assistant["role"] == "assistant"
    assert assistant["parts"] == [
        {"type": "step-start"},
        {"type": "text", "text": BASIC_REPLY, "state": "done"},
    ]

    frames = _response_frames(run, request["id"])
    terminal = _check_stream(frames)
    assert terminal["outcome"] == "completed" and terminal["messageIds"] == [user["id"]]
    chunks = _chunks(frames)
    assert chunks[0] == {"type": "start", "messageId": assistant["id"]}  # the id the server stores
    assert "".join(c["delta"] for c in chunks if c["type"] == "text-delta") == BASIC_REPLY
    assert [c["type"] for c in chunks][-2:] == ["finish-step", "finish"]
    # The transcript arrives before the terminal frame.
    all_frames = run.frames("A")
    transcript_at = max(i for i, f in enumerate(all_frames) if f["type"] == "cf_agent_chat_messages")
    assert transcript_at < all_frames.index(frames[-1])

    assert _canonical(_stored(server, name)) == _canonical(result["messages"])


# -- a server tool call with its output ---------------------------------------------------------------


def test_server_tool_call_and_output(tools_run: tuple[ScenarioRun, str], server: ServerProcess) -> None:
    run, name = tools_run
    _completed(run)
    result = run.one("result", what="send")
    _, assistant = result["messages"]
    assert _shapes(assistant) == [
        "step-start",
        "tool-get_weather:output-available",
        "step-start",
        "text:done",
    ], run.report()
    tool_part = assistant["parts"][1]
    assert tool_part["input"] == {"city": "Lisbon"}
    assert tool_part["output"] == WEATHER
    # The model got the tool's output back (the scripted reply quotes it).
    assert _text(assistant) == f"The get_weather tool returned {json.dumps(WEATHER, sort_keys=True)}"

    (request,) = result["requests"]
    frames = _response_frames(run, request["id"])
    assert _check_stream(frames)["outcome"] == "completed"
    types = [c["type"] for c in _chunks(frames)]
    order = ["tool-input-start", "tool-input-available", "tool-output-available", "text-start"]
    assert [types.index(t) for t in order] == sorted(types.index(t) for t in order), types
    assert _canonical(_stored(server, name)) == _canonical(result["messages"])


# -- an approval-gated tool: approved, then another call denied --------------------------------------


def test_approval_request_reaches_the_hook(approval_run: tuple[ScenarioRun, str]) -> None:
    run, _ = approval_run
    _completed(run)
    for label, path in (("approve", "a.txt"), ("deny", "b.txt")):
        event = run.one("approval_requested", label=label)
        part = event["part"]
        assert part["state"] == "approval-requested" and part["input"] == {"path": path}, run.report()
        (request,) = event["requests"]
        chunks = _chunks(_response_frames(run, request["id"]))
        approval = next(c for c in chunks if c["type"] == "tool-approval-request")
        assert approval == {
            "type": "tool-approval-request",
            "toolCallId": part["toolCallId"],
            "approvalId": part["approval"]["id"],
        }
        # The first turn ends normally, waiting for the user.
        assert _response_frames(run, request["id"])[-1]["outcome"] == "completed"


def test_approved_tool_runs_and_the_turn_continues(approval_run: tuple[ScenarioRun, str]) -> None:
    run, _ = approval_run
    _completed(run)
    requested = run.one("approval_requested", label="approve")
    result = run.one("result", what="approve")
    call_id = result["tool_call_id"]
    assert result["sent"][0] == {
        "type": "cf_agent_tool_approval",
        "toolCallId": call_id,
        "approved": True,
        "autoContinue": True,
    }, run.report()
    # The hook then asks to be attached to the continuation, and is.
    probe = result["sent"][1]
    assert probe["type"] == "cf_agent_stream_resume_request", run.report()
    # The server's transcript after the continuation (what the hook should show, see the next test).
    _, assistant = result["transcript"]
    # The continuation extends the same assistant message.
    assert assistant["id"] == requested["messages"][1]["id"]
    assert _shapes(assistant) == [
        "step-start",
        "tool-delete_file:output-available",
        "step-start",
        "text:done",
    ], run.report()
    part = assistant["parts"][1]
    assert part["output"] == "a.txt deleted"
    assert part["approval"] == {"id": result["approval_id"], "approved": True}
    assert _text(assistant) == 'The delete_file tool returned "a.txt deleted"'
    request_id = _check_continuation_frames(run, call_id, "approval-responded")
    assert {"type": "cf_agent_stream_resuming", "id": request_id, "probeId": probe["probeId"]} in run.frames(
        "A"
    )
    assert {"type": "cf_agent_stream_resume_ack", "id": request_id} in result["sent"]


def test_the_hook_shows_no_error_through_the_approved_continuation(
    approval_run: tuple[ScenarioRun, str],
) -> None:
    run, _ = approval_run
    _completed(run)
    result = run.one("result", what="approve")
    assert result["errors"] == [], result["errors"]
    assert result["statuses"][-1] == "ready", result["statuses"]
    assert result["agrees_with_server"] is True
    assert _canonical(result["messages"]) == _canonical(result["transcript"])


def test_denied_tool_does_not_run(approval_run: tuple[ScenarioRun, str], server: ServerProcess) -> None:
    run, name = approval_run
    _completed(run)
    result = run.one("result", what="deny")
    call_id = result["tool_call_id"]
    assert result["sent"][0] == {
        "type": "cf_agent_tool_approval",
        "toolCallId": call_id,
        "approved": False,
        "autoContinue": True,
    }, run.report()
    assert len(result["messages"]) == 4
    assistant = result["messages"][3]
    assert _shapes(assistant) == [
        "step-start",
        "tool-delete_file:output-denied",
        "step-start",
        "text:done",
    ], run.report()
    part = assistant["parts"][1]
    assert "output" not in part
    assert part["approval"] == {"id": result["approval_id"], "approved": False}
    assert _text(assistant) == "The delete_file tool failed: Tool execution was denied by the user."
    assert result["errors"] == [] and result["statuses"][-1] == "ready", run.report()
    assert result["agrees_with_server"] is True
    assert "b.txt deleted" not in json.dumps(run.frames("A"))
    _check_continuation_frames(run, call_id, "output-denied")
    assert _canonical(_stored(server, name)) == _canonical(result["messages"])


def _check_continuation_frames(run: ScenarioRun, call_id: str, updated_state: str) -> str:
    """The approval is applied and broadcast, then a continuation streams; returns its request id."""
    frames = run.frames("A")
    updated = [
        f
        for f in frames
        if f["type"] == "cf_agent_message_updated"
        and any(p.get("toolCallId") == call_id for p in f["message"]["parts"])
    ]
    assert updated, run.report()
    assert updated[0]["message"]["parts"][1]["state"] == updated_state
    after = frames[frames.index(updated[0]) :]
    request_id = next(f["id"] for f in after if f["type"] == RESPONSE and f.get("continuation"))
    continuation = _response_frames(run, request_id)
    terminal = _check_stream(continuation, continuation=True)
    assert terminal["outcome"] == "completed"
    assert _chunks(continuation)[0] == {"type": "start"}  # no messageId: it extends the last message
    return request_id


# -- regenerate: the old answer stays as a branch -----------------------------------------------------


def test_regenerate_keeps_the_old_answer_as_a_branch(
    regen_run: tuple[ScenarioRun, str], server: ServerProcess
) -> None:
    run, name = regen_run
    _completed(run)
    first = run.one("result", what="send")
    user, old = first["messages"]
    assert _text(old) == "First answer: the chicken crossed the road."

    regen = run.one("result", what="regenerate")
    assert regen["regenerate"]["ok"] is True, run.report()
    assert regen["statuses"] == ["submitted", "streaming", "ready"], run.report()
    (request,) = regen["requests"]
    assert request["body"]["trigger"] == "regenerate-message"
    assert request["body"]["messages"] == [user]  # the old answer is not sent back
    assert [m["id"] for m in regen["messages"]] == [user["id"], regen["messages"][1]["id"]]
    new = regen["messages"][1]
    assert new["id"] != old["id"]
    assert _text(new) == "Second answer: the chicken stayed home."

    assert _canonical(_stored(server, name)) == _canonical(regen["messages"])
    branches = _http(server, f"/agents/{AGENT}/{name}/branches?of={user['id']}")
    assert [b["id"] for b in branches] == [old["id"], new["id"]], branches
    assert [_text(b) for b in branches] == [_text(old), _text(new)]


# -- cancel mid-stream --------------------------------------------------------------------------------


def test_stop_cancels_the_turn_mid_stream(cancel_run: tuple[ScenarioRun, str]) -> None:
    run, _ = cancel_run
    _completed(run)
    result = run.one("result", what="stop")
    assert result["stop"]["ok"] is True and result["send"]["ok"] is True, run.report()
    assert result["statuses"] == ["submitted", "streaming", "ready"], run.report()
    (request,) = result["requests"]
    cancel = {"id": request["id"], "type": "cf_agent_chat_request_cancel"}
    assert cancel in result["sent"], run.report()

    frames = _response_frames(run, request["id"])
    terminal = frames[-1]
    assert terminal["done"] is True and terminal["outcome"] == "aborted", run.report()
    sent_at = next(e["ms"] for e in run.of("sent", client="A") if e["data"] == cancel)
    ended_at = next(e["ms"] for e in run.of("frame", client="A") if e["data"] == terminal)
    assert ended_at - sent_at < 2000, "the server took too long to abort the turn"

    # The partial reply is stored (the transcript sent right after the abort): what the hook had
    # shown, closed as done, and not the whole scripted text.
    partial = _aborted_reply(run, request["id"])
    assert partial["role"] == "assistant" and partial["id"] == result["messages"][1]["id"]
    assert _shapes(partial) == ["step-start", "text:done"], run.report()
    text = _text(partial)
    assert result["text_before_stop"] and text.startswith(result["text_before_stop"]), run.report()
    assert CANCEL_FULL.startswith(text.rstrip()) and len(text.split()) < 60


def _aborted_reply(run: ScenarioRun, request_id: str) -> dict[str, Any]:
    """The assistant message of the transcript the server broadcast right before the aborted terminal."""
    frames = run.frames("A")
    terminal = frames.index(_response_frames(run, request_id)[-1])
    transcript = next(f for f in reversed(frames[:terminal]) if f["type"] == "cf_agent_chat_messages")
    return transcript["messages"][-1]


def test_the_agent_answers_after_a_cancel(cancel_run: tuple[ScenarioRun, str], server: ServerProcess) -> None:
    run, name = cancel_run
    _completed(run)
    after = run.one("result", what="send-after-cancel")
    assert after["statuses"] == ["submitted", "streaming", "ready"], run.report()
    assert [m["role"] for m in after["messages"]] == ["user", "assistant", "user", "assistant"]
    assert _text(after["messages"][3]) == "Still here after the cancel."
    # The hook and the server agree on the whole conversation, the cancelled reply included.
    assert _canonical(_stored(server, name)) == _canonical(after["messages"])


def test_the_cancelled_reply_is_not_overwritten_by_the_next_request(
    cancel_run: tuple[ScenarioRun, str], server: ServerProcess
) -> None:
    run, name = cancel_run
    _completed(run)
    (request,) = run.one("result", what="stop")["requests"]
    after = run.one("result", what="send-after-cancel")
    stale = after["requests"][0]["body"]["messages"][1]
    assert stale["parts"][-1]["state"] == "streaming"  # what the hook sends back (AI SDK behaviour)
    assert _stored(server, name)[1] == _aborted_reply(run, request["id"])


# -- a second hook sees the other's turn live; clear ---------------------------------------------------


def test_second_hook_sees_the_turn_live(live_run: tuple[ScenarioRun, str]) -> None:
    run, _ = live_run
    _completed(run)
    turn = run.one("result", what="turn")
    a, b = turn["a"], turn["b"]
    assert a["statuses"] == ["submitted", "streaming", "ready"], run.report()
    assert _text(a["messages"][1]) == LIVE_REPLY
    # B never sent a request of its own, and rendered A's reply while it streamed.
    assert not [f for f in b["sent"] if f["type"] == "cf_agent_use_chat_request"]
    assert b["statuses"] == ["ready"]
    assert b["server_streaming_seen"] is True, run.report()
    assert _streamed_in_pieces(b["partials"], LIVE_REPLY), b["partials"]
    assert b["partials"][-1] == LIVE_REPLY
    assert b["messages"] == a["messages"]

    # B got A's user message as a transcript before the first chunk of the reply.
    (request,) = a["requests"]
    frames_b = run.frames("B")
    first_chunk = next(
        i for i, f in enumerate(frames_b) if f["type"] == RESPONSE and f["id"] == request["id"]
    )
    early = [
        f for f in frames_b[:first_chunk] if f["type"] == "cf_agent_chat_messages" and not f.get("connect")
    ]
    assert early and early[-1]["messages"] == [a["messages"][0]], run.report()
    # And every frame of the request, like A.
    assert _response_frames(run, request["id"], "B") == _response_frames(run, request["id"], "A")


def test_clear_empties_both_hooks_and_the_server(
    live_run: tuple[ScenarioRun, str], server: ServerProcess
) -> None:
    run, name = live_run
    _completed(run)
    clear = run.one("result", what="clear")
    assert {"type": "cf_agent_chat_clear"} in clear["a_sent"], run.report()
    assert clear["a_messages"] == [] and clear["b_messages"] == []
    assert {"type": "cf_agent_chat_clear"} in clear["b_frames"]
    assert {"type": "cf_agent_chat_clear"} not in clear["a_frames"]  # the clearer is not told again
    assert _stored(server, name) == []


# -- initial messages via /get-messages ---------------------------------------------------------------


def test_initial_messages_come_from_get_messages(
    initial_run: tuple[ScenarioRun, str, list[dict[str, Any]]],
) -> None:
    run, name, stored = initial_run
    _completed(run)
    assert [m["id"] for m in stored] == [m["id"] for m in SEED]
    result = run.one("result", what="initial")
    fetches = [f for f in result["fetches"] if "/get-messages" in f["url"]]
    assert len(fetches) == 1, result["fetches"]
    assert fetches[0]["url"].endswith(f"/agents/{AGENT}/{name}/get-messages")
    assert (fetches[0]["method"], fetches[0]["status"]) == ("GET", 200)
    # The hook's very first commit already shows the stored conversation: it can only come from the
    # HTTP fetch, because the hook listens to the socket only after that commit.
    assert _canonical(result["first_commit"]["messages"]) == _canonical(stored), run.report()
    assert _canonical(result["messages"]) == _canonical(stored)


# -- a client tool answered by the hook ----------------------------------------------------------------


@pytest.fixture(scope="module")
def client_run(server: ServerProcess) -> tuple[ScenarioRun, str]:
    return _run(server, "client")


def test_client_tool_answered_by_the_hook(client_run: tuple[ScenarioRun, str], server: ServerProcess) -> None:
    run, name = client_run
    _completed(run)
    result = run.one("result", what="client")
    assert result["executed"] == [{"precise": True}]
    (request, *_) = result["requests"]
    assert request["body"]["clientTools"] == [
        {
            "name": "getLocation",
            "description": "Where the user is, from the browser.",
            "parameters": {
                "type": "object",
                "properties": {"precise": {"type": "boolean"}},
                "required": ["precise"],
            },
        }
    ]
    # The first turn ended with the call waiting for the browser; onToolCall answered it.
    (first,) = run.of("on_tool_call")
    assert first["toolCall"]["toolName"] == "getLocation" and first["toolCall"]["input"] == {"precise": True}
    tool_result = next(f for f in result["sent"] if f["type"] == "cf_agent_tool_result")
    assert tool_result["toolCallId"] == first["toolCall"]["toolCallId"]
    assert tool_result["toolName"] == "getLocation"
    assert tool_result["output"] == {"city": "Lisbon", "precise": True}
    assert tool_result["autoContinue"] is True
    assistant = result["messages"][-1]
    assert _shapes(assistant) == [
        "step-start",
        "tool-getLocation:output-available",
        "step-start",
        "text:done",
    ], run.report()
    output = {"city": "Lisbon", "precise": True}
    assert assistant["parts"][1]["output"] == output
    # The model got the browser's answer (the scripted reply quotes it), in the same assistant message.
    assert _text(assistant) == f"The getLocation tool returned {json.dumps(output, sort_keys=True)}"
    assert [m["role"] for m in result["messages"]] == ["user", "assistant"]
    _check_continuation_frames(run, tool_result["toolCallId"], "output-available")
    assert _canonical(_stored(server, name)) == _canonical(result["messages"])
