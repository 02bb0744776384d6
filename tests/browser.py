"""One way for every browser test to drive headless Debian chromium: its flags, the launch, a fresh tab that records
dialogs, and the page's stylesheet. The `browser` fixture in conftest.py launches it once per test module.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-quic",
]


def page_css() -> str:
    """The stylesheet app.py serves the page with, so tests see the layout a visitor sees."""
    return (ROOT / "assets" / "style.css").read_text(encoding="utf-8")


@contextmanager
def chromium() -> Iterator:
    """A launched headless chromium (Debian's, as README's test command installs); fails, not skips, without it or
    playwright."""
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        pytest.fail("playwright is not installed: pip install -r requirements-dev.txt")
    executable = shutil.which("chromium")
    if executable is None:
        pytest.fail("Debian chromium is not installed: apt-get install -y chromium")
    with sync_playwright() as p:
        launched = p.chromium.launch(executable_path=executable, args=CHROMIUM_ARGS)
        try:
            yield launched
        finally:
            launched.close()


@contextmanager
def opened_tab(browser, url: str, width: int = 1300, height: int = 1600) -> Iterator:
    """A tab in a context of its own at url (network idle); `tab.dialogs` collects every dialog's message, dismissed."""
    context = browser.new_context(viewport={"width": width, "height": height})
    tab = context.new_page()
    dialogs: list[str] = []
    tab.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
    tab.dialogs = dialogs
    tab.goto(url, wait_until="networkidle")
    try:
        yield tab
    finally:
        context.close()
