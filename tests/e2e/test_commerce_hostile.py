"""Issue 34's hostile cases end to end, over HTTP against the local gateway `make run` starts (with
its Stripe simulator and its mail outbox): a forged webhook, an expired code, a sign-up flood from
one address, and enumeration by the code and reset requests.

Each test speaks from its own loopback address (127.0.0.x: the runner takes the client's address
from the socket, as API Gateway's `sourceIp`), so one test's critical-limit counts never meet
another's."""

from __future__ import annotations

import json
import re
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest
import stripe

from tests.e2e.conftest import DEMO_ACCESS_TOKEN, LocalGateway

pytestmark = pytest.mark.e2e

OPERATOR = {"Authorization": DEMO_ACCESS_TOKEN, "X-Api-User": "1"}
WEBHOOK_SECRET = "whsec_e2e_" + "5" * 32
UNITS_PER_USD = 500_000


@pytest.fixture(scope="module")
def site():
    # The webhook secret is the test's, so it can sign a stale event the way Stripe would; options
    # are read afresh by each request (no 5 s cache), whichever serving process answers.
    server = LocalGateway({"GATEWAY_STRIPE_WEBHOOK_SECRET": WEBHOOK_SECRET, "GATEWAY_KEY_CACHE_SECONDS": "0"})
    yield server
    server.release()


def client(site: LocalGateway, source: str, **kwargs) -> httpx.Client:
    """A client whose requests come from `source` (a loopback address of its own)."""
    return httpx.Client(base_url=site.url, timeout=60, transport=httpx.HTTPTransport(local_address=source), **kwargs)


def set_option(site: LocalGateway, key: str, value) -> None:
    answer = httpx.put(f"{site.url}/api/option/", headers=OPERATOR, json={"key": key, "value": value})
    assert answer.status_code == 200, answer.text


def outbox(site: LocalGateway) -> list[dict]:
    folder = Path(site.state_dir) / "outbox"
    return [json.loads(p.read_text()) for p in sorted(folder.glob("*.json"))] if folder.exists() else []


def demo(site: LocalGateway) -> dict:
    return httpx.get(f"{site.url}/api/user/self", headers=OPERATOR).json()["data"]


def own_order(site: LocalGateway, trade_no: str) -> dict:
    items = httpx.get(f"{site.url}/api/user/topup/self", headers=OPERATOR, params={"page_size": 100}).json()
    return next(o for o in items["data"]["items"] if o["trade_no"] == trade_no)


def test_a_forged_stale_or_tampered_webhook_is_a_400_and_credits_nothing_and_the_real_one_credits_once(site):
    order = httpx.post(f"{site.url}/api/user/pay", headers=OPERATOR,
                       json={"amount": 5, "payment_method": "stripe"}).json()["data"]
    before = demo(site)["quota"]
    session = {"id": order["session_id"], "object": "checkout.session", "mode": "payment", "status": "complete",
               "payment_status": "paid", "amount_total": 500, "currency": "usd",
               "client_reference_id": order["trade_no"], "metadata": {"trade_no": order["trade_no"]}}
    event = {"id": "evt_e2e_1", "object": "event", "type": "checkout.session.completed",
             "data": {"object": session}}
    payload = json.dumps(event)
    tampered = json.dumps({**event, "data": {"object": {**session, "amount_total": 99_999_900}}})
    sign = stripe.WebhookSignature.generate_signature_header
    attempts = {
        "signed with another secret": (payload, sign(payload, "whsec_attacker")),
        "unsigned": (payload, None),
        "stale (signed ten minutes ago)": (payload, sign(payload, WEBHOOK_SECRET, int(time.time()) - 600)),
        "tampered after signing": (tampered, sign(payload, WEBHOOK_SECRET)),
        "a made-up signature": (payload, f"t={int(time.time())},v1={'0' * 64}"),
    }
    with client(site, "127.0.0.2") as http:
        for how, (body, signature) in attempts.items():
            headers = {"Content-Type": "application/json", **({"Stripe-Signature": signature} if signature else {})}
            answer = http.post("/api/stripe/webhook", content=body, headers=headers)
            assert answer.status_code == 400, (how, answer.text)
            assert "Stripe-Signature" in answer.text, how
        assert demo(site)["quota"] == before
        assert own_order(site, order["trade_no"])["status"] == "pending"

        # The same event signed as Stripe signs it credits the order's units, once however often it comes.
        for _ in range(3):
            answer = http.post("/api/stripe/webhook", content=payload, headers={
                "Content-Type": "application/json", "Stripe-Signature": sign(payload, WEBHOOK_SECRET)})
            assert answer.status_code == 200, answer.text
    assert demo(site)["quota"] == before + 5 * UNITS_PER_USD
    assert own_order(site, order["trade_no"])["status"] == "success"


