"""``ponder models``: list, fetch and remove the local models in the cache.

Why this module exists: the first use of ``"local"`` downloads 100-500 MB; users need a way to do that up
front (with a progress bar), to see what is cached and how big it is, and to reclaim the space. The commands
live here, next to the catalog, and ``ponder/cli.py`` only mounts them (``add_models_command``).
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

__all__ = ["add_models_command"]


def add_models_command(commands: Any, command_error: type[Exception]) -> None:
    """Add ``models {list,fetch,remove}`` to the ``ponder`` subparsers; failures raise ``command_error``."""
    models = commands.add_parser(
        "models", help="list, fetch and remove the local models ('local' model strings)"
    )
    sub = models.add_subparsers(dest="models_command", metavar="SUBCOMMAND")

    listing = sub.add_parser("list", help="known local models, whether they are cached, and their size")
    listing.add_argument("--json", action="store_true", help="print JSON instead of a table")
    listing.set_defaults(handler=_guard(_cmd_list, command_error))

    fetch = sub.add_parser("fetch", help="download and verify a local model now (with a progress bar)")
    fetch.add_argument(
        "name", nargs="?", default="", help="model name, e.g. qwen2.5-coder-0.5b (default: 'local')"
    )
    fetch.add_argument("--force", action="store_true", help="fetch again even if a verified copy is cached")
    fetch.set_defaults(handler=_guard(_cmd_fetch, command_error))

    remove = sub.add_parser("remove", help="delete a local model from the cache")
    remove.add_argument("name", help="model name, e.g. smollm2-135m")
    remove.set_defaults(handler=_guard(_cmd_remove, command_error))

    def need_subcommand(args: argparse.Namespace) -> None:
        models.print_help(sys.stderr)
        raise command_error("'ponder models' needs a subcommand: list, fetch or remove")

    models.set_defaults(handler=need_subcommand)


def _guard(handler: Any, command_error: type[Exception]) -> Any:
    def run(args: argparse.Namespace) -> None:
        from ._errors import ModelConfigError, ModelError

        try:
            handler(args)
        except (ModelConfigError, ModelError) as exc:
            raise command_error(str(exc)) from exc

    return run


def _spec(name: str) -> Any:
    from ._local_catalog import local_model_spec

    text = name.strip()
    lowered = text.lower()
    if lowered == "local":
        text = ""
    elif lowered.startswith(("local:", "local/")):
        text = text[6:]
    return local_model_spec(text)


def _cmd_list(args: argparse.Namespace) -> None:
    from ._local_catalog import CATALOG, local_model_spec
    from ._local_files import cached_model_path, format_size, is_cached, models_dir
    from ._local_server import find_llama_server

    default = local_model_spec("").name
    rows: list[dict[str, Any]] = []
    for spec in CATALOG.values():
        rows.append(
            {
                "name": spec.name,
                "model_string": "local" if spec.name == default else f"local:{spec.name}",
                "title": spec.title,
                "tools": spec.supports_tools,
                "cached": is_cached(spec),
                "size": spec.gguf_size,
                "download_size": spec.download_size,
                "source": spec.source,
                "path": str(cached_model_path(spec)),
            }
        )
    try:
        binary = find_llama_server()
        server: dict[str, Any] = {"path": str(binary.path), "origin": binary.origin}
    except Exception as exc:
        server = {"error": str(exc)}
    if args.json:
        print(json.dumps({"cache": str(models_dir()), "llama_server": server, "models": rows}, indent=2))
        return
    headers = ["NAME", "MODEL STRING", "MODEL", "TOOLS", "SIZE", "CACHED", "FETCHED FROM"]
    cells = [
        [
            r["name"],
            r["model_string"],
            r["title"],
            "yes" if r["tools"] else "no",
            format_size(r["size"]),
            "yes" if r["cached"] else "no",
            r["source"],
        ]
        for r in rows
    ]
    widths = [max([len(h)] + [len(row[i]) for row in cells]) for i, h in enumerate(headers)]
    print("  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True)).rstrip())
    print("  ".join("-" * w for w in widths))
    for row in cells:
        print("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip())
    print()
    print(f"cache: {models_dir()}")
    if "error" in server:
        print("llama-server: not found")
        print("\n".join(f"  {line}" for line in server["error"].splitlines()))
    else:
        print(f"llama-server: {server['path']} (from {server['origin']})")


def _cmd_fetch(args: argparse.Namespace) -> None:
    from ._local_files import StderrProgress, ensure_model_file, remove_model

    spec = _spec(args.name)
    if args.force:
        remove_model(spec)
    path = ensure_model_file(spec, progress=StderrProgress())
    print(f"{spec.name}: {path} (sha256 {spec.gguf_sha256[:12]}…, verified)")


def _cmd_remove(args: argparse.Namespace) -> None:
    from ._local_files import format_size, is_cached, model_dir, remove_model

    spec = _spec(args.name)
    had = is_cached(spec)
    if remove_model(spec):
        freed = f", freed {format_size(spec.gguf_size)}" if had else ""
        print(f"removed {spec.name} ({model_dir(spec)}{freed})")
    else:
        print(f"{spec.name} is not cached; nothing to remove")
