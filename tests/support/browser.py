"""Debian's Chromium driven by Playwright, the way every browser test here launches it.

Playwright never downloads a browser here: it drives ``/usr/bin/chromium``, which ``scripts/test``
installs. The flags keep headless Chromium from reaching for the network at start.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

CHROMIUM = Path("/usr/bin/chromium")
INSTALL_HINT = "run scripts/test, which installs Debian chromium and the dev extra (playwright==1.65.2)"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


@contextlib.contextmanager
def chromium() -> Iterator[tuple[Any, Any]]:
    """``(browser, expect)``; fails (never skips) when Chromium or Playwright is missing."""
    if not CHROMIUM.exists():
        pytest.fail(f"{CHROMIUM} is missing: {INSTALL_HINT}", pytrace=False)
    try:
        from playwright import sync_api
    except ImportError:
        pytest.fail(f"the playwright package is missing: {INSTALL_HINT}", pytrace=False)
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            yield browser, sync_api.expect
        finally:
            browser.close()


def watch(page: Any, errors: list[str], *, timeout_ms: int = 15_000) -> None:
    """Collect uncaught exceptions and console errors (a CSP violation is one) into ``errors``."""
    page.set_default_timeout(timeout_ms)
    page.on("pageerror", lambda exc: errors.append(f"page error: {exc}"))
    page.on("console", lambda msg: errors.append(f"console: {msg.text}") if msg.type == "error" else None)
