"""The console and the API docs in a real browser: Debian's Chromium, headless, driven by
Playwright against the local gateway (`python -m gateway_local`, what `make run` starts), every
control found by its accessible name, at 1280 px and at 375 px."""

from __future__ import annotations

import json
import re
import time

import httpx
import openai
import pytest

from tests.e2e.browser_support import DESKTOP, PHONE, browser, chromium_missing, go_to, sign_in
from tests.e2e.conftest import DEMO_KEY, LocalGateway

pytestmark = [pytest.mark.e2e, pytest.mark.skipif(chromium_missing() is not None, reason=chromium_missing() or "")]

OPERATOR_PASSWORD = "operator password"
ANN_PASSWORD = "ann's password"


@pytest.fixture(scope="module")
def site():
    """A local gateway whose demo user (1, role 100) and ann (a user with 5 USD) have passwords."""
    server = LocalGateway()
    try:
        server.admin("set-password", "--user", "1", "--password", OPERATOR_PASSWORD)
        ann = server.admin("create-user", "--username", "ann", "--quota-usd", "5")
        server.admin("set-password", "--user", str(ann["user_id"]), "--password", ANN_PASSWORD)
        server.ann_id = ann["user_id"]
        yield server
    finally:
        server.release()


@pytest.fixture(scope="module")
def chromium(site):
    with browser() as launched:
        yield launched


def fits(page, viewport) -> bool:
    """Nothing on the page is wider than the screen (a wide table scrolls inside its own box)."""
    return page.evaluate("document.documentElement.scrollWidth") <= viewport["width"]


def chat(site, key: str) -> str:
    with openai.OpenAI(api_key=key, base_url=f"{site.url}/v1", max_retries=0, timeout=60) as sdk:
        answer = sdk.chat.completions.create(model="m-small", messages=[{"role": "user", "content": "hello there"}])
    return answer.choices[0].message.content or ""


# The words of an element broken across two lines mid-word (a URL or a key may break; a word may not).
BROKEN_WORDS = """(root) => {
  const broken = [];
  const walker = document.createTreeWalker(root, NodeFilter.SHOW_TEXT);
  while (walker.nextNode()) {
    const node = walker.currentNode;
    for (const found of node.textContent.matchAll(/[A-Za-z]{3,}/g)) {
      const range = document.createRange();
      range.setStart(node, found.index);
      range.setEnd(node, found.index + found[0].length);
      if (new Set([...range.getClientRects()].map((r) => Math.round(r.top))).size > 1) broken.push(found[0]);
    }
  }
  return broken;
}"""

# How tall, in CSS pixels, the chart's tallest bar is drawn (rows of its canvas in a model's colour).
BAR_HEIGHT = """(figure) => {
  const canvas = figure.querySelector("canvas");
  const { data, width, height } = canvas.getContext("2d").getImageData(0, 0, canvas.width, canvas.height);
  const colours = ["#2563eb", "#16a34a", "#d97706", "#db2777", "#7c3aed", "#0891b2", "#65a30d", "#dc2626"]
    .map((hex) => [1, 3, 5].map((at) => parseInt(hex.slice(at, at + 2), 16)));
  let rows = 0;
  for (let y = 0; y < height; y++) {
    for (let x = 0; x < width; x++) {
      const i = (y * width + x) * 4;
      if (colours.some(([r, g, b]) => data[i] === r && data[i + 1] === g && data[i + 2] === b)) { rows++; break; }
    }
  }
  return rows / devicePixelRatio;
}"""


def balance_units(page) -> int:
    """The dashboard's balance, in quota units (the card's second line: "5,000,000 units")."""
    card = page.get_by_role("term").filter(has_text="Balance").locator("xpath=..")
    return int(card.get_by_text(re.compile(r"units$")).inner_text().split()[0].replace(",", ""))


def test_the_docs_page_lists_every_operation_and_tries_chat_completions_with_a_pasted_key(site, chromium):
    document = httpx.get(f"{site.url}/openapi.json").json()
    page = chromium.new_page(viewport=DESKTOP)
    page.goto(f"{site.url}/docs")  # redirected to /docs/, whose assets are relative
    # Every tag listed, collapsed; each opened in turn shows all of its operations
    tags = list(dict.fromkeys(operation["tags"][0] for methods in document["paths"].values()
                              for operation in methods.values()))
    page.locator(".opblock-tag").first.wait_for()
    assert page.locator(".opblock-tag").evaluate_all("hs => hs.map(h => h.dataset.tag)") == tags
    shown = 0
    for tag in tags:
        header = page.locator(f".opblock-tag[data-tag='{tag}']")
        header.click()
        section = page.locator(".opblock-tag-section").filter(has=header)
        section.locator(".opblock").first.wait_for()
        shown += section.locator(".opblock").count()
        header.click()
        section.locator(".opblock").first.wait_for(state="detached")
    assert shown == sum(len(methods) for methods in document["paths"].values())
    assert page.get_by_text("Unable to render this definition").count() == 0

    page.locator(".opblock-tag[data-tag='text']").click()
    operation = page.get_by_role("button", name=re.compile(r"^POST\W*v1\W*chat\W*completions$"))
    operation.wait_for()

    page.get_by_role("button", name="Authorize").first.click()
    page.get_by_label("auth-bearer-value").fill(DEMO_KEY)
    page.get_by_role("button", name="Apply credentials").first.click()  # the first scheme: bearer
    page.get_by_role("button", name="Close").first.click()
    operation.click()
    page.get_by_role("button", name="Try it out").click()
    body = {"model": "m-small", "messages": [{"role": "user", "content": "hi from the docs"}]}
    page.locator(".body-param textarea").fill(json.dumps(body))
    page.get_by_role("button", name="Execute").click()
    result = page.locator(".live-responses-table tbody .response-col_status").first
    result.wait_for()
    assert result.inner_text().strip() == "200"
    assert "chat.completion" in page.locator(".live-responses-table .highlight-code").first.inner_text()


