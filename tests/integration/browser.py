"""Headless Chromium for the web view's tests (Debian's chromium, its chromedriver, selenium)."""

from __future__ import annotations

import contextlib
import shutil
import tempfile
from collections.abc import Iterator
from typing import Any

CHROME_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--window-size=1500,1900",
]


def browser_missing() -> str:
    """Why the browser tests cannot run here ('' when they can)."""
    try:
        import selenium  # noqa: F401
    except ImportError:
        return "selenium is not installed (pip install -e .[dev])"
    for tool in ("chromium", "chromedriver"):
        if shutil.which(tool) is None:
            return f"{tool} is not installed (apt-get install chromium chromium-driver)"
    return ""


@contextlib.contextmanager
def chromium(url: str) -> Iterator[Any]:
    """A headless Chromium (a throw-away profile) that has opened ``url``; quit on exit."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    profile = tempfile.mkdtemp(prefix="mrc-chromium-")
    opts = webdriver.ChromeOptions()
    for flag in [*CHROME_FLAGS, f"--user-data-dir={profile}"]:
        opts.add_argument(flag)
    opts.binary_location = shutil.which("chromium") or "chromium"
    driver = webdriver.Chrome(service=Service(shutil.which("chromedriver") or "chromedriver"), options=opts)
    try:
        driver.get(url)
        yield driver
    finally:
        driver.quit()
        shutil.rmtree(profile, ignore_errors=True)
