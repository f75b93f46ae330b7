"""Issue 6's chaos acceptance test: ``kill -9`` at random points across many turns, restart each time,
with the stock React chat hook as the client.

The real server (``ponder serve tests/chaos/apps/chaos_app.py``) runs in a subprocess on one SQLite store
and one port. ``ChaosChat``'s ``ScriptedModel`` answers deterministically from the user text: every call
"thinks" for 0.06 s, then streams with 0.015 s between chunks, sometimes through the idempotent server
tool ``square`` and, for a few turns, the approval-gated ``confirm``.

The client is the real ``useAgent`` + ``useAgentChat`` (``tests/js/hook-driver.mjs``), mounted once in a
long-lived Node process for the whole run: it sends the chat turns, approves the waiting calls, and its
socket reconnects by itself after every restart (the hook resumes on its own). Some turns are sent
instead as ``POST …/submissions``; the hook watches those as a second tab would.

Scale (under 2 minutes on 2 cores): ``TURNS = 50`` turns, ``KILLS = 20`` of them killed, kill points drawn
by ``random.Random(SEED)`` (``CHAOS_SEED`` overrides the seed) from what the hook receives: before
streaming (0–20 ms after the turn's ``start`` chunk, while the model thinks), mid-text (after 2–12 text
deltas), mid-tool (at the tool's input or its settled output), during the approval wait (at
``tool-approval-request``, or after the turn ended waiting on the human) and during a submission drain
(once the submission is ``running``, plus 0–150 ms). When a kill leaves an orphaned turn, 30 % of the time
the restarted server is killed again 0–200 ms later, while it recovers that turn. After each kill the
server restarts on the same store and port, and the test waits for recovery by polling the store
read-only (no fibers, no pending/running submission) and ``GET …/get-messages``; a request the server
never stored is sent again through the hook (as a user would), and a call left waiting on a human is
approved through the hook. After every turn the hook must be ``ready`` (not recovering, not streaming) and
show exactly the stored transcript, and no "recovering" flag may be left in the store.

At the end: every user message is answered exactly once (the answer carries its ``end-<i>`` marker once)
or ended with the terminal message; no message id, tool call or marker is duplicated; every tool result
the hook saw settled is stored with the same output; every submission is in a final status; a freshly
mounted hook (a reloaded page: ``/get-messages``, then the socket) shows exactly the stored transcript,
which equals the stored rows. The counts are printed.

A kill between storing a chat request's messages and the start of its turn
(``test_kill_between_storing_a_request_and_its_turn``) is covered by the acceptance record Think writes
before storing the messages (``Agent.record_fiber``): recovery retries it at the next wake. A recovery that
is settled by a later restart (killed again between the end of the continuation's stream and the end of its
turn) must clear the "recovering" flag (``test_a_recovery_settled_by_a_later_restart_clears_the_recovering_flag``).
Those two tests hold a turn at a precise point by its request id, which the hook cannot choose, so they speak
the protocol from Python.
"""

from __future__ import annotations

import json
import os
import random
import sqlite3
import time
import urllib.request
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from tests.e2e._hook_driver import HookDriver
from tests.e2e._node import node_binary
from tests.support.server import REPO, ServerProcess
from tests.support.wsclient import AgentSocket

pytestmark = pytest.mark.slow

APP = REPO / "tests" / "chaos" / "apps" / "chaos_app.py"
AGENT, NAME = "chaos-chat", "run"
AGENT_ID = f"{AGENT}/{NAME}"
SEED, TURNS, KILLS = int(os.environ.get("CHAOS_SEED", "20260601")), 50, 20
TERMINAL = "The assistant was interrupted and could not recover. Please try again."
KILL_TYPES = ["before", "mid-text", "mid-tool", "approval", "submission"]
FINAL = {"completed", "aborted", "skipped", "error"}
RESPONSE = "cf_agent_use_chat_response"


def chunk_of(frame: dict[str, Any]) -> dict[str, Any] | None:
    if frame.get("type") != RESPONSE or not frame.get("body") or frame.get("error"):
        return None
    try:
        chunk = json.loads(frame["body"])
    except ValueError:
        return None
    return chunk if isinstance(chunk, dict) else None