@pytest.mark.parametrize("viewport", [DESKTOP, PHONE], ids=["1280px", "375px"])
def test_a_user_signs_in_sees_its_spend_makes_a_key_uses_it_finds_it_in_the_log_and_deletes_it(
        site, chromium, viewport):
    context = chromium.new_context(viewport=viewport)
    context.grant_permissions(["clipboard-read", "clipboard-write"], origin=site.url)
    page = context.new_page()
    sign_in(page, site.url, "ann", ANN_PASSWORD)
    chart = page.get_by_role("img", name=re.compile(r"^Your spend per day, last 7 days"))
    chart.wait_for()
    chart.locator("canvas").first.wait_for()  # what the user waits for: uPlot draws once the data is in
    assert fits(page, viewport)

    # A session works in every tab of the browser (the cookie is the browser's)
    other_tab = context.new_page()
    other_tab.goto(f"{site.url}/console/")
    other_tab.get_by_role("button", name="Sign out").wait_for()
    other_tab.close()

    name = f"laptop-{viewport['width']}"
    go_to(page, "Keys")
    # The Keys page says where to send requests, and links the API docs
    base_url = page.get_by_label("API base URL", exact=True).inner_text().strip()
    assert base_url == f"{site.url}/v1"
    docs = page.get_by_role("link", name="API docs")
    assert docs.get_attribute("href") == f"{site.url}/docs"
    form = page.get_by_role("form", name="Create key")
    form.get_by_label("Name").fill(name)
    form.get_by_label("Models (comma-separated; empty: all)").fill("m-small")
    form.get_by_role("button", name="Create key").click()
    key = page.get_by_label("The new key").inner_text().strip()
    assert key.startswith("sk-")
    page.get_by_role("button", name="Copy", exact=True).click()
    page.get_by_role("status").filter(has_text="Copied.").wait_for()
    assert page.evaluate("navigator.clipboard.readText()") == key
    page.get_by_role("button", name="Done").click()
    assert fits(page, viewport)
    assert page.get_by_text(key).count() == 0  # shown once: the list has its hint only

    with openai.OpenAI(api_key=key, base_url=base_url, max_retries=0, timeout=60) as sdk:  # only what it shows
        assert sdk.chat.completions.create(model="m-small", messages=[{"role": "user", "content": "hi"}]).choices

    go_to(page, "Request log")
    filters = page.get_by_role("form", name="Filter the log")
    filters.get_by_label("Key name").fill(name)
    filters.get_by_role("button", name="Apply filters").click()
    row = page.get_by_role("table", name="Requests").get_by_role("row").filter(has_text=name)
    row.first.wait_for()
    assert row.count() == 1 and "m-small" in row.inner_text() and "consume" in row.inner_text()
    assert row.get_by_role("cell").filter(has_text=re.compile(r"^\d+ s$")).count() == 1  # its duration
    totals = page.get_by_label("Totals of the filtered requests")  # of every filtered row, not the page's
    totals.get_by_role("definition").first.filter(has_text=re.compile(r"^1$")).wait_for()
    spent = totals.get_by_role("definition").nth(1).inner_text()
    assert spent.startswith("$") and spent != "$0.00" and spent in row.inner_text()
    assert fits(page, viewport)

    go_to(page, "Dashboard")
    chart = page.get_by_role("img", name=re.compile(r"^Your spend per day, last 7 days"))
    chart.wait_for()
    assert "$0.00 over" not in chart.get_attribute("aria-label")
    caption = page.locator("figure figcaption").inner_text()
    assert "m-small" in caption
    # The Requests card and the chart count the same requests (all made this week), and say so
    served = page.get_by_role("term").filter(has_text="Requests served").locator("xpath=..")
    count = served.get_by_role("definition").first.inner_text()
    assert f" and {count} requests served" in caption, (count, caption)
    # A spend of a fraction of a cent is a bar to see: the axis follows the data
    chart.locator("canvas").first.wait_for()
    assert chart.evaluate(BAR_HEIGHT) > 60
    page.get_by_role("button", name="30 days").click()
    page.get_by_role("img", name=re.compile(r"^Your spend per day, last 30 days")).wait_for()

    go_to(page, "Keys")
    keys = page.get_by_role("table", name="Keys")
    # Edited after creation: every setting, not the key itself (only its hash is kept, and the form says so)
    page.get_by_role("button", name=f"Edit key {name}").click()
    edit = page.get_by_role("form", name=f"Edit key {name}")
    assert "cannot be shown again" in edit.inner_text()
    assert edit.get_by_label("Models (comma-separated; empty: all)").input_value() == "m-small"
    name, old_name = f"{name}-renamed", name
    edit.get_by_label("Name").fill(name)
    edit.get_by_label("Models (comma-separated; empty: all)").fill("")
    edit.get_by_label("Requests per minute").fill("120")
    edit.get_by_label("Quota in USD (empty: the account's)").fill("1.5")
    edit.get_by_role("button", name="Save key").click()
    page.get_by_role("status").filter(has_text=f"Saved key {name}.").wait_for()
    row = keys.get_by_role("row").filter(has_text=name)
    assert "all" in row.inner_text() and "120 rpm" in row.inner_text() and "$1.50" in row.inner_text()
    assert keys.get_by_role("row").filter(has_text=re.compile(rf"{old_name}\s")).count() == 0
    assert fits(page, viewport)
    assert chat(site, key)  # the same key, now for every model
    # The key's actions are on screen inside the table's box; a wider table's box says it scrolls
    # sideways, and at 375 px each key is a card with nothing to scroll
    box = keys.locator("xpath=..")
    assert right_edge(page.get_by_role("button", name=f"Delete key {name}")) <= min(right_edge(box), viewport["width"])
    scrolls = not box.evaluate("b => b.scrollWidth <= b.clientWidth")
    assert not scrolls or box.get_attribute("aria-label") == "Keys, scrolls sideways"
    if viewport is PHONE:
        assert not scrolls
        status = keys.get_by_role("row").filter(has_text=name).locator("td").nth(2)
        assert status.get_attribute("data-label") == "Status" and status.inner_text() == "enabled"
        assert keys.locator("thead").evaluate("h => h.getBoundingClientRect().width") <= 1  # labels, not a header
    page.get_by_role("button", name=f"Delete key {name}").click()  # one click asks first
    page.get_by_role("button", name=f"Keep key {name}").click()
    page.get_by_role("button", name=f"Delete key {name}").click()
    assert keys.get_by_text(name).count() == 1
    page.get_by_role("button", name=f"Confirm delete key {name}").click()
    keys.get_by_text(name).wait_for(state="detached")
    deadline = time.monotonic() + 30  # a warm function may reuse a key lookup for its cache time (5 s)
    while True:
        try:
            chat(site, key)
        except openai.AuthenticationError:
            break
        assert time.monotonic() < deadline, "the deleted key still answers"
        time.sleep(1)
    context.close()


