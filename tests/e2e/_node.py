"""Run the Node drivers in ``tests/js`` (the stock Cloudflare JS clients) and read their JSON lines."""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]
JS_DIR = REPO / "tests" / "js"
INSTALL_HINT = "run `npm ci --prefix tests/js` (Node >= 20) to install the pinned JS clients"


def node_binary() -> str:
    """The ``node`` executable, after checking that the pinned npm clients are installed."""
    node = shutil.which("node")
    if node is None:
        pytest.fail(f"`node` is not on PATH; install Node 20 and {INSTALL_HINT}", pytrace=False)
    if not (JS_DIR / "node_modules" / "agents" / "package.json").is_file():
        pytest.fail(f"tests/js/node_modules is missing: {INSTALL_HINT}", pytrace=False)
    return node


@dataclass
class ScenarioRun:
    """What one run of a driver printed: its JSON events, exit status and stderr."""

    returncode: int
    events: list[dict[str, Any]]
    stderr: str
    stdout: str
    context: Callable[[], str] | None = None

    def of(self, event: str, **match: Any) -> list[dict[str, Any]]:
        return [
            e for e in self.events if e.get("event") == event and all(e.get(k) == v for k, v in match.items())
        ]

    def one(self, event: str, **match: Any) -> dict[str, Any]:
        found = self.of(event, **match)
        assert len(found) == 1, f"expected one {event!r} event matching {match}, got {found}\n{self.report()}"
        return found[0]

    def frames(self, client: str) -> list[dict[str, Any]]:
        return [e["data"] for e in self.of("frame", client=client)]

    def report(self) -> str:
        return (
            f"--- driver exit status {self.returncode}\n--- driver stdout\n{self.stdout[-6000:]}"
            f"\n--- driver stderr\n{self.stderr[-3000:]}\n{self.context() if self.context else ''}"
        )


def run_scenario(
    script: str, *args: str, timeout: float = 30.0, context: Callable[[], str] | None = None
) -> ScenarioRun:
    """``node tests/js/SCRIPT ARGS...``; fails the test with everything printed if it does not finish.

    ``context`` (e.g. the server's log) is appended to every failure report.
    """
    node = node_binary()
    try:
        proc = subprocess.run(
            [node, str(JS_DIR / script), *args],
            cwd=JS_DIR,
            capture_output=True,
            text=True,
            timeout=timeout,
        )
    except subprocess.TimeoutExpired as exc:
        out = exc.stdout.decode() if isinstance(exc.stdout, bytes) else exc.stdout or ""
        err = exc.stderr.decode() if isinstance(exc.stderr, bytes) else exc.stderr or ""
        extra = context() if context else ""
        pytest.fail(f"{script} {' '.join(args)} did not finish in {timeout}s\n{out}\n{err}\n{extra}")
    events = []
    for line in proc.stdout.splitlines():
        line = line.strip()
        if not line:
            continue
        try:
            events.append(json.loads(line))
        except ValueError:
            events.append({"event": "non-json", "line": line})
    return ScenarioRun(proc.returncode, events, proc.stderr, proc.stdout, context)
