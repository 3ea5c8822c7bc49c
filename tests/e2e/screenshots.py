"""`make screenshots`: PNGs of each page of the console and of the API docs, at 375 and 1280 px,
into docs/screenshots/ (shown in docs/console.md). A local gateway of its own, with a little
traffic so the charts and the log have something to show."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import httpx
import openai

from tests.e2e.browser_support import DESKTOP, PHONE, browser, chromium_missing, go_to, sign_in
from tests.e2e.conftest import DEMO_KEY, ROOT, LocalGateway

OUT = ROOT / "docs" / "screenshots"
PASSWORD = "screenshot password"
PAGES = ["Dashboard", "Keys", "Request log", "Tasks", "Account", "Users", "Channels", "Spend"]


def _traffic(url: str) -> None:
    with openai.OpenAI(api_key=DEMO_KEY, base_url=f"{url}/v1", max_retries=0, timeout=60) as sdk:
        for n, model in enumerate(["m-small", "m-large", "m-small", "m-large", "m-small"]):
            sdk.chat.completions.create(model=model, messages=[{"role": "user", "content": "hello " * (n + 1) * 20}])
        sdk.embeddings.create(model="m-embed", input="a fern")
    # Beta image tasks for the Tasks page: each shows a signed result link once done.
    for prompt in ("a red boat", "a lighthouse in fog"):
        httpx.post(f"{url}/beta/v1/beta-2-pro", headers={"x-key": DEMO_KEY}, timeout=60, json={
            "model": "beta-2-pro", "prompt": prompt, "width": 512, "height": 512, "output_format": "png"})
    time.sleep(5)  # the simulator finishes a task in 2 s under the local gateway the tests start


def main() -> int:
    missing = chromium_missing()
    if missing:
        print(missing, file=sys.stderr)
        return 1
    OUT.mkdir(parents=True, exist_ok=True)
    server = LocalGateway()
    try:
        server.admin("set-password", "--user", "1", "--password", PASSWORD)
        server.admin("create-user", "--username", "ann", "--quota-usd", "5")
        server.admin("issue-key", "--user", "1", "--name", "laptop", "--models", "m-small,m-large")
        _traffic(server.url)
        written: list[Path] = []
        with browser() as chromium:
            for label, viewport in (("375", PHONE), ("1280", DESKTOP)):
                page = chromium.new_context(viewport=viewport).new_page()
                page.goto(f"{server.url}/console/")
                page.get_by_role("button", name="Sign in").wait_for()
                written.append(OUT / f"signin-{label}.png")
                page.screenshot(path=written[-1], full_page=True)
                sign_in(page, server.url, "demo", PASSWORD)
                for name in PAGES:
                    go_to(page, name)
                    # A hash route loads its data after the heading shows; the page's load state
                    # stays "idle" from the first load, so give the fetch and the chart a moment.
                    page.wait_for_timeout(1500)
                    written.append(OUT / f"{name.lower().replace(' ', '-')}-{label}.png")
                    page.screenshot(path=written[-1], full_page=True)
                page.goto(f"{server.url}/docs/")
                page.get_by_role("button", name="Authorize").first.wait_for()
                written.append(OUT / f"docs-{label}.png")
                page.screenshot(path=written[-1])
    finally:
        server.stop()
    for path in written:
        print(f"wrote {path.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