def test_an_operator_adds_quota_to_a_user_and_the_users_page_shows_it(site, chromium):
    user = chromium.new_context(viewport=PHONE).new_page()  # the user on a phone, the operator on a desktop
    sign_in(user, site.url, "ann", ANN_PASSWORD)
    before = balance_units(user)
    assert not user.get_by_role("link", name="Users").is_visible()  # not an operator

    operator = chromium.new_context(viewport=DESKTOP).new_page()
    sign_in(operator, site.url, "demo", OPERATOR_PASSWORD)
    go_to(operator, "Users")
    row = operator.get_by_role("table", name="Users").get_by_role("row").filter(has_text="ann")
    row.get_by_label("USD to add to ann").fill("10")
    with operator.expect_response(lambda r: r.url.endswith("/quota") and r.status == 200):
        row.get_by_role("button", name="Add quota").click()
    operator.get_by_role("status").filter(has_text="Added $10.00 to ann").wait_for()  # said, and the box emptied
    assert row.get_by_label("USD to add to ann").input_value() == ""
    assert row.get_by_role("cell", name="user", exact=True).count() == 1  # the role in words, not 1

    user.reload()
    user.get_by_role("button", name="Sign out").wait_for()
    assert balance_units(user) == before + 10 * 500_000

    go_to(operator, "Channels")
    channel = operator.get_by_role("table", name="Channels").get_by_role("row").filter(has_text="simulator-chat")
    channel.wait_for()
    assert "healthy" in channel.inner_text()
    go_to(operator, "Spend")
    operator.get_by_role("img", name=re.compile(r"^Spend of all users per day")).wait_for()


