"""People join, pay and invite by themselves, in a real browser (Debian's Chromium driven by
Playwright, every control by its accessible name) against the local gateway `make run` starts:
issue 34's "Done when" from a newcomer's phone (375 px), and an operator's redemption codes, orders
and site settings."""

from __future__ import annotations

import json
import re
from pathlib import Path

import httpx
import openai
import pytest

from tests.e2e.browser_support import DESKTOP, PHONE, browser, chromium_missing, go_to, sign_in
from tests.e2e.conftest import DEMO_ACCESS_TOKEN, LocalGateway

pytestmark = [pytest.mark.e2e, pytest.mark.skipif(chromium_missing() is not None, reason=chromium_missing() or "")]

OPERATOR_PASSWORD = "operator password"
IVY_PASSWORD = "ivy's password"
UNITS_PER_USD = 500_000
OPERATOR = {"Authorization": DEMO_ACCESS_TOKEN, "X-Api-User": "1"}


@pytest.fixture(scope="module")
def site():
    """A local gateway whose demo user (1, role 100) and ivy (a user who invites) have passwords.
    Options are read afresh by every request (no 5 s cache), so what the operator sets is what the
    next page sees, whichever serving process answers it."""
    server = LocalGateway({"GATEWAY_KEY_CACHE_SECONDS": "0"})
    try:
        server.admin("set-password", "--user", "1", "--password", OPERATOR_PASSWORD)
        ivy = server.admin("create-user", "--username", "ivy")
        server.admin("set-password", "--user", str(ivy["user_id"]), "--password", IVY_PASSWORD)
        server.ivy_id = ivy["user_id"]
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


def mail_to(site: LocalGateway, address: str) -> list[dict]:
    """The messages of the local outbox (`make admin ARGS="outbox"`) to `address`, oldest first."""
    folder = Path(site.state_dir) / "outbox"
    messages = [json.loads(p.read_text()) for p in sorted(folder.glob("*.json"))] if folder.exists() else []
    return [m for m in messages if m["to"] == address]


def card(page, term: str) -> str:
    """The first value under a card's term ("Balance", "Invited", ...)."""
    box = page.get_by_role("term").filter(has_text=re.compile(f"^{re.escape(term)}$")).locator("xpath=..")
    return box.get_by_role("definition").first.inner_text().strip()


def wait_for_card(page, term: str, value: str) -> None:
    page.get_by_role("term").filter(has_text=re.compile(f"^{re.escape(term)}$")).locator("xpath=..") \
        .get_by_role("definition").first.filter(has_text=value).wait_for()