def text_of(message: dict[str, Any]) -> str:
    return "".join(p.get("text", "") for p in message["parts"] if p.get("type") == "text")


def tool_parts(message: dict[str, Any]) -> list[dict[str, Any]]:
    return [p for p in message["parts"] if "toolCallId" in p]


def canonical(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Messages as the AI SDK keeps them: the server also stores ``toolName`` on static tool parts."""
    out = json.loads(json.dumps(messages))
    for message in out:
        for part in message["parts"]:
            if str(part.get("type", "")).startswith("tool-"):
                part.pop("toolName", None)
    return out


class Chaos:
    def __init__(self, tmp_path: Path) -> None:
        self.tmp = tmp_path
        self.db = tmp_path / "chaos.sqlite3"
        self.server = ServerProcess(APP, f"sqlite:///{self.db}", tmp_path / "server1.log")
        self.starts = 0
        self.hook: HookDriver | None = None
        self.counts: Counter[str] = Counter()

    # -- the server -----------------------------------------------------------------------------------

    def start(self) -> None:
        """Start (or restart) the server: same store, same port, a new log file."""
        self.starts += 1
        self.server.log_path = self.tmp / f"server{self.starts}.log"
        self.server.start()

    def kill(self, kind: str, rng: random.Random) -> None:
        """SIGKILL and restart; sometimes kill the restarted server again while it recovers the turn.

        Returns once the hook (if mounted) has seen the kill and its socket is open again: it reconnects by
        itself."""
        mark = self.hook.mark() if self.hook else 0
        self.server.kill9()
        self.counts[f"kill:{kind}"] += 1
        if self.fibers():
            self.counts["kills leaving an orphaned turn"] += 1
            if rng.random() < 0.3:
                self.start()
                time.sleep(rng.uniform(0.0, 0.2))  # a random kill point while the turn is retried / continued
                if self.fibers():
                    self.server.kill9()
                    self.counts["kill:during recovery"] += 1
        if self.server.proc is None or self.server.proc.poll() is not None:
            self.start()
        if self.hook is not None:
            closed = self.hook.wait_event(
                lambda e: e["event"] == "close", "the hook to see the kill", since=mark
            )
            self.hook.wait_event(
                lambda e: e["event"] == "open", "the hook to reconnect", since=closed["i"], timeout=30
            )

    def log(self) -> str:
        return f"--- server log ({self.server.log_path})\n{self.server.log()}"

    # -- reading state --------------------------------------------------------------------------------

    def http(self, method: str, path: str, body: Any = None) -> Any:
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(
            f"{self.server.base_url}/agents/{AGENT}/{NAME}/{path}",
            data=data,
            method=method,
            headers={"content-type": "application/json"},
        )
        with urllib.request.urlopen(req, timeout=10) as resp:
            return json.loads(resp.read())

    def messages(self) -> list[dict[str, Any]]:
        return self.http("GET", "get-messages")

    def rows(self, sql: str) -> list[dict[str, Any]]:
        if not self.db.exists():
            return []
        conn = sqlite3.connect(f"file:{self.db}?mode=ro", uri=True, timeout=5)
        conn.row_factory = sqlite3.Row
        try:
            return [dict(r) for r in conn.execute(sql, (AGENT_ID,))]
        except sqlite3.OperationalError as exc:  # a table not created yet
            if "no such table" in str(exc):
                return []
            raise
        finally:
            conn.close()

    def fibers(self) -> list[dict[str, Any]]:
        return self.rows("SELECT id FROM ponder_fibers WHERE agent_id = ?")

    def quiet(self) -> bool:
        busy = self.rows(
            "SELECT submission_id FROM ponder_think_submissions"
            " WHERE agent_id = ? AND status IN ('pending', 'running')"
        )
        return not self.fibers() and not busy

    def until(self, condition: Any, what: str, limit: float = 20.0) -> Any:
        """Poll another process's durable state until ``condition()`` is truthy (it has no events)."""
        deadline = time.monotonic() + limit
        while time.monotonic() < deadline:
            value = condition()
            if value:
                return value
            time.sleep(0.03)
        raise AssertionError(f"timed out waiting for {what}\n{self.log()}")

    def answer_to(self, text: str) -> dict[str, Any] | bool | None:
        """The message after user ``text``; None if it is not answered yet, False if ``text`` is not stored."""
        msgs = self.messages()
        for k, m in enumerate(msgs):
            if m["role"] == "user" and text_of(m) == text:
                return msgs[k + 1] if k + 1 < len(msgs) else None
        return False

    # -- the hook -------------------------------------------------------------------------------------

    def mount_hook(self) -> HookDriver:
        self.hook = HookDriver(
            f"127.0.0.1:{self.server.port}", NAME, AGENT, self.tmp / "hook.stderr", context=self.log
        )
        self.hook.start()
        self.hook.call("connected")
        return self.hook

    def settled_results(self) -> dict[str, Any]:
        """toolCallId → output of every tool result the hook saw settled (live or replayed)."""
        assert self.hook is not None
        out: dict[str, Any] = {}
        for frame in self.hook.frames():
            chunk = chunk_of(frame)
            if chunk and chunk.get("type") == "tool-output-available" and not chunk.get("preliminary"):
                out[chunk["toolCallId"]] = chunk["output"]
        return out

    def hook_agrees(self, statuses: tuple[str, ...] = ("ready",)) -> dict[str, Any]:
        """Wait until the hook is idle (status in ``statuses``) and shows exactly the stored transcript.

        Also: with recovery settled, no "recovering" flag is left behind (every client that connects while
        it is set is told a recovery is in progress)."""
        assert self.hook is not None
        flag = self.rows("SELECT value FROM ponder_think_config WHERE agent_id = ? AND key = 'recovering'")
        assert not flag, f"recovery settled but the recovering flag is still set: {flag}\n{self.log()}"
        stored = self.messages()
        state = self.hook.call(
            "idle", statuses=list(statuses), transcript=stored, timeout_ms=15000, timeout=20
        )
        self.counts[f"hook status after a turn: {state['status']}"] += 1
        return state

    # -- driving turns --------------------------------------------------------------------------------

    def hook_turn(self, text: str, kill: str | None, rng: random.Random) -> None:
        """``text`` sent by the hook; the kill point is picked from the frames the hook receives."""
        hook = self.hook
        assert hook is not None
        mark = hook.mark()
        hook.call("send", text=text)
        self.counts["hook requests"] += 1
        sent = hook.wait_event(
            lambda e: e["event"] == "sent" and e["data"].get("type") == "cf_agent_use_chat_request",
            "the hook's chat request",
            since=mark,
        )
        request_id = sent["data"]["id"]

        def ours(kind: str) -> Any:
            return lambda e: (
                e["event"] == "frame"
                and e["data"].get("id") == request_id
                and (chunk_of(e["data"]) or {}).get("type") == kind
            )

        def done(e: dict[str, Any]) -> bool:
            return (
                e["event"] == "frame" and e["data"].get("id") == request_id and e["data"].get("done") is True
            )

        if kill is None:
            hook.wait_event(done, "the turn to end", since=mark, timeout=30)
        else:
            if kill == "before":  # the turn started (fiber, stream opened), the model still thinks
                hook.wait_event(ours("start"), "the turn's start chunk", since=mark)
                time.sleep(rng.uniform(0.0, 0.02))  # a random kill point, not a wait for anything
            elif kill == "mid-text":
                at = mark
                for _ in range(rng.randint(2, 12)):
                    at = hook.wait_event(ours("text-delta"), "text deltas", since=at)["i"] + 1
            elif kill == "mid-tool":
                kind = rng.choice(["tool-input-available", "tool-output-available"])
                hook.wait_event(ours(kind), kind, since=mark)
            elif kill == "approval":
                # At the request chunk (the turn in flight), or once the turn has ended waiting on a human.
                hook.wait_event(ours("tool-approval-request"), "the approval request", since=mark)
                if rng.random() < 0.5:
                    hook.wait_event(done, "the turn to end waiting for the approval", since=mark)
            self.kill(kill, rng)
        self.finish(text, resend=True)

    def submission_turn(self, text: str, kill: bool, rng: random.Random) -> None:
        sub_id = f"s-{uuid.uuid4().hex[:8]}"
        user = {"id": f"u-{uuid.uuid4().hex[:8]}", "role": "user", "parts": [{"type": "text", "text": text}]}
        accepted = self.http("POST", "submissions", {"messages": [user], "submission_id": sub_id})
        assert accepted["accepted"] is True
        self.counts["http submissions"] += 1
        if kill:
            self.until(
                lambda: self.http("GET", f"submissions/{sub_id}")["status"] != "pending",
                "submission running",
                20,
            )
            time.sleep(rng.uniform(0.0, 0.15))  # a random kill point in the drain
            self.kill("submission", rng)
        self.until(
            lambda: self.http("GET", f"submissions/{sub_id}")["status"] in FINAL, "submission final", 30
        )
        self.finish(text, resend=False)

    def finish(self, text: str, *, resend: bool) -> None:
        """Let recovery settle, make sure ``text`` is answered (resend / approve through the hook, as a user
        would), then wait until the hook shows exactly the stored transcript."""
        assert self.hook is not None
        marker = f"end-{text.split()[1]}"
        for _ in range(4):
            self.until(self.quiet, "recovery to settle (no fibers, no running submission)")
            # [answer]: False if text is not stored, else the message after it (the store is polled until
            # there is one)
            (answer,) = self.until(
                lambda: None if (a := self.answer_to(text)) is None else [a], f"{text!r} answered?"
            )
            if answer is False:
                assert resend, f"submission {text!r} was accepted but its message is not stored"
                self.counts["resent (never stored)"] += 1
                self.hook_agrees()  # the hook dropped the unsent message when it got the transcript
                self.hook.call("send", text=text)
                continue
            waiting = [p for p in tool_parts(answer) if p.get("state") == "approval-requested"]
            if waiting:
                self.hook_agrees()
                for part in waiting:
                    self.hook.call("approve", toolCallId=part["toolCallId"])
                    self.counts["approvals sent"] += 1
                self.until(
                    lambda: (a := self.answer_to(text)) and marker in text_of(a), f"{text!r} after approval"
                )
                continue
            if marker in text_of(answer):
                self.hook_agrees()
                return
            if TERMINAL in text_of(answer):  # recovery gave up: the hook may show the error it was sent
                self.hook_agrees(("ready", "error"))
                return
            time.sleep(0.05)  # answered, but not finished: the store is polled again
        raise AssertionError(f"{text!r} never answered: {self.answer_to(text)}\n{self.log()}")


def plan(rng: random.Random) -> list[tuple[str, str, str | None]]:
    """(kind, transport, kill type) per turn."""
    kills = dict(zip(rng.sample(range(TURNS), KILLS), [KILL_TYPES[k % 5] for k in range(KILLS)], strict=True))
    turns: list[tuple[str, str, str | None]] = []
    for i in range(TURNS):
        kill = kills.get(i)
        if kill == "mid-text":
            turns.append(("plain", "hook", kill))
        elif kill == "mid-tool":
            turns.append(("tool", "hook", kill))
        elif kill == "approval":
            turns.append(("approve", "hook", kill))
        elif kill == "submission":
            turns.append((rng.choice(["plain", "tool"]), "http", kill))
        elif kill == "before":
            turns.append((rng.choice(["plain", "tool"]), "hook", kill))
        else:
            kind = rng.choices(["plain", "tool", "approve"], [6, 3, 1])[0]
            transport = "http" if kind != "approve" and rng.random() < 0.25 else "hook"
            turns.append((kind, transport, None))
    return turns


def test_chaos_kill9_across_turns(tmp_path: Path) -> None:
    node_binary()  # fail early, with the install hint, when the npm clients are missing
    began = time.monotonic()
    rng = random.Random(SEED)
    chaos = Chaos(tmp_path)
    chaos.start()
    texts: list[str] = []
    try:
        hook = chaos.mount_hook()
        for i, (kind, transport, kill) in enumerate(plan(rng)):
            text = f"{kind} {i}"
            texts.append(text)
            chaos.counts[f"turn:{kind}"] += 1
            if transport == "http":
                chaos.submission_turn(text, kill == "submission", rng)
            else:
                chaos.hook_turn(text, kill, rng)

        # -- final checks ------------------------------------------------------------------------------
        msgs = chaos.messages()
        ids = [m["id"] for m in msgs]
        assert len(ids) == len(set(ids)), "duplicated message id"
        users = [text_of(m) for m in msgs if m["role"] == "user"]
        assert users == texts, "every user message stored exactly once, in order"
        assert [m["role"] for m in msgs] == ["user", "assistant"] * TURNS, "one answer per user message"
        terminal = 0
        call_ids: list[str] = []
        for user, answer in zip(msgs[::2], msgs[1::2], strict=True):
            i = text_of(user).split()[1]
            body = text_of(answer)
            if TERMINAL in body:
                terminal += 1
            else:
                assert body.count(f"end-{i}") == 1, f"answer to {text_of(user)!r} not exactly once: {body!r}"
            for part in tool_parts(answer):
                call_ids.append(part["toolCallId"])
                assert part["state"] in ("output-available", "output-error"), part
                if part["state"] == "output-available" and part["type"] == "tool-square":
                    n = part["input"]["n"]
                    assert part["output"] == {"n": n, "square": n * n}
        assert len(call_ids) == len(set(call_ids)), "duplicated tool part"
        by_id = {p["toolCallId"]: p for m in msgs for p in tool_parts(m)}
        settled = chaos.settled_results()
        for call_id, output in settled.items():
            assert call_id in by_id, f"settled tool result {call_id} lost"
            assert by_id[call_id]["state"] == "output-available" and by_id[call_id]["output"] == output

        subs = chaos.rows("SELECT submission_id, status FROM ponder_think_submissions WHERE agent_id = ?")
        assert subs and all(s["status"] in FINAL for s in subs), subs
        listed = chaos.http("GET", "submissions?limit=100")["submissions"]
        assert sorted(s["status"] for s in listed) == sorted(s["status"] for s in subs)

        stored = chaos.rows("SELECT id, role FROM ponder_session_messages WHERE agent_id = ? ORDER BY seq")
        assert [(r["id"], r["role"]) for r in stored] == [(m["id"], m["role"]) for m in msgs]

        # The hook that lived through every kill shows the stored transcript; so does a reloaded page.
        assert canonical(hook.call("state")["messages"]) == canonical(msgs)
        hook.call("unmount")
        hook.call("mount", client="B")
        view = hook.call("connected", client="B")
        assert canonical(view["messages"]) == canonical(msgs), "a reconnecting client's view equals the store"

        elapsed = time.monotonic() - began
        counts = {
            "turns": TURNS,
            "kills": sum(v for k, v in chaos.counts.items() if k.startswith("kill:")),
            "planned kill points": KILLS,
            "restarts": chaos.starts - 1,
            "answered with marker": TURNS - terminal,
            "ended with terminal message": terminal,
            "tool parts": len(call_ids),
            "settled results seen by the hook": len(settled),
            "interrupted tool parts (output-error)": sum(
                1 for m in msgs for p in tool_parts(m) if p["state"] == "output-error"
            ),
            "submission statuses": dict(Counter(s["status"] for s in subs)),
            "hook reconnects": len(hook.of("open", client="A")) - 1,
            "frames the hook received": len(hook.frames()),
            **{k: v for k, v in sorted(chaos.counts.items())},
            "seconds": round(elapsed, 1),
        }
        print("chaos counts:", json.dumps(counts, indent=1))
    finally:
        if chaos.hook is not None:
            chaos.hook.close()
        if chaos.server.proc and chaos.server.proc.poll() is None:
            chaos.server.terminate()


async def send_plain_request(chaos: Chaos, request_id: str) -> AgentSocket:
    """Open a socket and send the chat request "plain 0" as the stock client does; return the socket."""
    assert chaos.server is not None
    sock = await AgentSocket.open(chaos.server.ws_url, AGENT, NAME)
    await sock.handshake()
    user = {"id": f"u-{uuid.uuid4().hex[:8]}", "role": "user", "parts": [{"type": "text", "text": "plain 0"}]}
    body = {"messages": [user], "trigger": "submit-message"}
    init = {"method": "POST", "body": json.dumps(body)}
    await sock.ws.send(json.dumps({"type": "cf_agent_use_chat_request", "id": request_id, "init": init}))
    return sock


async def test_kill_between_storing_a_request_and_its_turn(tmp_path: Path) -> None:
    chaos = Chaos(tmp_path)
    chaos.start()
    try:
        sock = await send_plain_request(chaos, f"hold-{uuid.uuid4().hex[:8]}")
        chaos.until(lambda: chaos.answer_to("plain 0") is None, "the request's message to be stored")
        chaos.kill("stored, no fiber yet", random.Random(SEED))
        await sock.close()
        chaos.until(chaos.quiet, "recovery to settle")
        answered = chaos.until(
            lambda: (a := chaos.answer_to("plain 0")) and "end-0" in text_of(a),
            "the stored request answered",
            5,
        )
        assert answered
    finally:
        if chaos.server.proc and chaos.server.proc.poll() is None:
            chaos.server.terminate()


async def test_a_recovery_settled_by_a_later_restart_clears_the_recovering_flag(tmp_path: Path) -> None:
    """Killed mid-reply, restarted: recovery sets the "recovering" flag and continues the reply. Killed again
    after the continuation's stream finished but before its turn ended: the next start finds the stream
    finished and settles it. The flag must be cleared then, or every client that connects is told, for the
    flag's 15-minute lifetime, that a recovery is in progress (the stock hook shows it as ``isRecovering``)."""
    chaos = Chaos(tmp_path)
    chaos.start()
    request_id = f"holdend-{uuid.uuid4().hex[:8]}"
    try:
        sock = await send_plain_request(chaos, request_id)
        deltas = [0]

        def third_delta(frame: dict[str, Any]) -> bool:
            deltas[0] += frame.get("id") == request_id and (chunk_of(frame) or {}).get("type") == "text-delta"
            return deltas[0] >= 3

        await sock.wait_for(third_delta)
        chaos.server.kill9()
        chaos.start()
        await sock.close()

        # The recovered continuation streams; this client ACKs its offer and sees its finish chunk (the app
        # then holds the turn open: the kill lands between the end of the stream and the end of the turn).
        sock = await AgentSocket.open(chaos.server.ws_url, AGENT, NAME)
        offer = await sock.wait_for(lambda f: f.get("type") == "cf_agent_stream_resuming")
        assert offer["id"] == request_id
        await sock.ws.send(json.dumps({"type": "cf_agent_stream_resume_ack", "id": request_id}))
        await sock.wait_for(
            lambda f: (
                f.get("id") == request_id
                and f.get("continuation") is True
                and (chunk_of(f) or {}).get("type") == "finish"
            )
        )
        flag_sql = "SELECT value FROM ponder_think_config WHERE agent_id = ? AND key = 'recovering'"
        assert chaos.rows(flag_sql), "the recovery in progress is flagged"
        chaos.server.kill9()
        chaos.start()
        await sock.close()

        chaos.until(chaos.quiet, "recovery to settle")
        answer = chaos.answer_to("plain 0")
        assert isinstance(answer, dict) and text_of(answer).count("end-0") == 1, answer
        assert not chaos.rows(flag_sql), "the recovery is over but still flagged"
        sock = await AgentSocket.open(chaos.server.ws_url, AGENT, NAME)
        await sock.wait_for(lambda f: f.get("type") == "cf_agent_chat_messages")
        await sock.close()
        assert {"type": "cf_agent_chat_recovering", "recovering": True, "id": request_id} not in sock.frames
    finally:
        if chaos.server.proc and chaos.server.proc.poll() is None:
            chaos.server.terminate()