def test_errors_appear_next_to_their_field_and_sign_out_ends_the_session(site, chromium):
    page = chromium.new_context(viewport=DESKTOP).new_page()
    page.goto(f"{site.url}/console/")
    page.get_by_label("Username").fill("ann")
    page.get_by_label("Password").fill("not the password")
    page.get_by_role("button", name="Sign in").click()
    alert = page.get_by_role("form", name="Sign in").get_by_role("alert")
    alert.wait_for()
    assert alert.inner_text() == "Wrong username or password"

    sign_in(page, site.url, "ann", ANN_PASSWORD)
    cookie = next(c for c in page.context.cookies() if c["name"] == "gateway_session")
    assert cookie["httpOnly"] and cookie["sameSite"] == "Strict"
    go_to(page, "Keys")
    page.get_by_role("form", name="Create key").get_by_label("Name").fill("x")
    page.get_by_role("form", name="Create key").get_by_label("Models (comma-separated; empty: all)").fill("no-such")
    page.get_by_role("button", name="Create key").click()
    error = page.get_by_role("form", name="Create key").get_by_role("alert")
    error.wait_for()
    assert "no-such" in error.inner_text() and "model_limits" not in error.inner_text()  # in words, at its field
    # The field's name is its label alone; the error describes it
    models = page.get_by_role("textbox", name="Models (comma-separated; empty: all)", exact=True)
    assert models.get_attribute("aria-invalid") == "true"
    assert models.get_attribute("aria-describedby") == error.get_attribute("id")

    # Signing out (POST /api/user/logout) ends the session itself: a reload, another tab and the
    # cookie kept aside all meet the sign-in form or a 401.
    other_tab = page.context.new_page()
    other_tab.goto(f"{site.url}/console/")
    other_tab.get_by_role("button", name="Sign out").wait_for()
    page.get_by_role("button", name="Sign out").click()
    page.get_by_role("button", name="Sign in").wait_for()
    page.reload()
    page.get_by_role("form", name="Sign in").wait_for()
    other_tab.reload()
    other_tab.get_by_role("form", name="Sign in").wait_for()
    assert other_tab.get_by_role("button", name="Sign out").count() == 0
    other_tab.close()
    answer = httpx.get(f"{site.url}/api/user/self", headers={
        "Cookie": f"gateway_session={cookie['value']}", "X-Api-User": str(site.ann_id)})
    assert answer.status_code == 401


@pytest.mark.parametrize("viewport", [DESKTOP, PHONE], ids=["1280px", "375px"])
def test_a_user_submits_a_task_and_sees_its_status_then_its_result_link_on_the_tasks_page(
        site, chromium, viewport):
    key = site.admin("issue-key", "--user", str(site.ann_id), "--name", f"tasks-{viewport['width']}")["key"]
    submitted = httpx.post(f"{site.url}/beta/v1/beta-2-pro", headers={"x-key": key}, timeout=60, json={
        "model": "beta-2-pro", "prompt": "a red boat", "width": 512, "height": 512, "output_format": "png"})
    assert submitted.status_code == 200, submitted.text
    task_id = submitted.json()["id"]

    page = chromium.new_context(viewport=viewport).new_page()
    sign_in(page, site.url, "ann", ANN_PASSWORD)
    go_to(page, "Tasks")
    filters = page.get_by_role("form", name="Filter the tasks")
    filters.get_by_label("Family").select_option("beta")
    filters.get_by_role("button", name="Apply filters").click()
    row = page.get_by_role("table", name="Tasks").get_by_role("row").filter(has_text=task_id)
    row.wait_for()
    assert "beta-2-pro" in row.inner_text()
    link = row.get_by_role("link", name=f"Open result 1 of {task_id}")
    deadline = time.monotonic() + 60  # the simulator finishes a task in 2 s; the poller's schedule is 1 s
    while not link.count():
        assert "failed" not in row.inner_text()
        assert time.monotonic() < deadline, f"the task never showed a result link: {row.inner_text()}"
        time.sleep(1)
        filters.get_by_role("button", name="Refresh").click()
        page.wait_for_timeout(500)
    assert "succeeded" in row.inner_text() and "Ready" in row.inner_text()
    assert fits(page, viewport)
    # The link is the gateway's signed sample link, and it serves the image with no key
    href = link.get_attribute("href") or ""
    assert href.startswith(site.url) and f"/beta/v1/results/{task_id}/sample" in href
    image = httpx.get(href, headers={"Accept": "image/png"}, follow_redirects=True)  # to the kept copy
    assert image.status_code == 200 and image.content.startswith(b"\x89PNG")

    # A filter the API refuses shows its error next to that filter
    filters.get_by_label("From (UTC)").fill("2030-01-02T00:00")
    filters.get_by_label("To (UTC)").fill("2030-01-01T00:00")
    filters.get_by_role("button", name="Apply filters").click()
    error = filters.get_by_role("alert")
    error.wait_for()
    assert error.inner_text() == "Must not be after the end (To)"  # in words, beside From
    page.context.close()


