"""Drive ``tests/js/hook-driver.mjs`` (the stock React chat hooks, kept mounted) from a Python test.

The driver is a long-lived Node process: the test writes JSON-line commands to its stdin (send a message,
approve a tool call, drop the socket, wait until the hook is idle, report its state) and reads JSON-line
events from its stdout (every frame the hook's socket received and sent, socket open/close, hook state
changes, command replies). A reader thread collects the events; waits block on a condition variable
that every new event signals, so nothing polls.
"""

from __future__ import annotations

import json
import subprocess
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TextIO

from ._node import JS_DIR, node_binary

Event = dict[str, Any]


class HookDriverError(AssertionError):
    """The driver failed a command, exited, or an expected event never came."""


class HookDriver:
    """One ``node hook-driver.mjs`` process; hook ``A`` is mounted on ``/agents/<agent>/<name>`` at start."""

    def __init__(self, host: str, name: str, agent: str, log_path: Path, *, context: Callable[[], str] = str):
        self.host, self.name, self.agent = host, name, agent
        self.log_path = log_path
        self.context = context  # e.g. the server's log, appended to failure reports
        self.events: list[Event] = []
        self._cond = threading.Condition()
        self._next_id = 0
        self._stderr: TextIO | None = None
        self.proc: subprocess.Popen[str] | None = None
        self._reader: threading.Thread | None = None

    def start(self) -> HookDriver:
        assert self.proc is None, "the driver is already started"
        self._stderr = open(self.log_path, "w")  # closed in close()
        script = str(JS_DIR / "hook-driver.mjs")
        self.proc = subprocess.Popen(
            [node_binary(), script, "--host", self.host, "--name", self.name, "--agent", self.agent],
            cwd=JS_DIR,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._stderr,
            text=True,
            bufsize=1,
        )
        self._reader = threading.Thread(target=self._read, name="hook-driver-reader", daemon=True)
        self._reader.start()
        self.wait_event(lambda e: e["event"] == "ready", "the driver to start", timeout=20)
        return self

    def _read(self) -> None:
        assert self.proc is not None and self.proc.stdout is not None
        for line in self.proc.stdout:
            line = line.strip()
            if not line:
                continue
            try:
                event = json.loads(line)
            except ValueError:
                event = {"event": "non-json", "line": line}
            with self._cond:
                event["i"] = len(self.events)  # its index, for marks: events[event["i"] + 1 :] came later
                self.events.append(event)
                self._cond.notify_all()
        with self._cond:
            self.events.append({"event": "exit", "i": len(self.events)})
            self._cond.notify_all()

    # -- events -------------------------------------------------------------------------------------

    def mark(self) -> int:
        with self._cond:
            return len(self.events)

    def wait_event(
        self, pred: Callable[[Event], bool], what: str, *, since: int = 0, timeout: float = 15.0
    ) -> Event:
        """The first event from index ``since`` on for which ``pred`` holds (waiting up to ``timeout``)."""
        deadline = time.monotonic() + timeout
        index = since
        with self._cond:
            while True:
                while index < len(self.events):
                    event = self.events[index]
                    index += 1
                    if pred(event):
                        return event
                    if event["event"] == "exit":
                        raise HookDriverError(
                            f"the hook driver exited while waiting for {what}\n{self.report()}"
                        )
                left = deadline - time.monotonic()
                if left <= 0:
                    raise HookDriverError(f"timed out after {timeout}s waiting for {what}\n{self.report()}")
                self._cond.wait(left)

    def frames(self, client: str = "A", since: int = 0, until: int | None = None) -> list[dict[str, Any]]:
        """The frames ``client``'s socket received between event indexes ``since`` and ``until``."""
        with self._cond:
            return [
                e["data"]
                for e in self.events[since:until]
                if e["event"] == "frame" and e.get("client") == client
            ]

    def of(self, event: str, since: int = 0, **match: Any) -> list[Event]:
        with self._cond:
            return [
                e
                for e in self.events[since:]
                if e["event"] == event and all(e.get(k) == v for k, v in match.items())
            ]

    # -- commands -----------------------------------------------------------------------------------

    def call(self, cmd: str, *, timeout: float = 20.0, **args: Any) -> Event:
        """Send one command and return its reply; a failed command raises with the driver's output."""
        assert self.proc is not None and self.proc.stdin is not None
        self._next_id += 1
        command_id = self._next_id
        since = self.mark()
        try:
            self.proc.stdin.write(json.dumps({"id": command_id, "cmd": cmd, **args}) + "\n")
            self.proc.stdin.flush()
        except OSError as exc:
            raise HookDriverError(f"cannot write to the hook driver ({exc})\n{self.report()}") from exc
        reply = self.wait_event(
            lambda e: e["event"] == "reply" and e.get("id") == command_id,
            f"the reply to {cmd} {json.dumps(args)[:300]}",
            since=since,
            timeout=timeout,
        )
        if not reply["ok"]:
            brief = json.dumps(args)[:300]
            raise HookDriverError(
                f"hook driver command {cmd} {brief} failed: {reply['error']}\n{self.report()}"
            )
        return reply

    def close(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            try:
                assert self.proc.stdin is not None
                self.proc.stdin.close()  # the driver exits when its stdin closes
                self.proc.wait(5)
            except (OSError, subprocess.TimeoutExpired):
                self.proc.kill()
                self.proc.wait(5)
        if self._stderr is not None:
            self._stderr.close()

    def report(self, tail: int = 60) -> str:
        with self._cond:
            lines = [json.dumps(e)[:600] for e in self.events[-tail:]]
        try:
            stderr = self.log_path.read_text(errors="replace")[-3000:]
        except OSError:
            stderr = ""
        return (
            f"--- last {tail} driver events\n" + "\n".join(lines) + f"\n--- driver stderr\n{stderr}\n"
            f"{self.context()}"
        )

    def __enter__(self) -> HookDriver:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()