def test_an_expired_code_is_refused_and_changes_nothing(site):
    expiry = int(time.time()) + 2
    made = httpx.post(f"{site.url}/api/redemption/", headers=OPERATOR,
                      json={"name": "short-lived", "quota": UNITS_PER_USD, "count": 1, "expired_time": expiry})
    assert made.status_code == 200, made.text
    [key] = made.json()["data"]
    while time.time() <= expiry + 1:  # the code's own expiry passes; nothing here measures time
        time.sleep(0.5)
    before = demo(site)["quota"]
    with client(site, "127.0.0.3", headers=OPERATOR) as http:
        answer = http.post("/api/user/topup", json={"key": key})
        assert answer.status_code == 400
        assert answer.json()["message"] == "key: this redemption code has expired"
        codes = http.get("/api/redemption/", params={"page_size": 100}).json()["data"]["items"]
    code = next(c for c in codes if c["key"] == key)
    assert code["status"] == 1 and code["used_user_id"] == 0 and code["redeemed_time"] == 0
    assert demo(site)["quota"] == before
    log = httpx.get(f"{site.url}/api/log/self", headers=OPERATOR, params={"type": 1}).json()["data"]["items"]
    assert not any("short-lived" in entry["content"] for entry in log)


def test_a_sign_up_flood_from_one_address_is_cut_at_the_limit_with_retry_after(site):
    set_option(site, "EmailVerificationEnabled", False)
    set_option(site, "CriticalRateLimitNum", 5)
    try:
        def sign_up(n: int) -> httpx.Response:
            with client(site, "127.0.0.4") as http:
                return http.post("/api/user/register", json={"username": f"flood-{n}", "password": "a long password"})

        with ThreadPoolExecutor(12) as pool:  # all at once: the count is one conditional write each
            answers = list(pool.map(sign_up, range(12)))
        statuses = sorted(a.status_code for a in answers)
        assert statuses == [200] * 5 + [429] * 7
        for answer in answers:
            if answer.status_code == 429:
                assert 1 <= int(answer.headers["Retry-After"]) <= 1200
                assert "too many" in answer.json()["message"]
        users = httpx.get(f"{site.url}/api/admin/users", headers=OPERATOR, params={"page_size": 100}).json()
        made = [u["username"] for u in users["data"]["items"] if u["username"].startswith("flood-")]
        assert len(made) == 5  # fewer accounts than requests: exactly the limit

        # Another address is not held back by this one's flood.
        with client(site, "127.0.0.5") as http:
            answer = http.post("/api/user/register", json={"username": "flood-other", "password": "a long password"})
        assert answer.status_code == 200, answer.text
    finally:
        set_option(site, "CriticalRateLimitNum", 20)


def test_code_and_reset_requests_answer_the_same_for_a_taken_and_a_free_address_and_send_one_message_each(site):
    set_option(site, "EmailVerificationEnabled", True)
    taken, free = "taken@example.com", "free@example.com"
    with client(site, "127.0.0.6") as http:  # an account owns the taken address (verified at sign-up)
        assert http.get("/api/verification", params={"email": taken}).status_code == 200
        code = re.search(r"code is (\d{6})", [m for m in outbox(site) if m["to"] == taken][-1]["text"]).group(1)
        answer = http.post("/api/user/register", json={"username": "owner", "password": "a long password",
                                                       "email": taken, "verification_code": code})
        assert answer.status_code == 200, answer.text

    with client(site, "127.0.0.7") as http:
        for path in ("/api/verification", "/api/reset_password"):
            seen = []
            for address in (taken, free):
                mail_before = [m for m in outbox(site) if m["to"] == address]
                answer = http.get(path, params={"email": address})
                mail_after = [m for m in outbox(site) if m["to"] == address]
                assert len(mail_after) == len(mail_before) + 1, (path, address)
                headers = {k.lower() for k in answer.headers} - {"date", "content-length"}
                seen.append((answer.status_code, answer.content, headers))
            assert seen[0] == seen[1], path
            assert seen[0][0] == 200