def put_in_new_group(operator, user_id: int, group: str, ratio: str, *, listed: str) -> None:
    """On the operator's Pricing page (once the group `listed` shows): adds `group` at `ratio` and
    moves the user into it, as an operator does in the console."""
    ratios = operator.get_by_role("form", name="Edit group ratios")
    ratios.get_by_label(f"Ratio of {listed}").wait_for()
    ratios.get_by_label("New group").fill(group)
    ratios.get_by_label("Its ratio").fill(ratio)
    ratios.get_by_role("button", name="Save group ratios").click()
    operator.get_by_role("status").filter(has_text="Group ratios saved.").wait_for()
    move = operator.get_by_role("form", name="Move a user to a group")
    move.get_by_label("User id").fill(str(user_id))
    move.get_by_label("Group").fill(group)
    move.get_by_role("button", name="Move user").click()
    operator.get_by_role("status").filter(has_text=f"is now in {group}").wait_for()


def test_an_operator_prices_a_group_and_its_user_sees_and_pays_half_then_exports_the_log(site, chromium):
    # Given ann, with a key, on the Pricing page: the default group, m-large's input at $3 per million
    key = site.admin("issue-key", "--user", str(site.ann_id), "--name", "pricing")["key"]
    ann = chromium.new_context(viewport=PHONE).new_page()
    sign_in(ann, site.url, "ann", ANN_PASSWORD)
    go_to(ann, "Pricing")
    prices = ann.get_by_role("table", name="Prices")
    large = prices.get_by_role("row").filter(has=ann.get_by_role("cell", name="m-large", exact=True))
    large.wait_for()
    assert "$3" in large.inner_text() and "default" in ann.get_by_text("Your group").inner_text()
    # When the operator adds a group at half price and moves ann into it, in the console
    operator = chromium.new_context(viewport=DESKTOP).new_page()
    sign_in(operator, site.url, "demo", OPERATOR_PASSWORD)
    go_to(operator, "Pricing")
    put_in_new_group(operator, site.ann_id, "half", "0.5", listed="vip")
    assert operator.get_by_label("Ratio of half").input_value() == "0.5"
    # Then, once the key cache's seconds have passed, ann's page shows half the price
    deadline = time.monotonic() + 30
    while True:
        ann.reload()
        large = ann.get_by_role("table", name="Prices").get_by_role("row").filter(
            has=ann.get_by_role("cell", name="m-large", exact=True))
        large.wait_for()
        if "$1.5" in large.inner_text():
            break
        assert time.monotonic() < deadline, "the new group's prices never showed"
        time.sleep(1)
    assert "half" in ann.get_by_text("Your group").inner_text()
    # And a request of hers is billed at that ratio, which the exported log shows
    assert chat(site, key)
    go_to(ann, "Usage")
    usage = ann.get_by_role("table", name="Your usage per day and model")
    usage.get_by_role("row").filter(has_text="m-small").first.wait_for()
    export = ann.get_by_role("form", name="Export the request log as CSV")
    today = time.strftime("%Y-%m-%d", time.gmtime())
    export.get_by_label("From (UTC day)").fill(today)
    export.get_by_label("To (UTC day)").fill(today)
    with ann.expect_download() as download:
        export.get_by_role("button", name="Export CSV").click()
    text = open(download.value.path(), encoding="utf-8").read()
    lines = text.splitlines()
    header, newest = lines[0], lines[1]  # newest first: her request in the new group
    assert header.startswith("created_at,request_id") and ",pricing,half,0.5," in newest, text
    assert sum(",half," in line for line in lines[1:]) == 1, text  # her earlier requests: the old group
    ann.get_by_role("status").filter(has_text=f"{len(lines) - 1} requests exported").wait_for()
    assert fits(ann, PHONE)


def test_a_cross_site_text_plain_form_cannot_sign_the_browser_into_another_account(site, chromium):
    """Login CSRF (issue 33, row 3): a page of another site posts `enctype="text/plain"`, whose
    body, `name=value`, the attacker shapes into JSON naming the attacker's own account; the
    browser would keep the answer's session cookie and the victim would work in the attacker's
    account. The sign-in takes application/json only: a 415, no cookie."""
    mallory = site.admin("create-user", "--username", "mallory")
    site.admin("set-password", "--user", str(mallory["user_id"]), "--password", "attacker=secret1")
    context = chromium.new_context(viewport=DESKTOP)
    page = context.new_page()
    field = '{"username":"mallory","password":"attacker'  # + "=" + the value: the password's "="
    page.set_content(f"""<form method="POST" enctype="text/plain" action="{site.url}/api/user/login">
        <input type="hidden" name='{field}' value='secret1"}}'></form>""")
    with page.expect_navigation() as navigation:
        page.evaluate("document.forms[0].submit()")
    answer = navigation.value
    assert answer is not None and answer.status == 415
    assert json.loads(answer.text())["message"].startswith("Content-Type: must be application/json")
    assert [c for c in context.cookies() if c["name"] == "gateway_session"] == []
    context.close()


