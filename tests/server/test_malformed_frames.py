"""1,000 malformed frames against a live agent on the real server (``ponder serve`` in a subprocess).

The acceptance test of issue 2: random bytes, wrong JSON shapes and huge payloads sent to
``examples/counter.py`` over a real WebSocket. The server must stay up, the flooding connection and
the other connections must keep working, and not one stored row may change.

Flow control is by round trip, never by sleeping: the flood goes out in batches and each batch ends
with a valid ``greet`` call on the same socket. Frames of one connection are processed in order, so
the reply to that call proves every frame before it was handled.
"""

from __future__ import annotations

import asyncio
import json
import random
import sqlite3
import string
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed

from tests.support.server import EXAMPLES, ServerProcess

pytestmark = pytest.mark.slow

AGENT_PATH = "/agents/counter/flood"
FRAMES = 1000
LIMIT = 4 * 1024 * 1024  # the server's default max_frame_bytes
BATCH = 50
TIMEOUT = 15.0

# -- the malformed frames --------------------------------------------------------------------------

#: kind -> how many frames of it are sent (1,000 in all).
PLAN: dict[str, int] = {
    "binary_random": 140,
    "binary_invalid_utf8": 50,
    "text_not_json": 120,
    "unicode_junk": 80,
    "json_non_object": 100,
    "object_without_type": 50,
    "object_bad_type": 80,
    "object_unknown_type": 50,
    "rpc_bad_id": 80,  # no usable id: dropped without a reply
    "rpc_bad_method": 110,  # answered with success:false
    "rpc_bad_args": 80,  # answered with success:false
    "state_without_state": 40,  # answered with cf_agent_state_error
    "deeply_nested": 10,
    "huge": 10,  # above the 4 MiB limit: answered with cf_agent_error
}
assert sum(PLAN.values()) == FRAMES

#: Methods that exist on the agent (or on every Agent) but are not @callable, plus near misses.
NOT_CALLABLE = [
    "nope",
    "_private",
    "_job",
    "_run_rpc",
    "_apply_state",
    "__init__",
    "__class__",
    "__getattribute__",
    "set_state",
    "remind",  # public, writes storage, but not marked @callable
    "schedule",
    "run_fiber",
    "broadcast",
    "on_message",
    "on_request",
    "validate_state",
    "",
    " increment",
    "increment ",
    "INCREMENT",
    "increment\x00",
    "increment.__func__",
    "greet/../increment",
]
#: Calls to real callables whose arguments can never succeed (and so never change state).
BAD_ARGS_CALLS: list[tuple[str, Any]] = [
    ("increment", {"by": 1}),
    ("increment", "1"),
    ("increment", 1),
    ("increment", None),
    ("increment", True),
    ("increment", ["1"]),
    ("increment", [None]),
    ("increment", [[]]),
    ("increment", [{}]),
    ("increment", [1, 2, 3]),
    ("greet", []),
    ("greet", ["a", "b"]),
    ("greet", {"who": "x"}),
    ("count_to", ["3"]),
    ("count_to", [None]),
    ("count_to", [1, 2]),
    ("remind_in", {"seconds": 1, "note": "x"}),
    ("remind_in", "60,x"),
]
INVALID_UTF8 = [
    b"\xc3\x28",
    b"\xa0\xa1",
    b"\xe2\x28\xa1",
    b"\xf0\x28\x8c\xbc",
    b"\xc0\xaf",
    b"\xff\xfe\xfd",
    b"\xed\xa0\x80",
]
JUNK_RANGES = [(0x00, 0x1F), (0x7F, 0x9F), (0x300, 0x36F), (0x200B, 0x200F), (0x202A, 0x202E),
               (0xE000, 0xE0FF), (0xFFF0, 0xFFFF), (0x1F300, 0x1F6FF), (0x10FFF0, 0x10FFFF),
               (0x20, 0x7E), (0x4E00, 0x4E80), (0x0600, 0x06FF)]  # fmt: skip


