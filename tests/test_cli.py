"""The ``ponder`` command's user-facing errors and ``ponder inspect``."""

from __future__ import annotations

import asyncio
import json
import socket
from pathlib import Path

import pytest

from ponder import AgentHost
from ponder.cli import main
from tests.support.server import EXAMPLES

from .runtime.agents import Notebook, Worker


def run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(argv)
    out, err = capsys.readouterr()
    return code, out, err


def test_serve_missing_file(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(["serve", "does/not/exist.py"], capsys)
    assert code == 2
    assert "no such file: does/not/exist.py" in err


def test_serve_unknown_module(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(["serve", "no_such_module_anywhere"], capsys)
    assert code == 2
    assert "no file or module named 'no_such_module_anywhere'" in err


def test_serve_import_error_is_reported_not_raised(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    broken = tmp_path / "broken_agents.py"
    broken.write_text("import this_package_does_not_exist_ponder\n")
    code, _, err = run(["serve", str(broken)], capsys)
    assert code == 2
    assert "importing" in err and "this_package_does_not_exist_ponder" in err


def test_serve_file_without_agents(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    empty = tmp_path / "empty_agents.py"
    empty.write_text("x = 1\n")
    code, _, err = run(["serve", str(empty)], capsys)
    assert code == 2
    assert "defines no Agent subclass" in err
    code, _, err = run(["serve", f"{empty}:x"], capsys)
    assert code == 2 and "expected a ponder App or an Agent subclass" in err
    code, _, err = run(["serve", f"{empty}:missing"], capsys)
    assert code == 2 and "has no attribute 'missing'" in err


def test_serve_port_in_use(capsys: pytest.CaptureFixture[str]) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        code, _, err = run(["serve", str(EXAMPLES / "counter.py"), "--port", str(port)], capsys)
    assert code == 2
    assert f"port {port} on 127.0.0.1 is already in use" in err


def test_serve_target_forms_load_the_same_agents(capsys: pytest.CaptureFixture[str]) -> None:
    from ponder.cli import build_app

    assert sorted(build_app(str(EXAMPLES / "counter.py"), "sqlite:///:memory:").host.agent_classes) == [
        "counter"
    ]
    app = build_app(f"{EXAMPLES / 'counter.py'}:Counter", "sqlite:///:memory:", 1.5)
    assert sorted(app.host.agent_classes) == ["counter"]
    assert app.host.shutdown_timeout == 1.5


def test_inspect_without_a_store(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(["inspect", "--store", f"sqlite:///{tmp_path / 'nothing.db'}"], capsys)
    assert code == 2
    assert "no store at" in err


def test_inspect_lists_agents_schedules_and_fibers(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url = f"sqlite:///{tmp_path / 'inspect.db'}"

    async def populate() -> None:
        async with AgentHost(url) as host:
            notebook = await host.get_agent(Notebook, "alice")
            await notebook.add("hello")
            await notebook.schedule("0 9 * * *", "record", {"x": 1})
            worker = await host.get_agent(Worker, "w")
            await host.store.execute(
                "INSERT INTO ponder_fibers (id, agent_id, name, snapshot, created_at) VALUES ('f1', ?, 'job', '1', 0)",
                (worker.id,),
            )

    asyncio.run(populate())
    code, out, _ = run(["inspect", "--store", url], capsys)
    assert code == 0
    assert "Agents (2)" in out and "notebook/alice" in out and "worker/w" in out
    assert "Schedules (1)" in out and "record" in out and "0 9 * * *" in out
    assert "Fibers (interrupted or running work) (1)" in out and "job" in out
    code, out, _ = run(["inspect", "--store", url, "--json"], capsys)
    data = json.loads(out)
    assert [a["agent_id"] for a in data["agents"]] == ["notebook/alice", "worker/w"]
    assert data["schedules"][0]["cron"] == "0 9 * * *"
    assert data["fibers"][0]["name"] == "job"


def test_no_command_prints_help(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run([], capsys)
    assert code == 2 and "serve" in out and "inspect" in out


def test_a_files_app_wins_over_its_agent_classes(tmp_path: Path) -> None:
    from ponder.cli import build_app

    source = tmp_path / "guarded_agents.py"
    source.write_text(
        "from starlette.responses import Response\n"
        "from ponder import Agent, App\n"
        "class Vault(Agent):\n    pass\n"
        "def deny(request, cls, name):\n    return Response('no', status_code=401)\n"
        "app = App(agents=[Vault], store='sqlite:///:memory:', on_before_request=deny)\n"
    )
    app = build_app(str(source), None)
    assert app.on_before_request is not None  # the hooks are served, not dropped
    assert sorted(app.host.agent_classes) == ["vault"]


def test_several_apps_must_be_named(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    source = tmp_path / "two_apps.py"
    source.write_text("from ponder import App\na = App()\nb = App()\n")
    code, _, err = run(["serve", str(source)], capsys)
    assert code == 2 and "several Apps (a, b)" in err


@pytest.mark.parametrize("store", ["mysql://x/y", "postgresql://localhost/db", "sqlite:relative"])
def test_bad_store_urls_are_one_line_errors(store: str, capsys: pytest.CaptureFixture[str]) -> None:
    for argv in (["serve", str(EXAMPLES / "counter.py"), "--store", store], ["inspect", "--store", store]):
        code, _, err = run(argv, capsys)
        assert code == 2
        assert err.startswith("ponder: error:") and "Traceback" not in err


def test_unopenable_store_is_a_one_line_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("x")
    code, _, err = run(
        ["serve", str(EXAMPLES / "counter.py"), "--store", f"sqlite:///{blocker}/x.db"], capsys
    )
    assert code == 2 and "cannot" in err and "Traceback" not in err