def test_an_operator_prices_a_model_in_the_console_and_a_users_next_request_pays_it(site, chromium):
    # Given bob, in a group the operator prices at 2 (both set in the console, as in new-api)
    bob = site.admin("create-user", "--username", "bob", "--quota-usd", "100")  # a hold here is some 33 USD
    key = site.admin("issue-key", "--user", str(bob["user_id"]), "--name", "priced")["key"]
    bob_api = {"Authorization": bob["access_token"], "X-Api-User": str(bob["user_id"])}
    operator = chromium.new_context(viewport=PHONE).new_page()
    sign_in(operator, site.url, "demo", OPERATOR_PASSWORD)
    go_to(operator, "Pricing")
    put_in_new_group(operator, bob["user_id"], "double", "2", listed="default")
    # When the operator opens m-small's prices: the shipped ones, as labelled inputs
    operator.get_by_label("Model to price").fill("m-small")
    editor = operator.get_by_role("form", name="Prices of m-small")
    editor.get_by_text("In force: the gateway's shipped table").wait_for()
    assert editor.get_by_label("Input / 1M tokens (USD)").input_value() == "0.5"
    assert editor.get_by_role("button", name="Reset to default").is_disabled()
    # And saves a negative input price: refused beside that field, nothing changed
    editor.get_by_label("Input / 1M tokens (USD)").fill("-1")
    editor.get_by_role("button", name="Save prices").click()
    beside = editor.get_by_role("alert")
    beside.wait_for()
    # the rule in words beside its field, the option's JSON not echoed back
    assert beside.inner_text() == "Must be at least 0 and at most 1000000 USD (got -1)"
    assert editor.get_by_label("Input / 1M tokens (USD)").get_attribute("aria-invalid") == "true"
    option = httpx.get(f"{site.url}/api/option", headers=bob_api)
    assert option.status_code == 403  # and bob may not even read the options
    # When the operator saves 2000 and 4000 USD per million tokens (1000 and 2000 units a token)
    editor.get_by_label("Input / 1M tokens (USD)").fill("2000")
    editor.get_by_label("Output / 1M tokens (USD)").fill("4000")
    for label in ("Cached input / 1M (USD)", "Cache write / 1M (5 min) (USD)", "Cache write / 1M (1 h) (USD)"):
        editor.get_by_label(label).fill("")
    editor.get_by_role("button", name="Save prices").click()
    operator.get_by_role("status").filter(has_text="Prices of m-small saved.").wait_for()
    editor = operator.get_by_role("form", name="Prices of m-small")
    editor.get_by_text("In force: set here").wait_for()
    assert fits(operator, PHONE)
    # Then bob's Pricing page shows it after his group's ratio, with no editor for him
    page = chromium.new_context(viewport=DESKTOP).new_page()
    page.goto(f"{site.url}/console/")
    page.get_by_role("button", name="Use an access token instead").click()
    page.get_by_label("User id").fill(str(bob["user_id"]))
    page.get_by_label("Access token").fill(bob["access_token"])
    page.get_by_role("button", name="Sign in").click()
    page.get_by_role("button", name="Sign out").wait_for()
    go_to(page, "Pricing")
    deadline = time.monotonic() + 30
    while True:  # the options and the key cache's seconds
        small = page.get_by_role("table", name="Prices").get_by_role("row").filter(
            has=page.get_by_role("cell", name="m-small", exact=True))
        small.wait_for()
        if "$4,000" in small.inner_text() and "$8,000" in small.inner_text():
            break
        assert time.monotonic() < deadline, "the operator's price never showed"
        time.sleep(1)
        page.reload()
        go_to(page, "Pricing")
    assert "double" in page.get_by_text("Your group").inner_text()
    assert page.get_by_role("region", name="Model prices").count() == 0
    assert fits(page, DESKTOP)
    # And his next request is held and settled at that price times 2, exactly, in his log
    with openai.OpenAI(api_key=key, base_url=f"{site.url}/v1", max_retries=0, timeout=60) as sdk:
        answer = sdk.chat.completions.create(model="m-small", messages=[{"role": "user", "content": "price me"}])
    usage = answer.usage
    base = usage.prompt_tokens * 1000 + usage.completion_tokens * 2000
    log = httpx.get(f"{site.url}/api/log/self", headers=bob_api).json()["data"]["items"]
    newest = log[0]
    assert (newest["model_name"], newest["group"], newest["group_ratio"]) == ("m-small", "double", 2.0)
    assert (newest["base_quota"], newest["quota"]) == (base, 2 * base)
    assert newest["held_quota"] == 2 * newest["held_base_quota"] and newest["held_base_quota"] % 1000 == 0
    # And a non-operator cannot set a price (403), and nothing changed
    refused = httpx.put(f"{site.url}/api/option", headers={**bob_api, "Content-Type": "application/json"},
                        json={"key": "ModelPrice", "value": '{"m-small": {"input_per_million": "0"}}'})
    assert refused.status_code == 403
    # When the operator resets m-small to its default, the shipped price is back
    editor.get_by_role("button", name="Reset to default").click()
    operator.get_by_role("status").filter(has_text="m-small is back to its default price.").wait_for()
    operator.get_by_role("form", name="Prices of m-small").get_by_text(
        "In force: the gateway's shipped table").wait_for()
    pricing = httpx.get(f"{site.url}/api/pricing", headers=bob_api).json()
    assert {r["model_name"]: r for r in pricing["data"]}["m-small"]["input_per_million"] == 1.0


