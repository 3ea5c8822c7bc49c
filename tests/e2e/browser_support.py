"""Debian's Chromium driven by Playwright (headless, never `playwright install`), for the console's
browser tests and `make screenshots`."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

CHROMIUM = Path("/usr/bin/chromium")
ARGS = ["--no-sandbox", "--disable-background-networking", "--disable-component-update"]
PHONE = {"width": 375, "height": 812}
DESKTOP = {"width": 1280, "height": 900}


def chromium_missing() -> str | None:
    """Why the browser cannot run here, or None (always None under CI's GATEWAY_BROWSER_TESTS=required:
    the tests then fail instead of skipping)."""
    if os.environ.get("GATEWAY_BROWSER_TESTS") == "required":
        return None
    if not CHROMIUM.is_file() and not shutil.which("chromium"):
        return "Debian's chromium is not installed (apt-get install -y chromium; .ci/run does)"
    try:
        import playwright  # noqa: F401
    except ImportError:
        return "playwright is not installed (the dev extras)"
    return None


@contextmanager
def browser() -> Iterator:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as driver:
        chromium = driver.chromium.launch(executable_path=str(CHROMIUM if CHROMIUM.is_file()
                                                              else shutil.which("chromium")),
                                          headless=True, args=ARGS)
        try:
            yield chromium
        finally:
            chromium.close()


def sign_in(page, url: str, username: str, password: str) -> None:
    """The console's sign-in form, by its accessible names; waits for the signed-in page."""
    page.goto(f"{url}/console/")
    page.get_by_label("Username").fill(username)
    page.get_by_label("Password").fill(password)
    page.get_by_role("button", name="Sign in").click()
    page.get_by_role("button", name="Sign out").wait_for()


def go_to(page, name: str) -> None:
    """A page of the console by its link in the navigation (behind Menu on a narrow screen)."""
    menu = page.get_by_role("button", name="Menu")
    if menu.is_visible() and menu.get_attribute("aria-expanded") != "true":
        menu.click()
    page.get_by_role("navigation", name="Console").get_by_role("link", name=name, exact=True).click()
    page.get_by_role("heading", name=name, level=1).wait_for()