def test_a_newcomer_signs_up_from_an_invitation_with_an_emailed_code_pays_redeems_calls_the_api_and_the_inviter_earns(
        site, chromium):
    # The operator asks for verified addresses and rewards inviters with 2 USD, on Site settings,
    # and makes a 3 USD redemption code on Redemption codes.
    operator = chromium.new_context(viewport=DESKTOP).new_page()
    sign_in(operator, site.url, "demo", OPERATOR_PASSWORD)
    go_to(operator, "Site settings")
    # Grouped as new-api's (sign-up, payments, invitations, prices), named in words, quotas in USD.
    signup = operator.get_by_role("region", name="Sign-up")
    setting = signup.get_by_role("form", name="Sign-up needs an emailed code", exact=True)
    assert "sign-up needs a code" in setting.inner_text()  # the option's own description
    setting.get_by_label("Sign-up needs an emailed code", exact=True).select_option("on")
    setting.get_by_role("button", name="Save Sign-up needs an emailed code").click()
    setting.get_by_role("status").filter(has_text="Saved.").wait_for()
    invitations = operator.get_by_role("region", name="Invitations")
    setting = invitations.get_by_role("form", name="Reward to the inviter at an invitee's first payment (USD)")
    setting.get_by_role("textbox").fill("2")
    setting.get_by_role("button").click()
    setting.get_by_role("status").filter(has_text="Saved.").wait_for()
    stored = {o["key"]: o["value"] for o in httpx.get(f"{site.url}/api/option/", headers=OPERATOR).json()["data"]}
    assert (stored["EmailVerificationEnabled"], stored["QuotaForInviter"]) == ("true", str(2 * UNITS_PER_USD))
    go_to(operator, "Redemption codes")
    form = operator.get_by_role("form", name="Create codes")
    form.get_by_label("Name").fill("welcome")
    form.get_by_label("Quota per code (USD)").fill("3")
    form.get_by_role("button", name="Create codes").click()
    code = operator.get_by_label("The new codes").inner_text().strip()
    assert re.fullmatch(r"[0-9a-f]{32}", code)

    # The inviter's link, from the Invite page; nobody invited yet.
    inviter = chromium.new_context(viewport=DESKTOP).new_page()
    sign_in(inviter, site.url, "ivy", IVY_PASSWORD)
    go_to(inviter, "Invite")
    link = inviter.get_by_label("The invitation link").inner_text().strip()
    assert re.fullmatch(rf"{re.escape(site.url)}/console/#/register\?aff=[A-Za-z0-9_-]+", link)
    assert card(inviter, "Invited") == "0" and card(inviter, "Earned in all") == "$0.00"

    # The newcomer, on a phone, opens the link: Sign up, with the invitation code filled in.
    context = chromium.new_context(viewport=PHONE)
    context.grant_permissions(["clipboard-read", "clipboard-write"], origin=site.url)
    page = context.new_page()
    page.goto(link)
    form = page.get_by_role("form", name="Sign up")
    assert form.get_by_label("Invitation code (optional)").input_value() == link.rsplit("=", 1)[1]
    email = "nia+gw@example.com"  # a "+" in the address survives the reset link below
    form.get_by_label("Username").fill("nia")
    form.get_by_label("Password", exact=True).fill("nia's long password")
    form.get_by_label("Repeat password").fill("nia's other password")
    form.get_by_label("Email").fill(email)
    form.get_by_role("button", name="Sign up").click()  # the rule in words, at the field it is about
    form.get_by_role("alert").filter(has_text="Must be the same as the password").wait_for()
    assert form.get_by_label("Repeat password").get_attribute("aria-invalid") == "true"
    form.get_by_label("Repeat password").fill("nia's long password")
    form.get_by_role("button", name="Sign up").click()  # no code yet: the API says so beside the field
    form.get_by_role("alert").filter(has_text="Wrong or expired").wait_for()  # in words, at its field
    assert form.get_by_label("Verification code").get_attribute("aria-invalid") == "true"
    form.get_by_role("button", name="Send code").click()
    form.get_by_role("status").filter(has_text=f"A code was sent to {email}").wait_for()
    assert fits(page, PHONE)
    [message] = mail_to(site, email)
    emailed = re.search(r"code is (\d{6})", message["text"]).group(1)
    form.get_by_label("Verification code").fill(emailed)
    form.get_by_label("Username").fill("ivy")  # taken: refused at its field, and the code is not spent
    form.get_by_role("button", name="Sign up").click()
    form.get_by_role("alert").filter(has_text="Taken; choose another").wait_for()
    assert form.get_by_label("Username").get_attribute("aria-invalid") == "true"
    form.get_by_label("Username").fill("nia")
    form.get_by_role("button", name="Sign up").click()  # the same code
    page.get_by_role("button", name="Sign out").wait_for()  # signed in
    page.get_by_role("heading", name="Dashboard", level=1).wait_for()

    inviter.reload()
    wait_for_card(inviter, "Invited", "1")
    assert card(inviter, "Reward to transfer") == "$0.00"  # signing up earns nothing

    # A redemption code first: not a payment, so still no reward.
    go_to(page, "Top up")
    redeem = page.get_by_role("form", name="Redeem a code")
    redeem.get_by_label("Redemption code").fill(code)
    redeem.get_by_role("button", name="Redeem").click()
    redeem.get_by_role("status").filter(has_text="Added $3.00").wait_for()
    wait_for_card(page, "Balance", "$3.00")
    redeem.get_by_label("Redemption code").fill(code)  # again: when, and how much, in words and dollars
    redeem.get_by_role("button", name="Redeem").click()
    again = redeem.get_by_role("alert")
    again.wait_for()
    assert re.fullmatch(r"You redeemed this code already \(on \d{4}-\d\d-\d\d \d\d:\d\d UTC\); "
                        r"its \$3\.00 \(1,500,000 units\) were added then", again.inner_text()), again.inner_text()
    inviter.reload()
    wait_for_card(inviter, "Invited", "1")
    assert card(inviter, "Reward to transfer") == "$0.00"

    # A card payment left on Stripe's page (its Cancel link) stays pending until Stripe's session
    # expires: the console says until when, resumes it at the same page, or cancels it.
    pay = page.get_by_role("form", name="Pay by card")
    pay.get_by_label("Amount (USD of quota)").fill("4")
    pay.get_by_role("button", name="Pay by card").click()
    page.get_by_role("link", name="Cancel").click()
    page.wait_for_url(re.compile(r"/console/\?topup=cancelled&order=ord_"))
    left = page.get_by_role("region", name="Your payment")
    left.get_by_role("status").filter(has_text="the payment page is open until").wait_for()
    left_no = re.search(r"order=(ord_\w+)", page.url).group(1)
    left.get_by_role("link", name=f"Resume payment of order {left_no}").click()
    page.get_by_role("button", name="Pay $4.00").wait_for()  # the same session's page, still open
    page.go_back()
    left.get_by_role("button", name=f"Cancel order {left_no}").click()
    left.get_by_role("status").filter(has_text="cancelled").wait_for()
    cancelled = page.get_by_role("table", name="Your orders").get_by_role("row").filter(has_text=left_no)
    cancelled.filter(has_text="cancelled").wait_for()
    assert cancelled.get_by_role("link", name=f"Resume payment of order {left_no}").count() == 0
    wait_for_card(page, "Balance", "$3.00")

    # Then 5 USD by card: Stripe Checkout's page (the local simulator), its Pay button, and back.
    pay.get_by_label("Amount (USD of quota)").fill("5")
    pay.get_by_role("button", name="Pay by card").click()
    page.get_by_role("button", name="Pay $5.00").wait_for()
    checkout = page.url.split("?")[0]  # Stripe's page: <simulator>/pay/<session id>
    page.get_by_role("button", name="Pay $5.00").click()
    page.wait_for_url(re.compile(r"/console/\?topup=success&order=ord_"))
    returned = page.get_by_role("region", name="Your payment").get_by_role("status")
    returned.filter(has_text="paid").wait_for()
    trade_no = re.search(r"order=(ord_\w+)", page.url).group(1)
    assert f"Order {trade_no} (5 USD of quota): paid; $5.00 added" in returned.inner_text()
    wait_for_card(page, "Balance", "$8.00")
    row = page.get_by_role("table", name="Your orders").get_by_role("row").filter(has_text=trade_no)
    assert "paid" in row.inner_text() and "5.00 USD" in row.inner_text()
    assert fits(page, PHONE)

    # A key made in the console calls the API through the OpenAI SDK.
    go_to(page, "Keys")
    keys = page.get_by_role("form", name="Create key")
    keys.get_by_label("Name").fill("nia's first key")
    keys.get_by_role("button", name="Create key").click()
    key = page.get_by_label("The new key").inner_text().strip()
    with openai.OpenAI(api_key=key, base_url=f"{site.url}/v1", max_retries=0, timeout=60) as sdk:
        answer = sdk.chat.completions.create(model="m-small", messages=[{"role": "user", "content": "hello"}])
    assert answer.choices[0].message.content

    # The request log names the top-ups and says their amounts in dollars; its filter has them
    go_to(page, "Request log")
    filters = page.get_by_role("form", name="Filter the log")
    filters.get_by_label("Type").select_option(label="top-up")
    filters.get_by_role("button", name="Apply filters").click()
    log = page.get_by_role("table", name="Requests")
    log.get_by_role("row").filter(has_text="stripe").wait_for()
    rows = [row.locator("td").all_inner_texts() for row in log.locator("tbody tr").all()]
    assert sorted(r[4] for r in rows) == ["+$3.00", "+$5.00"] and {r[1] for r in rows} == {"top-up"}, rows
    assert "redemption 'welcome': $3.00 (1,500,000 units) added" in [r[-1] for r in rows], rows
    assert fits(page, PHONE)
    # The Dashboard's Requests card counts what its chart counts: the one call
    go_to(page, "Dashboard")
    page.get_by_role("img", name=re.compile(r"^Your spend per day")).wait_for()
    assert card(page, "Requests served") == "1"
    assert " and 1 requests served" in page.locator("figure figcaption").inner_text()

    # The first payment paid the inviter's reward, once; ivy moves it into the balance.
    inviter.reload()
    wait_for_card(inviter, "Reward to transfer", "$2.00")
    assert card(inviter, "Earned in all") == "$2.00" and card(inviter, "Invited") == "1"
    transfer = inviter.get_by_role("form", name="Transfer reward to balance")
    transfer.get_by_label("Amount (USD)").fill("2")
    transfer.get_by_role("button", name="Transfer").click()
    transfer.get_by_role("status").filter(has_text="Moved $2.00 into your balance.").wait_for()
    wait_for_card(inviter, "Reward to transfer", "$0.00")
    assert card(inviter, "Earned in all") == "$2.00" and card(inviter, "Balance") == "$2.00"
    transfer.get_by_label("Amount (USD)").fill("1")  # nothing left: the API's refusal, beside the field
    transfer.get_by_role("button", name="Transfer").click()
    refused = transfer.get_by_role("alert")
    # in words beside the field
    assert refused.inner_text() == "More than the invitation reward you have not yet transferred"
    assert transfer.get_by_label("Amount (USD)").get_attribute("aria-invalid") == "true"

    # Forgot password: the emailed link opens the reset page, which shows a new password once.
    page.get_by_role("button", name="Sign out").click()
    page.get_by_role("link", name="Forgot password?").click()
    forgot = page.get_by_role("form", name="Reset password by email")
    forgot.get_by_label("Email").fill(email)
    forgot.get_by_role("button", name="Send reset link").click()
    forgot.get_by_role("status").wait_for()
    reset_link = re.search(r"open (\S+) within", mail_to(site, email)[-1]["text"]).group(1)
    page.goto(reset_link)
    page.get_by_role("button", name="Reset password").click()
    password = page.get_by_label("The new password").inner_text().strip()
    assert len(password) >= 12
    sign_in(page, site.url, "nia", password)
    assert fits(page, PHONE)

    # nia spends most of the balance (the operator prices m-small's answer at 1 USD a token, 6 tokens
    # at most), then the card payment is refunded: what was spent of it is owed, shown in dollars on
    # her Dashboard and beside her balance on the operator's Users page.
    def model_price(value: dict) -> None:
        answer = httpx.put(f"{site.url}/api/option/", headers=OPERATOR, timeout=30,
                           json={"key": "ModelPrice", "value": json.dumps(value)})
        assert answer.json()["success"], answer.text

    def nia_now() -> dict:
        users = httpx.get(f"{site.url}/api/admin/users", headers=OPERATOR, timeout=30).json()["data"]["items"]
        return next(u for u in users if u["username"] == "nia")

    model_price({"m-small": {"input_per_million": "0", "output_per_million": "1000000"}})
    with openai.OpenAI(api_key=key, base_url=f"{site.url}/v1", max_retries=0, timeout=60) as sdk:
        for _ in range(4):  # each holds at most 3 USD: until less than the 5 USD to refund is left
            if nia_now()["quota"] < 4 * UNITS_PER_USD:
                break
            sdk.chat.completions.create(model="m-small", max_tokens=3,
                                        messages=[{"role": "user", "content": "Tell me a long story about a boat."}])
    model_price({})
    stripe_base, session_id = checkout.rsplit("/pay/", 1)
    stripe_key = {"Authorization": "Bearer sk_test_local"}
    intent = httpx.get(f"{stripe_base}/v1/checkout/sessions/{session_id}", headers=stripe_key,
                       timeout=30).json()["payment_intent"]
    refunded = httpx.post(f"{stripe_base}/v1/refunds", data={"payment_intent": intent}, headers=stripe_key, timeout=60)
    assert refunded.status_code == 200, refunded.text
    nia = nia_now()
    assert nia["owed_quota"] > 0, nia  # (her balance still shows what the open quota lease holds)
    owed = f"${nia['owed_quota'] / UNITS_PER_USD:,.2f}"
    page.reload()
    wait_for_card(page, "Owed", owed)
    owed_card = page.get_by_role("term").filter(has_text=re.compile("^Owed$")).locator("xpath=..")
    assert "repaid from your next top-up" in owed_card.inner_text()
    assert fits(page, PHONE)
    go_to(operator, "Users")
    row = operator.get_by_role("table", name="Users").get_by_role("row").filter(has_text="nia")
    row.filter(has_text=f"owes {owed}").wait_for()
    context.close()