def test_a_visitor_sees_the_public_prices_and_a_signed_in_user_the_notice(site, chromium):
    # Given the operator's Notice, and PricingAnonymous on (its default)
    with httpx.Client(base_url=site.url) as operator:
        assert operator.post("/api/user/login", json={"username": "demo", "password": OPERATOR_PASSWORD}).is_success
        answer = operator.put("/api/option/", headers={"X-Api-User": "1"},
                              json={"key": "Notice", "value": "Maintenance on Sunday 02:00 UTC"})
    assert answer.status_code == 200 and answer.json()["success"], answer.text
    # When a visitor opens the pricing page: the prices, no sign-in
    visitor = chromium.new_context(viewport=PHONE).new_page()
    visitor.goto(f"{site.url}/console/")
    visitor.get_by_role("link", name="Pricing").click()
    visitor.get_by_role("heading", name="Pricing", level=1).wait_for()
    visitor.get_by_role("table", name="Prices").get_by_role("cell", name="m-small", exact=True).wait_for()
    assert visitor.get_by_role("button", name="Sign in").count() == 0
    visitor.context.close()
    # And a signed-in user sees the Notice on the Dashboard
    page = chromium.new_context(viewport=DESKTOP).new_page()
    sign_in(page, site.url, "ann", ANN_PASSWORD)
    notice = page.get_by_role("region", name="Notice")
    notice.wait_for()
    assert notice.inner_text() == "Maintenance on Sunday 02:00 UTC"
    page.context.close()


def test_escape_closes_the_mobile_menu(site, chromium):
    page = chromium.new_context(viewport=PHONE).new_page()
    sign_in(page, site.url, "ann", ANN_PASSWORD)
    menu = page.get_by_role("button", name="Menu")
    menu.click()
    links = page.get_by_role("navigation", name="Console")
    links.get_by_role("link", name="Keys").wait_for()
    page.keyboard.press("Escape")
    links.get_by_role("link", name="Keys").wait_for(state="hidden")
    assert menu.get_attribute("aria-expanded") == "false"
    assert page.evaluate("document.activeElement.textContent") == "Menu"
    page.context.close()


def right_edge(locator) -> float:
    box = locator.bounding_box()
    assert box is not None
    return box["x"] + box["width"]


