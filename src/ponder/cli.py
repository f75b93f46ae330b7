"""The ``ponder`` command: ``serve`` agents over HTTP/WebSocket, run the ``demo``, ``inspect`` a store, manage local ``models``.

Every failure a user can cause (a missing file, an import error, a port in use, a store that does
not exist) ends with one clear line on stderr and exit status 2, not a traceback.
"""

from __future__ import annotations

import argparse
import asyncio
import errno
import json
import logging
import os
import socket
import sys
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

__all__ = ["main"]


class CommandError(Exception):
    """A user-facing failure of a command."""


def _configure_logging(level: str) -> None:
    logging.basicConfig(
        level=getattr(logging, level.upper(), logging.INFO), format="%(levelname)s:     %(name)s: %(message)s"
    )


def _check_port(host: str, port: int) -> None:
    if port == 0:
        return
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host, port))
        except OSError as exc:
            if exc.errno == errno.EADDRINUSE:
                raise CommandError(
                    f"port {port} on {host} is already in use; stop the other server or pass --port"
                ) from exc
            raise CommandError(f"cannot listen on {host}:{port}: {exc.strerror}") from exc


def build_app(target: str, store: str | None, shutdown_timeout: float | None = None) -> Any:
    """The ``App`` that ``ponder serve TARGET`` runs."""
    from ._loading import LoadError, load_target
    from .server import App

    try:
        loaded = load_target(target)
    except LoadError as exc:
        raise CommandError(str(exc)) from exc
    app = loaded if isinstance(loaded, App) else App(agents=loaded, store=store)
    if store and app is loaded:
        app.set_store(store)
    if shutdown_timeout is not None:
        app.host.shutdown_timeout = shutdown_timeout
    return app


def _reload_factory() -> Any:
    """Entry point for ``uvicorn --reload``: rebuild the app from the environment in the child."""
    timeout = os.environ.get("PONDER_SERVE_SHUTDOWN_TIMEOUT")
    return build_app(
        os.environ["PONDER_SERVE_TARGET"],
        os.environ.get("PONDER_SERVE_STORE") or None,
        float(timeout) if timeout else None,
    )


async def _check_store(url: str) -> None:
    """Open (and migrate) the store once before serving, so a bad store is one clear line, not a traceback."""
    from .storage import create_store

    probe = create_store(url)
    await probe.open()
    await probe.close()


def _uvicorn_options(app: Any, args: argparse.Namespace) -> dict[str, Any]:
    return {
        "host": args.host,
        "port": args.port,
        "log_level": args.log_level.lower(),
        "timeout_graceful_shutdown": 15,
        # uvicorn closes a socket whose frame exceeds ws_max_size; keep it well above the app's own
        # limit so oversized frames get a clear error frame instead of a dropped connection.
        "ws_max_size": app.max_frame_bytes * 4,
    }


def cmd_serve(args: argparse.Namespace) -> None:
    import uvicorn

    _configure_logging(args.log_level)
    app = build_app(args.target, args.store, args.shutdown_timeout)  # fails fast on a bad target
    _check_port(args.host, args.port)
    asyncio.run(_check_store(app.host.store.url))
    common = _uvicorn_options(app, args)
    if args.reload:
        os.environ["PONDER_SERVE_TARGET"] = args.target
        os.environ["PONDER_SERVE_STORE"] = args.store or ""
        os.environ["PONDER_SERVE_SHUTDOWN_TIMEOUT"] = (
            "" if args.shutdown_timeout is None else str(args.shutdown_timeout)
        )
        print(f"ponder: serving {args.target} on http://{args.host}:{args.port} with reload", file=sys.stderr)
        target_path = Path(args.target.partition(":")[0])
        reload_dir = str(target_path.parent.resolve()) if target_path.is_file() else str(Path.cwd())
        uvicorn.run(
            "ponder.cli:_reload_factory", factory=True, reload=True, reload_dirs=[reload_dir], **common
        )
        return
    names = ", ".join(sorted(app.host.agent_classes)) or "no agents"
    print(
        f"ponder: serving {names} on http://{args.host}:{args.port} (store: {app.host.store.url})",
        file=sys.stderr,
    )
    uvicorn.run(app, **common)


