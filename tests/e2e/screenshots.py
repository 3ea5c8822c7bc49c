"""`make screenshots`: PNGs of each page of the console and of the API docs, at 375 and 1280 px,
into docs/screenshots/ (shown in docs/console.md). A local gateway of its own, with a little
traffic so the charts and the log have something to show."""

from __future__ import annotations

import re
import sys
import time
from pathlib import Path

import httpx
import openai

from tests.e2e.browser_support import DESKTOP, PHONE, browser, chromium_missing, go_to, sign_in
from tests.e2e.conftest import DEMO_ACCESS_TOKEN, DEMO_KEY, ROOT, LocalGateway

OUT = ROOT / "docs" / "screenshots"
PASSWORD = "screenshot password"
PAGES = ["Dashboard", "Keys", "Request log", "Tasks", "Top up", "Invite", "Usage", "Pricing", "Account", "Users",
         "Channels", "Spend", "Redemption codes", "Orders", "Site settings"]


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


def _commerce(server: LocalGateway) -> str:
    """For the commerce pages: codes; an invitee of the demo user who signs up with an emailed code
    and pays (so the Invite page shows a reward); two orders of the demo user's, one paid through the
    Stripe simulator's page. Answers the paid order's number."""
    url = server.url
    operator = {"Authorization": DEMO_ACCESS_TOKEN, "X-Api-User": "1"}
    with httpx.Client(base_url=url, headers=operator, timeout=60) as api:
        api.put("/api/option/", json={"key": "EmailVerificationEnabled", "value": True}).raise_for_status()
        api.put("/api/option/", json={"key": "QuotaForInviter", "value": 1_000_000}).raise_for_status()
        api.post("/api/redemption/", json={"name": "welcome", "quota": 1_500_000, "count": 3}).raise_for_status()
        # The Pricing page's editor shows an operator's price (m-large's, over the shipped one).
        api.put("/api/option/", json={"key": "ModelPrice", "value": {"m-large": {
            "input_per_million": "2.5", "output_per_million": "12", "cached_input_per_million": "0.25"}}}
                ).raise_for_status()
        aff = api.get("/api/user/aff").json()["data"]
        paid = api.post("/api/user/pay", json={"amount": 10, "payment_method": "stripe"}).json()["data"]
        httpx.post(paid["pay_link"], timeout=60)
        api.post("/api/user/pay", json={"amount": 5, "payment_method": "stripe"}).raise_for_status()
    with httpx.Client(base_url=url, timeout=60) as public:
        public.get("/api/verification", params={"email": "bea@example.com"}).raise_for_status()
        mail = sorted((Path(server.state_dir) / "outbox").glob("*.json"))[-1].read_text()
        code = re.search(r"code is (\d{6})", mail).group(1)
        public.post("/api/user/register", json={"username": "bea", "password": "bea's password",
                                                "email": "bea@example.com", "verification_code": code,
                                                "aff_code": aff}).raise_for_status()
        bea = public.post("/api/user/login", json={"username": "bea", "password": "bea's password"})
        headers = {"X-Api-User": str(bea.json()["data"]["id"])}
        order = public.post("/api/user/pay", headers=headers, json={"amount": 20, "payment_method": "stripe"})
        httpx.post(order.json()["data"]["pay_link"], timeout=60)
    return paid["trade_no"]


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
        trade_no = _commerce(server)
        written: list[Path] = []
        with browser() as chromium:
            for label, viewport in (("375", PHONE), ("1280", DESKTOP)):
                page = chromium.new_context(viewport=viewport).new_page()
                page.goto(f"{server.url}/console/")
                page.get_by_role("button", name="Sign in").wait_for()
                written.append(OUT / f"signin-{label}.png")
                page.screenshot(path=written[-1], full_page=True)
                page.goto(f"{server.url}/console/#/register")
                page.get_by_role("button", name="Send code").wait_for()
                written.append(OUT / f"signup-{label}.png")
                page.screenshot(path=written[-1], full_page=True)
                sign_in(page, server.url, "demo", PASSWORD)
                # Back from Stripe's page: the Top up page shows the order (the other pages as usual).
                page.goto(f"{server.url}/console/?topup=success&order={trade_no}")
                page.get_by_role("region", name="Your payment").wait_for()
                for name in PAGES:
                    go_to(page, name)
                    if name == "Pricing":  # the operator's editor, open on one model
                        page.get_by_label("Model to price").fill("m-large")
                        page.get_by_role("form", name="Prices of m-large").get_by_text("In force").wait_for()
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