@dataclass
class Frame:
    kind: str
    data: str | bytes
    #: What the server answers: None (nothing), ("rpc", id), "state_error" or "frame_error".
    reply: Any = None


def _junk(rng: random.Random, n: int) -> str:
    out = []
    for _ in range(n):
        lo, hi = rng.choice(JUNK_RANGES)
        out.append(chr(rng.randint(lo, hi)))
    return "".join(out)


def _random_json(rng: random.Random, depth: int = 0) -> Any:
    roll = rng.random()
    if depth > 3 or roll < 0.4:
        return rng.choice([None, True, False, rng.randint(-(10**12), 10**12), rng.random(), _junk(rng, 5)])
    if roll < 0.7:
        return [_random_json(rng, depth + 1) for _ in range(rng.randint(0, 4))]
    return {_junk(rng, 3): _random_json(rng, depth + 1) for _ in range(rng.randint(0, 4))}


def _dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)


def make_frames(rng: random.Random) -> list[Frame]:
    frames: list[Frame] = []
    serial = iter(range(10**9))

    def rpc_id() -> str:
        return f"bad-{next(serial)}"

    for kind, count in PLAN.items():
        for i in range(count):
            if kind == "binary_random":
                frames.append(Frame(kind, rng.randbytes(rng.choice([0, 1, 2, 16, 200, 4096]))))
            elif kind == "binary_invalid_utf8":
                frames.append(Frame(kind, rng.choice(INVALID_UTF8) + rng.randbytes(rng.randint(0, 64))))
            elif kind == "text_not_json":
                choices = [
                    "".join(rng.choices(string.printable, k=rng.randint(1, 300))),
                    '{"type":"rpc","id":"x","method":"increment","args":[1]',  # truncated
                    '{"type": "cf_agent_state", "state": {"count": 1}',  # truncated
                    "{'type': 'rpc'}",
                    "{type: rpc}",
                    '{"type":"rpc",}',
                    "[1,2,",
                    "nul",
                    "tru",
                    "9" * 5000,  # valid JSON syntax, over int's 4300-digit limit: ValueError
                    "1e99999",
                    "\x00",
                    " ",
                ]
                frames.append(Frame(kind, choices[i % len(choices)] if i < len(choices) else choices[0]))
            elif kind == "unicode_junk":
                frames.append(Frame(kind, _junk(rng, rng.randint(1, 400))))
            elif kind == "json_non_object":
                choices: list[Any] = [
                    [],
                    [{"type": "rpc", "id": "in-array", "method": "increment", "args": [1]}],
                    [{"type": "cf_agent_state", "state": {"count": 1000}}],
                    None,
                    True,
                    0,
                    -1.5,
                    "rpc",
                    "cf_agent_state",
                    _junk(rng, 20),
                    _random_json(rng),
                ]
                frames.append(Frame(kind, _dumps(choices[i % len(choices)])))
            elif kind == "object_without_type":
                body = {"id": rpc_id(), "method": "increment", "args": [1], "state": {"count": 1000}}
                body.update({_junk(rng, 4): _random_json(rng) for _ in range(rng.randint(0, 3))})
                if i % 2:
                    body = {k: v for k, v in body.items() if rng.random() < 0.5}
                frames.append(Frame(kind, _dumps(body)))
            elif kind == "object_bad_type":
                bad_type = [None, 1, 0, True, [], ["rpc"], {"rpc": 1}, "", "RPC", "rpc ", " rpc", "Rpc",
                            "cf_agent_state ", "CF_AGENT_STATE", "rpc\x00"][i % 15]  # fmt: skip
                body = {"type": bad_type, "id": rpc_id(), "method": "increment", "args": [1],
                        "state": {"count": 1000}}  # fmt: skip
                frames.append(Frame(kind, _dumps(body)))
            elif kind == "object_unknown_type":
                unknown = ["cf_agent_use_chat_request", "cf_agent_chat_clear", "cf_agent_identity",
                           "cf_agent_mcp_servers", "cf_agent_state_error", "rpc2", _junk(rng, 8)][i % 7]  # fmt: skip
                body = {"type": unknown, "id": rpc_id(), "state": {"count": 1000}, "messages": []}
                frames.append(Frame(kind, _dumps(body)))
            elif kind == "rpc_bad_id":
                body = {"type": "rpc", "method": "increment", "args": [1]}
                variant = i % 9
                if variant:
                    body["id"] = [0, 7, 1.5, "", None, [], {}, True][variant - 1]
                frames.append(Frame(kind, _dumps(body)))
            elif kind == "rpc_bad_method":
                call_id = rpc_id()
                body = {"type": "rpc", "id": call_id, "args": [1]}
                variant = i % (len(NOT_CALLABLE) + 5)
                if variant < len(NOT_CALLABLE):
                    body["method"] = NOT_CALLABLE[variant]
                elif variant < len(NOT_CALLABLE) + 4:
                    body["method"] = [7, None, ["increment"], {"name": "increment"}][
                        variant - len(NOT_CALLABLE)
                    ]
                # else: no method key at all
                frames.append(Frame(kind, _dumps(body), ("rpc", call_id)))
            elif kind == "rpc_bad_args":
                call_id = rpc_id()
                method, args = BAD_ARGS_CALLS[i % len(BAD_ARGS_CALLS)]
                body = {"type": "rpc", "id": call_id, "method": method, "args": args}
                frames.append(Frame(kind, _dumps(body), ("rpc", call_id)))
            elif kind == "state_without_state":
                body = {"type": "cf_agent_state"}
                if i % 2:
                    body["State"] = {"count": 1000}
                if i % 3 == 0:
                    body["id"] = rpc_id()
                frames.append(Frame(kind, _dumps(body), "state_error"))
            elif kind == "deeply_nested":
                depth = 100_000
                choices = [
                    "[" * depth + "]" * depth,
                    '{"a":' * depth + "1" + "}" * depth,
                    '{"type":"rpc","id":"deep","method":"increment","args":'
                    + "[" * depth
                    + "]" * depth
                    + "}",
                    '{"type":"cf_agent_state","state":' + "[" * depth + "]" * depth + "}",
                    "[" * (depth * 5),  # unbalanced
                    "{" * depth,
                ]
                if i < len(choices):
                    frames.append(Frame(kind, choices[i]))
                else:  # nested just deep enough to parse: an unknown method, answered with an error
                    call_id = rpc_id()
                    args = "[" * 200 + "]" * 200
                    text = f'{{"type":"rpc","id":"{call_id}","method":"nope","args":[{args}]}}'
                    frames.append(Frame(kind, text, ("rpc", call_id)))
            elif kind == "huge":
                size = 5 * 1024 * 1024
                pad = "x" * size
                choices = [
                    # A well-formed increment, but oversized: processing it would change the rows.
                    _dumps({"type": "rpc", "id": "huge-rpc", "method": "increment", "args": [1], "pad": pad}),
                    rng.randbytes(size),
                    pad,
                    "[" * size,
                    _junk(rng, 1000) * (size // 1000),  # at least 1 byte a character: > 4 MiB
                ]
                frames.append(Frame(kind, choices[i % len(choices)], "frame_error"))
            else:  # pragma: no cover - PLAN and this function must agree
                raise AssertionError(kind)
    rng.shuffle(frames)
    for frame in frames:
        size = len(frame.data.encode("utf-8") if isinstance(frame.data, str) else frame.data)
        assert (size > LIMIT) == (frame.kind == "huge"), frame.kind
    return frames


def batches(frames: list[Frame]) -> Iterator[list[Frame]]:
    """Up to ``BATCH`` frames; the heavy ones (deep nesting, huge) each in a batch of their own."""
    batch: list[Frame] = []
    for frame in frames:
        if frame.kind in ("deeply_nested", "huge"):
            if batch:
                yield batch
                batch = []
            yield [frame]
        else:
            batch.append(frame)
            if len(batch) == BATCH:
                yield batch
                batch = []
    if batch:
        yield batch


# -- the store, read directly ----------------------------------------------------------------------


def snapshot(db: Path) -> dict[str, list[tuple[Any, ...]]]:
    """Every row of every ponder_* table (read-only; WAL lets this run beside the server)."""
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        tables = [
            r[0]
            for r in conn.execute(
                "SELECT name FROM sqlite_master WHERE type = 'table' AND name LIKE 'ponder%' ORDER BY name"
            )
        ]
        return {t: sorted(conn.execute(f'SELECT * FROM "{t}"').fetchall(), key=repr) for t in tables}
    finally:
        conn.close()


# -- a minimal client --------------------------------------------------------------------------------


async def open_socket(base: str, pk: str) -> tuple[ClientConnection, list[dict[str, Any]]]:
    ws = await connect(f"{base}{AGENT_PATH}?_pk={pk}", max_size=None, open_timeout=TIMEOUT)
    frames = [json.loads(await asyncio.wait_for(ws.recv(), TIMEOUT)) for _ in range(3)]
    return ws, frames


async def call(
    ws: ClientConnection, call_id: str, method: str, *args: Any, before: tuple[dict[str, Any], ...] = ()
) -> dict[str, Any]:
    """A valid call. Exactly the frames ``before`` and then its reply must come next on this socket."""
    await ws.send(json.dumps({"type": "rpc", "id": call_id, "method": method, "args": list(args)}))
    for expected in before:
        assert json.loads(await asyncio.wait_for(ws.recv(), TIMEOUT)) == expected
    frame = json.loads(await asyncio.wait_for(ws.recv(), TIMEOUT))
    assert frame.get("type") == "rpc" and frame.get("id") == call_id, (
        f"expected the reply to {call_id}: {frame}"
    )
    return frame


def state(count: int) -> dict[str, Any]:
    return {"type": "cf_agent_state", "state": {"count": count}}


@dataclass
class Tally:
    sent: Counter[str] = field(default_factory=Counter)
    answers: Counter[str] = field(default_factory=Counter)
    unexpected: list[dict[str, Any]] = field(default_factory=list)
    answered_ids: set[str] = field(default_factory=set)
    closes: list[tuple[list[str], int | None, str | None]] = field(default_factory=list)

    def record(self, frame: dict[str, Any], expected_ids: set[str]) -> None:
        kind = frame.get("type")
        if kind == "rpc" and frame.get("id") in expected_ids and frame.get("success") is False:
            if frame["id"] in self.answered_ids:
                self.unexpected.append(frame)  # answered twice
            self.answered_ids.add(frame["id"])
            self.answers["rpc error"] += 1
        elif kind == "cf_agent_state_error" and frame.get("error") == "State update rejected":
            self.answers["cf_agent_state_error"] += 1
        elif kind == "cf_agent_error" and "-byte limit" in str(frame.get("error")):
            self.answers["cf_agent_error (frame too large)"] += 1
        else:
            self.unexpected.append(frame)


async def flood(base: str, frames: list[Frame], b: ClientConnection, tally: Tally) -> ClientConnection:
    """Send every frame on connection A; return A (reopened if the server ever closed it)."""
    a, _ = await open_socket(base, "conn-a")
    expected_ids = {f.reply[1] for f in frames if isinstance(f.reply, tuple)}
    due = set(expected_ids)
    for n, batch in enumerate(batches(frames)):
        probe = f"probe-{n}"
        try:
            for frame in batch:
                await a.send(frame.data)
                tally.sent[frame.kind] += 1
            await a.send(json.dumps({"type": "rpc", "id": probe, "method": "greet", "args": ["a"]}))
            while True:
                reply = json.loads(await asyncio.wait_for(a.recv(), TIMEOUT))
                if reply.get("type") == "rpc" and reply.get("id") == probe:
                    assert reply == {
                        "type": "rpc",
                        "id": probe,
                        "success": True,
                        "done": True,
                        "result": "Hello, a! I am flood.",
                    }
                    break
                tally.record(reply, expected_ids)
        except ConnectionClosed as exc:
            code = exc.rcvd.code if exc.rcvd else None
            reason = exc.rcvd.reason if exc.rcvd else None
            tally.closes.append((sorted({f.kind for f in batch}), code, reason))
            due -= {f.reply[1] for f in batch if isinstance(f.reply, tuple)}  # lost with the socket
            a, _ = await open_socket(base, "conn-a")
        if n % 10 == 0:  # the other connection is served while the flood goes on
            reply = await call(b, f"b-during-{n}", "greet", "b")
            assert reply["result"] == "Hello, b! I am flood."
    # Error replies are sent by their own tasks; wait (by reading, not sleeping) for any still due.
    while not due <= tally.answered_ids:
        tally.record(json.loads(await asyncio.wait_for(a.recv(), TIMEOUT)), expected_ids)
    return a


# -- the test ----------------------------------------------------------------------------------------


@pytest.fixture
def server(tmp_path: Path) -> Iterator[ServerProcess]:
    store = f"sqlite:///{tmp_path / 'store.sqlite3'}"
    with ServerProcess(EXAMPLES / "counter.py", store, tmp_path / "server.log") as process:
        yield process


async def test_thousand_malformed_frames_change_nothing(server: ServerProcess, tmp_path: Path) -> None:
    started = time.monotonic()
    db = tmp_path / "store.sqlite3"
    frames = make_frames(random.Random(1234))
    assert len(frames) == FRAMES

    b, handshake_b = await open_socket(server.ws_url, "conn-b")
    assert handshake_b[1] == {"type": "cf_agent_state", "state": {"count": 0}}
    assert (await call(b, "b1", "increment", 5, before=(state(5),)))["result"] == 5
    assert (await call(b, "b2", "remind_in", 3600, "later"))["success"] is True  # a schedule row
    before = snapshot(db)
    assert before["ponder_agents"] and before["ponder_schedules"]

    tally = Tally()
    a = await flood(server.ws_url, frames, b, tally)

    print(f"\nsent {sum(tally.sent.values())} malformed frames in {time.monotonic() - started:.1f}s:")
    for kind in PLAN:
        print(f"  {kind:<22} {tally.sent[kind]:>4}")
    print("answers:", dict(tally.answers), "| unexpected frames:", len(tally.unexpected))

    assert server.proc is not None and server.proc.poll() is None, server.log()
    after = snapshot(db)
    assert after == before
    assert repr(after).encode() == repr(before).encode()

    # B, open since before the flood, still works, and a new connection gets the full handshake.
    assert (await call(b, "b3", "greet", "b"))["result"] == "Hello, b! I am flood."
    assert (await call(b, "b4", "increment", 1, before=(state(6),)))["result"] == 6
    c, handshake_c = await open_socket(server.ws_url, "conn-c")
    assert handshake_c == [
        {"type": "cf_agent_identity", "name": "flood", "agent": "counter", "stateFollows": True},
        state(6),
        {"type": "cf_agent_mcp_servers", "mcp": {"prompts": [], "resources": [], "servers": {}, "tools": []}},
    ]

    # A was never closed by the server, every frame was answered as expected and nothing else,
    # and A still works (it was sent B's state change first).
    assert tally.closes == [], "the server closed the flooding connection"
    assert dict(tally.sent) == PLAN
    assert tally.unexpected == []
    assert tally.answers == {
        "rpc error": sum(1 for f in frames if isinstance(f.reply, tuple)),
        "cf_agent_state_error": sum(1 for f in frames if f.reply == "state_error"),
        "cf_agent_error (frame too large)": sum(1 for f in frames if f.reply == "frame_error"),
    }
    assert (await call(a, "a-last", "greet", "a", before=(state(6),)))["result"] == "Hello, a! I am flood."
    for ws in (a, b, c):
        await ws.close()

    # Nothing the flood did reached a traceback in the server's log.
    log = server.log_path.read_text(errors="replace")
    assert "Traceback" not in log, server.log()
    assert server.proc.poll() is None