# -- demo --------------------------------------------------------------------------------------------


def cmd_demo(args: argparse.Namespace) -> None:
    """``ponder demo``: choose a model (and say why), check it, then serve ``DemoAgent`` with its page at ``/``."""
    import uvicorn

    from .demo import choose_demo_model, demo_app, describe_model, prepare_model
    from .models import ModelConfigError, ModelError

    _configure_logging(args.log_level)
    _check_port(args.host, args.port)
    model, reason = choose_demo_model(args.model, os.environ)
    print(f"ponder demo: model {describe_model(model)}, because {reason}", file=sys.stderr, flush=True)
    app = demo_app(model, args.store)
    print(f"ponder demo: store {app.host.store.url}", file=sys.stderr, flush=True)
    asyncio.run(_check_store(app.host.store.url))
    try:
        prepare_model(model, sys.stderr)
    except (ModelConfigError, ModelError) as exc:
        if args.model:
            raise CommandError(str(exc)) from exc
        raise CommandError(
            f"{exc} (the demo chose {model} because {reason}; pass --model, e.g. --model local, for another)"
        ) from exc
    shown = "127.0.0.1" if args.host in ("0.0.0.0", "::", "") else args.host
    if ":" in shown:
        shown = f"[{shown}]"
    print(
        f"ponder demo: ready: open http://{shown}:{args.port}/ (the agent: /agents/demo-agent/default)",
        file=sys.stderr,
        flush=True,
    )
    uvicorn.run(app, **_uvicorn_options(app, args))


# -- inspect -----------------------------------------------------------------------------------------