def test_an_operator_makes_disables_and_deletes_codes_sees_every_order_and_changes_a_setting(site, chromium):
    # Orders of two users: the demo user's paid through the simulator's page, ivy's left pending.
    with httpx.Client(base_url=site.url, headers=OPERATOR, timeout=30) as api:
        paid = api.post("/api/user/pay", json={"amount": 7, "payment_method": "stripe"}).json()["data"]
        assert httpx.post(paid["pay_link"]).status_code == 303
    token = site.admin("set-access-token", "--user", str(site.ivy_id))["access_token"]
    pending = httpx.post(f"{site.url}/api/user/pay", json={"amount": 9, "payment_method": "stripe"},
                         headers={"Authorization": token, "X-Api-User": str(site.ivy_id)}).json()["data"]

    context = chromium.new_context(viewport=PHONE)
    context.grant_permissions(["clipboard-read", "clipboard-write"], origin=site.url)
    page = context.new_page()
    sign_in(page, site.url, "demo", OPERATOR_PASSWORD)

    go_to(page, "Orders")
    orders = page.get_by_role("table", name="Orders")
    orders.get_by_role("row").filter(has_text=paid["trade_no"]).filter(has_text="paid").wait_for()
    theirs = orders.get_by_role("row").filter(has_text=pending["trade_no"]).inner_text()
    assert "pending" in theirs and f"#{site.ivy_id}" in theirs  # everyone's orders, not the operator's own
    assert fits(page, PHONE)

    go_to(page, "Redemption codes")
    form = page.get_by_role("form", name="Create codes")
    form.get_by_label("Name").fill("batch")
    form.get_by_label("Quota per code (USD)").fill("1")
    form.get_by_label("How many").fill("3")
    form.get_by_role("button", name="Create codes").click()
    codes = page.get_by_label("The new codes").inner_text().split()
    assert len(codes) == 3 and len(set(codes)) == 3
    page.get_by_role("button", name="Copy", exact=True).click()
    page.get_by_role("status").filter(has_text="Copied.").wait_for()
    assert page.evaluate("navigator.clipboard.readText()").split() == codes
    page.get_by_role("button", name="Done").click()
    assert page.get_by_label("The new codes").count() == 0
    table = page.get_by_role("table", name="Redemption codes")
    rows = table.get_by_role("row").filter(has_text="batch")
    rows.nth(2).wait_for()
    assert rows.count() == 3
    first = rows.filter(has_text=codes[0])
    code_id = first.get_by_role("cell").first.inner_text().strip()
    first.get_by_role("button", name=f"Disable code {code_id}").click()
    first.get_by_role("button", name=f"Enable code {code_id}").wait_for()
    assert "disabled" in first.inner_text()

    def redeem(key: str) -> httpx.Response:
        return httpx.post(f"{site.url}/api/user/topup", headers=OPERATOR, json={"key": key})

    refused = redeem(codes[0])
    assert refused.status_code == 400 and "disabled" in refused.json()["message"]
    first.get_by_role("button", name=f"Enable code {code_id}").click()
    first.get_by_role("button", name=f"Disable code {code_id}").wait_for()
    assert redeem(codes[0]).json()["data"] == UNITS_PER_USD
    go_to(page, "Orders")  # and back: the list read again
    go_to(page, "Redemption codes")
    used = page.get_by_role("table", name="Redemption codes").get_by_role("row").filter(has_text=codes[0])
    used.filter(has_text="used").wait_for()
    assert used.get_by_role("button", name=f"Disable code {code_id}").count() == 0  # a used code never changes
    second = page.get_by_role("table", name="Redemption codes").get_by_role("row").filter(has_text=codes[1])
    second_id = second.get_by_role("cell").first.inner_text().strip()
    second.get_by_role("button", name=f"Delete code {second_id}").click()
    second.wait_for(state="detached")
    assert redeem(codes[1]).status_code == 400
    assert fits(page, PHONE)

    go_to(page, "Site settings")
    name = page.get_by_role("form", name="Site name", exact=True)
    name.wait_for()
    assert [h.inner_text() for h in page.get_by_role("heading", level=2).all()][:5] == [
        "Site", "Sign-up", "Invitations", "Payments", "Prices"]
    name.get_by_label("Site name", exact=True).fill("Acme AI")
    name.get_by_role("button", name="Save Site name").click()
    name.get_by_role("status").filter(has_text="Saved.").wait_for()
    assert httpx.get(f"{site.url}/api/status").json()["data"]["system_name"] == "Acme AI"
    limit = page.get_by_role("form", name="Sign-up, code and reset requests per window", exact=True)
    limit.get_by_role("textbox").fill("many")
    limit.get_by_role("button").click()
    alert = limit.get_by_role("alert")
    alert.wait_for()
    assert alert.inner_text().startswith("value: CriticalRateLimitNum must be a whole number")
    invitee = page.get_by_role("form", name="Quota an invitee starts with (USD)", exact=True)
    assert "500,000 units = $1" in invitee.inner_text()
    invitee.get_by_label("Quota an invitee starts with (USD)", exact=True).fill("0.5")
    invitee.get_by_role("button").click()
    invitee.get_by_role("status").filter(has_text="Saved.").wait_for()
    # A JSON editor: text that does not parse is refused before anything is sent
    ratios = page.get_by_role("region", name="Prices").get_by_role("form", name="Group price ratios (JSON)")
    editor = ratios.get_by_label("Group price ratios (JSON)", exact=True)
    assert editor.evaluate("e => e.tagName") == "TEXTAREA" and '"default": 1' in editor.input_value()
    before = editor.input_value()
    editor.fill(before.replace("{", "{ nope", 1))
    ratios.get_by_role("button").click()
    assert ratios.get_by_role("alert").inner_text().startswith("Not valid JSON, nothing saved")
    assert editor.get_attribute("aria-invalid") == "true"
    stored = {o["key"]: o["value"] for o in httpx.get(f"{site.url}/api/option/", headers=OPERATOR).json()["data"]}
    assert stored["CriticalRateLimitNum"] == "20"  # refused: nothing stored
    assert stored["QuotaForInvitee"] == str(UNITS_PER_USD // 2)
    assert json.loads(stored["GroupRatio"]) == json.loads(before)
    assert fits(page, PHONE)

    visitor = chromium.new_context(viewport=PHONE).new_page()  # the sign-in page names the site
    visitor.goto(f"{site.url}/console/")
    visitor.get_by_role("heading", name="Acme AI", level=1).wait_for()
    context.close()