def test_long_names_and_wide_tables_fit_and_their_actions_are_reachable(site, chromium):
    # Given a user with a 64-character name
    long_name = "long" + "x" * 60
    made = site.admin("create-user", "--username", long_name, "--quota-usd", "1")
    site.admin("set-password", "--user", str(made["user_id"]), "--password", "a long password")
    # At 1280 px, the Users and Channels actions are on screen without scrolling sideways
    operator = chromium.new_context(viewport=DESKTOP).new_page()
    sign_in(operator, site.url, "demo", OPERATOR_PASSWORD)
    go_to(operator, "Users")
    row = operator.get_by_role("table", name="Users").get_by_role("row").filter(has_text=long_name)
    assert right_edge(row.get_by_role("button", name="Add quota")) <= DESKTOP["width"]
    assert right_edge(row.get_by_role("button", name=f"Disable {long_name}")) <= DESKTOP["width"]
    go_to(operator, "Channels")
    channels = operator.get_by_role("table", name="Channels")
    channel = channels.get_by_role("row").filter(has_text="simulator-chat")
    channel.wait_for()
    # Its actions are in view inside its box, which says it scrolls sideways for the other columns;
    # no word is broken mid-word
    box = operator.get_by_role("region", name="Channels, scrolls sideways")
    disable = channel.get_by_role("button", name="Disable simulator-chat")
    assert right_edge(disable) <= right_edge(box) <= DESKTOP["width"]
    assert channels.evaluate(BROKEN_WORDS) == []
    assert fits(operator, DESKTOP)
    # The protocols are named by the vendors whose API they speak
    operator.get_by_text("New channel", exact=True).click()
    protocol = operator.get_by_role("form", name="Add channel").get_by_label("Protocol")
    assert {"OpenAI-compatible (chat completions)", "Anthropic (messages)", "Kling (video and images)"} <= set(
        protocol.locator("option").all_inner_texts())
    # Every field's problem at once, each at its field, in words
    form = operator.get_by_role("form", name="Add channel")
    form.get_by_label("Name").fill("has space")
    form.get_by_label("Base URL").fill("ftp://upstream.example")
    form.get_by_label("Upstream key").fill("sk with space")
    form.get_by_label("Models (comma separated; * for any)").fill("m-small")
    form.get_by_role("button", name="Add channel").click()
    form.get_by_role("alert").first.wait_for()
    for label in ("Name", "Base URL", "Upstream key"):
        field = form.get_by_label(label, exact=True)
        assert field.get_attribute("aria-invalid") == "true", label
        said = operator.locator(f"#{field.get_attribute('aria-describedby')}").inner_text()
        assert said and not said.startswith(("name", "base_url", "key")), said
    assert form.get_by_role("alert").count() == 3 and "more problem" not in form.inner_text()
    operator.context.close()
    # At 375 px, the long name wraps in the header, the prices are cards with their labels,
    # and the export's date boxes are whole
    page = chromium.new_context(viewport=PHONE).new_page()
    sign_in(page, site.url, long_name, "a long password")
    assert fits(page, PHONE)
    go_to(page, "Pricing")
    small = page.get_by_role("table", name="Prices").get_by_role("row").filter(
        has=page.get_by_role("cell", name="m-small", exact=True))
    small.wait_for()
    input_price = small.get_by_role("cell").filter(has_text="$").first
    assert input_price.is_visible() and right_edge(input_price) <= PHONE["width"]
    # A zeta (Seedance) video model is video, priced by its output (video) tokens: no $0 input
    zeta = page.get_by_role("table", name="Prices").get_by_role("row").filter(
        has=page.get_by_role("cell", name="zeta-video-1-0-pro-250528", exact=True))
    prices = zeta.locator("td").all_inner_texts()
    assert "video" in prices and "$0" not in prices, prices
    assert fits(page, PHONE)
    go_to(page, "Usage")
    export = page.get_by_role("form", name="Export the request log as CSV")
    for label in ("From (UTC day)", "To (UTC day)"):
        box = export.get_by_label(label).bounding_box()
        assert box is not None and box["x"] >= 0 and box["width"] >= 140
        assert right_edge(export.get_by_label(label)) <= PHONE["width"]
    assert fits(page, PHONE)
    page.context.close()


@pytest.mark.parametrize("viewport", [DESKTOP, PHONE], ids=["1280px", "375px"])
def test_a_user_tries_a_model_in_the_playground_searches_prices_and_picks_a_preset_amount(site, chromium, viewport):
    key = site.admin("issue-key", "--user", str(site.ann_id), "--name", f"playground-{viewport['width']}")["key"]
    page = chromium.new_context(viewport=viewport).new_page()
    sign_in(page, site.url, "ann", ANN_PASSWORD)
    go_to(page, "Playground")
    form = page.get_by_role("form", name="Try a model")
    form.get_by_label("API key").fill(key)
    form.get_by_label("Model").fill("m-small")
    form.get_by_label("Message").fill("hello from the playground")
    form.get_by_role("button", name="Send").click()
    answer = page.get_by_role("region", name="The answer")
    # The answer or the gateway's refusal, whichever comes; a refusal fails the test with its words
    refusal = page.get_by_role("alert")
    answer.or_(refusal).first.wait_for()
    assert refusal.count() == 0, refusal.all_inner_texts()
    assert "tokens in" in answer.inner_text()
    assert fits(page, viewport)

    go_to(page, "Pricing")
    prices = page.get_by_role("table", name="Prices")
    prices.get_by_role("cell", name="m-large", exact=True).wait_for()
    page.get_by_label("Search models").fill("m-small")
    prices.get_by_role("cell", name="m-large", exact=True).wait_for(state="detached")
    assert prices.get_by_role("cell", name="m-small", exact=True).count() == 1

    go_to(page, "Top up")
    pay = page.get_by_role("form", name="Pay by card")
    pay.get_by_role("group", name="Preset amounts").get_by_role("button", name="$20").click()
    assert pay.get_by_label("Amount (USD of quota)").input_value() == "20"
    assert fits(page, viewport)
    page.context.close()


def test_an_operator_searches_users_and_channels(site, chromium):
    page = chromium.new_context(viewport=DESKTOP).new_page()
    sign_in(page, site.url, "demo", OPERATOR_PASSWORD)
    go_to(page, "Users")
    users = page.get_by_role("table", name="Users")
    users.get_by_role("cell", name="demo", exact=True).wait_for()
    page.get_by_label("Search users on this page").fill("ann")
    users.get_by_role("cell", name="demo", exact=True).wait_for(state="detached")
    assert users.get_by_role("cell", name="ann", exact=True).count() == 1
    go_to(page, "Channels")
    channels = page.get_by_role("table", name="Channels")
    channels.get_by_role("row").filter(has_text="simulator-chat").wait_for()
    page.get_by_label("Search channels").fill("no channel is named this")
    channels.get_by_role("row").filter(has_text="simulator-chat").wait_for(state="detached")
    page.context.close()