def _when(epoch: float | None) -> str:
    if epoch is None:
        return "-"
    return datetime.fromtimestamp(epoch, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def _table(title: str, headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    cells = [[str(c) for c in row] for row in rows]
    widths = [max([len(h)] + [len(r[i]) for r in cells]) for i, h in enumerate(headers)]
    line = "  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True))
    out = [f"{title} ({len(rows)})", line, "  ".join("-" * w for w in widths)]
    out += ["  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)) for row in cells]
    return "\n".join(out)


async def _inspect(store_url: str | None) -> dict[str, list[dict[str, Any]]]:
    from .storage import SQLiteStore, create_store, resolve_store_url

    store = create_store(store_url)
    if isinstance(store, SQLiteStore) and store.path != ":memory:" and not os.path.exists(store.path):  # noqa: ASYNC240
        raise CommandError(
            f"no store at {store.path} (from {resolve_store_url(store_url)}); pass --store or set PONDER_STORE"
        )
    await store.open()
    try:
        agents = await store.fetch_all(
            "SELECT a.agent_id, a.class_name, a.name, a.parent_id, a.created_at,"
            " length(a.state) AS state_bytes,"
            " (SELECT COUNT(*) FROM ponder_schedules s WHERE s.agent_id = a.agent_id) AS schedules,"
            " (SELECT COUNT(*) FROM ponder_fibers f WHERE f.agent_id = a.agent_id) AS fibers"
            " FROM ponder_agents a ORDER BY a.agent_id"
        )
        schedules = await store.fetch_all(
            "SELECT id, agent_id, callback, kind, due_at, cron, payload FROM ponder_schedules ORDER BY due_at"
        )
        fibers = await store.fetch_all(
            "SELECT id, agent_id, name, created_at, length(snapshot) AS snapshot_bytes FROM ponder_fibers"
            " ORDER BY created_at"
        )
    finally:
        await store.close()
    return {"agents": agents, "schedules": schedules, "fibers": fibers}


def cmd_inspect(args: argparse.Namespace) -> None:
    data = asyncio.run(_inspect(args.store))
    if args.json:
        for schedule in data["schedules"]:
            schedule["payload"] = json.loads(schedule["payload"])
        print(json.dumps(data, indent=2, default=str))
        return
    print(
        _table(
            "Agents",
            ["AGENT ID", "CLASS", "NAME", "STATE", "SCHEDULES", "FIBERS", "CREATED"],
            [
                [
                    a["agent_id"],
                    a["class_name"],
                    a["name"],
                    f"{a['state_bytes'] or 0} B",
                    a["schedules"],
                    a["fibers"],
                    _when(a["created_at"]),
                ]
                for a in data["agents"]
            ],
        )
    )
    print()
    print(
        _table(
            "Schedules",
            ["ID", "AGENT ID", "CALLBACK", "KIND", "DUE", "CRON"],
            [
                [s["id"][:12], s["agent_id"], s["callback"], s["kind"], _when(s["due_at"]), s["cron"] or "-"]
                for s in data["schedules"]
            ],
        )
    )
    print()
    print(
        _table(
            "Fibers (interrupted or running work)",
            ["ID", "AGENT ID", "NAME", "STARTED", "SNAPSHOT"],
            [
                [
                    f["id"][:12],
                    f["agent_id"],
                    f["name"],
                    _when(f["created_at"]),
                    f"{f['snapshot_bytes'] or 0} B",
                ]
                for f in data["fibers"]
            ],
        )
    )


# -- entry point -------------------------------------------------------------------------------------


def _parser() -> argparse.ArgumentParser:
    from . import __version__

    parser = argparse.ArgumentParser(prog="ponder", description="Durable chat agents for Python.")
    parser.add_argument("--version", action="version", version=f"ponder {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")

    serve = commands.add_parser("serve", help="serve the agents in a file or module over HTTP and WebSocket")
    serve.add_argument(
        "target", metavar="PATH_OR_MODULE[:ATTR]", help="e.g. app.py, app.py:app or mypkg.agents:app"
    )
    serve.add_argument("--host", default="127.0.0.1", help="interface to listen on (default 127.0.0.1)")
    serve.add_argument("--port", type=int, default=8000, help="port to listen on (default 8000)")
    serve.add_argument(
        "--store",
        default=None,
        help="store URL, e.g. sqlite:///data/ponder.sqlite3 (default: $PONDER_STORE or ./.ponder/ponder.sqlite3)",
    )
    serve.add_argument(
        "--shutdown-timeout",
        type=float,
        default=None,
        metavar="SECONDS",
        help="on SIGTERM, how long running work may take to finish before it is checkpointed (default 10)",
    )
    serve.add_argument("--reload", action="store_true", help="restart when the source changes (development)")
    serve.add_argument("--log-level", default="info", choices=["debug", "info", "warning", "error"])
    serve.set_defaults(handler=cmd_serve)

    demo = commands.add_parser(
        "demo",
        help="serve the demo agent and its chat page (model: --model, else an API key, Ollama or 'local')",
    )
    demo.add_argument(
        "--model",
        default=None,
        help="a model string, e.g. local, local:qwen2.5-coder-0.5b, openai:gpt-4.1-mini, ollama:llama3.2 "
        "(default: OpenAI or Anthropic when its API key is set, else Ollama's first model, else local)",
    )
    demo.add_argument("--host", default="127.0.0.1", help="interface to listen on (default 127.0.0.1)")
    demo.add_argument("--port", type=int, default=8000, help="port to listen on (default 8000)")
    demo.add_argument(
        "--store", default=None, help="store URL (default: $PONDER_STORE or ./.ponder/ponder.sqlite3)"
    )
    demo.add_argument("--log-level", default="info", choices=["debug", "info", "warning", "error"])
    demo.set_defaults(handler=cmd_demo)

    inspect = commands.add_parser("inspect", help="list the agents, schedules and fibers in a store")
    inspect.add_argument(
        "--store", default=None, help="store URL (default: $PONDER_STORE or ./.ponder/ponder.sqlite3)"
    )
    inspect.add_argument("--json", action="store_true", help="print JSON instead of tables")
    inspect.set_defaults(handler=cmd_inspect)

    from .models._local_cli import add_models_command

    add_models_command(commands, CommandError)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    from .storage import StoreError

    parser = _parser()
    args = parser.parse_args(argv)
    if not getattr(args, "handler", None):
        parser.print_help()
        return 2
    try:
        args.handler(args)
    except (CommandError, StoreError) as exc:
        print(f"ponder: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
