"""Online top-up through Stripe Checkout against the Stripe simulator (Checkout Session API, hosted
page, webhooks signed by the stripe library's own signer), delivered over HTTP to the commerce
function: credited exactly once whatever Stripe retries, reorders or the gateway's crashes; the
invitation reward at the first payment only; reward moved into quota never below zero."""

from __future__ import annotations

import json
import random
import threading
import time
from collections import Counter

import httpx
import pytest
import stripe

from gateway import options
from gateway.admission import balances
from gateway.commerce import credits, invitations, payments, reversals
from gateway.commerce.store import CommerceRepository
from gateway.errors import GatewayError
from gateway.store.aws import client, to_item, to_values
from gateway.store.options import OptionsRepository
from gateway_local.simulators import stripe as stripe_sim
from tests.conftest import LambdaContext, api_event, serve_asgi, use_environment

SECRET = "whsec_test_secret"


@pytest.fixture(scope="module")
def webhook_url(commerce_fn):
    """The commerce function behind a real HTTP endpoint, as API Gateway would put it."""
    async def app(scope, receive, send):
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        headers = {k.decode(): v.decode() for k, v in scope["headers"]}
        event = api_event("POST", "/api/stripe/webhook", body=body.decode(), headers=headers)
        answer = commerce_fn.lambda_handler(event, LambdaContext())
        await send({"type": "http.response.start", "status": answer["statusCode"],
                    "headers": [(b"content-type", b"application/json")]})
        await send({"type": "http.response.body", "body": answer["body"].encode()})

    with serve_asgi(app) as url:
        yield f"{url}/api/stripe/webhook"


@pytest.fixture(scope="module")
def stripe_url():
    with serve_asgi(stripe_sim.app) as url:
        yield url


@pytest.fixture
def payments_on(stripe_url, webhook_url, store):
    saved = use_environment(GATEWAY_STRIPE_API_KEY="sk_test_gateway", GATEWAY_STRIPE_WEBHOOK_SECRET=SECRET,
                            GATEWAY_STRIPE_API_BASE=stripe_url, GATEWAY_STRIPE_WEBHOOK_URL=webhook_url,
                            GATEWAY_SIM_STRIPE_API_KEY="sk_test_gateway", GATEWAY_SIM_STRIPE_WEBHOOK_SECRET=SECRET)
    OptionsRepository().put_option("TopUpRateLimitNum", "1000", by=1, at=0)  # tests open many orders
    options.forget()
    stripe_sim.DELIVERED.clear()
    yield stripe_url
    use_environment(**saved)
    options.forget()


@pytest.fixture
def payer(demo, accounts):
    ann = accounts.users.create_user(username="ann", quota=0, access_token="ann-access-token")
    return int(ann["id"])


def quota(accounts, user_id):
    return int(accounts.users.raw_user(user_id, consistent=True)["quota"])


def start(user_id, accounts, amount=5):
    user = accounts.users.raw_user(user_id, consistent=True)
    return payments.start(user_id, user, amount, "stripe", return_url="http://gateway.test/console/")["data"]


def pay(stripe_url, session_id, deliveries=1):
    answer = httpx.post(f"{stripe_url}/pay/{session_id}", params={"deliveries": deliveries}, timeout=60)
    assert answer.status_code == 303


def signed(event: dict, secret: str = SECRET, at: int | None = None) -> tuple[str, str]:
    payload = json.dumps(event)
    return payload, stripe.WebhookSignature.generate_signature_header(payload, secret, at)


def post_webhook(commerce_fn, payload: str, signature: str | None):
    headers = {"Stripe-Signature": signature} if signature else {}
    answer = commerce_fn.lambda_handler(api_event("POST", "/api/stripe/webhook", body=payload, headers=headers),
                                      LambdaContext())
    return answer["statusCode"], json.loads(answer["body"])


def test_a_card_top_up_delivered_five_times_credits_once(payments_on, payer, accounts, commerce_fn):
    order = start(payer, accounts, amount=5)
    assert order["pay_link"].startswith(payments_on) and order["session_id"] in order["pay_link"]
    assert order["quota"] == 5 * 500_000 and order["money"] == 5.0
    assert CommerceRepository().order(order["trade_no"])["status"] == "pending"
    pay(payments_on, order["session_id"], deliveries=5)
    assert len(stripe_sim.DELIVERED) == 5
    assert quota(accounts, payer) == 2_500_000
    saved = CommerceRepository().order(order["trade_no"])
    assert saved["status"] == "success" and saved["paid_at"] > 0
    assert accounts.users.raw_user(payer, consistent=True)["has_payment_method"] is True
    from gateway.api import requestlog

    log = requestlog.account_log(payer, {"type": "1"})["data"]["items"]
    assert [(e["quota"], e["content"]) for e in log] == [(2_500_000, "stripe: $5.00 (2,500,000 units) added")]


def test_the_amount_credited_is_the_orders_never_the_events(payments_on, payer, accounts, commerce_fn):
    order = start(payer, accounts, amount=5)
    session = dict(stripe_sim.SESSIONS[order["session_id"]], status="complete", payment_status="paid",
                   amount_total=99_999_900)  # an event naming another amount (Stripe never would)
    payload, signature = signed({"id": "evt_1", "type": "checkout.session.completed", "data": {"object": session}})
    assert post_webhook(commerce_fn, payload, signature)[0] == 200
    assert quota(accounts, payer) == 2_500_000


@pytest.mark.parametrize("how", ["forged", "stale", "unsigned", "other secret"])
def test_a_forged_or_stale_webhook_is_a_400_and_changes_nothing(payments_on, payer, accounts, commerce_fn, how):
    order = start(payer, accounts)
    session = dict(stripe_sim.SESSIONS[order["session_id"]], status="complete", payment_status="paid")
    event = {"id": "evt_2", "type": "checkout.session.completed", "data": {"object": session}}
    payload, signature = signed(event, at=int(time.time()) - 600 if how == "stale" else None)
    if how == "forged":
        payload = payload.replace('"evt_2"', '"evt_3"')
    if how == "other secret":
        payload, signature = signed(event, secret="whsec_attacker")
    status, body = post_webhook(commerce_fn, payload, None if how == "unsigned" else signature)
    assert status == 400 and "Stripe-Signature" in body["message"]
    assert quota(accounts, payer) == 0 and CommerceRepository().order(order["trade_no"])["status"] == "pending"


def test_an_order_that_could_not_be_credited_is_never_sent_to_payment(payments_on, payer, accounts, store):
    sessions = len(stripe_sim.SESSIONS)
    for amount, words in ((0, "amount: must be 1"), (10_001, "amount: must be 1")):
        with pytest.raises(GatewayError, match=words):
            start(payer, accounts, amount=amount)
    # A price below Stripe's smallest charge (50 cents) is refused before Stripe is asked.
    OptionsRepository().put_option("StripeUnitPrice", "0.1", by=1, at=0)
    options.forget()
    with pytest.raises(GatewayError, match="below Stripe's smallest"):
        start(payer, accounts, amount=1)
    use_environment(GATEWAY_STRIPE_API_KEY=None, GATEWAY_STRIPE_WEBHOOK_SECRET=None)
    with pytest.raises(GatewayError, match="not configured"):
        start(payer, accounts, amount=5)
    assert len(stripe_sim.SESSIONS) == sessions


def test_an_expired_session_ends_the_order_and_a_late_duplicate_credits_nothing_more(
        payments_on, payer, accounts, commerce_fn):
    order = start(payer, accounts)
    answer = httpx.post(f"{payments_on}/v1/checkout/sessions/{order['session_id']}/expire",
                        headers={"Authorization": "Bearer sk_test_gateway"})
    assert answer.status_code == 200
    assert CommerceRepository().order(order["trade_no"])["status"] == "expired"
    paid = start(payer, accounts)
    pay(payments_on, paid["session_id"])
    # Reordered: an `expired` event for the paid session arrives after its completion.
    session = dict(stripe_sim.SESSIONS[paid["session_id"]], status="expired")
    payload, signature = signed({"id": "evt_4", "type": "checkout.session.expired", "data": {"object": session}})
    assert post_webhook(commerce_fn, payload, signature)[0] == 200
    assert CommerceRepository().order(paid["trade_no"])["status"] == "success"
    assert quota(accounts, payer) == 2_500_000


def test_a_crash_after_the_credit_is_retried_by_stripe_and_credits_once(payments_on, payer, accounts, commerce_fn,
                                                                         monkeypatch):
    """The credit's transaction applied, then the function died before answering: Stripe retries."""
    order = start(payer, accounts)
    real = credits.apply
    calls = Counter()

    def applied_then_died(credit, claims, now=None):
        calls["n"] += 1
        real(credit, claims, now)
        if calls["n"] == 1:
            raise RuntimeError("the function died after the transaction")

    monkeypatch.setattr(credits, "apply", applied_then_died)
    session = dict(stripe_sim.SESSIONS[order["session_id"]], status="complete", payment_status="paid")
    payload, signature = signed({"id": "evt_5", "type": "checkout.session.completed", "data": {"object": session}})
    assert post_webhook(commerce_fn, payload, signature)[0] == 500  # Stripe will retry
    assert post_webhook(commerce_fn, payload, signature)[0] == 200
    assert quota(accounts, payer) == 2_500_000 and calls["n"] == 2


def set_inviter(invitee: int, inviter: int) -> None:
    from gateway.settings import get_settings

    client("dynamodb").update_item(TableName=get_settings().accounts_table,
                                   Key=to_item({"pk": f"USER#{invitee}", "sk": "PROFILE"}),
                                   UpdateExpression="SET inviter_id = :i",
                                   ExpressionAttributeValues=to_values({":i": inviter}))


def test_the_inviter_is_rewarded_at_the_first_payment_only(payments_on, payer, accounts):
    OptionsRepository().put_option("QuotaForInviter", "1000000", by=1, at=0)
    options.forget()
    set_inviter(payer, 1)
    before = accounts.users.raw_user(1, consistent=True)
    for _ in range(2):
        order = start(payer, accounts)
        pay(payments_on, order["session_id"], deliveries=2)
    inviter = accounts.users.raw_user(1, consistent=True)
    assert inviter["aff_quota"] - before["aff_quota"] == 1_000_000
    assert inviter["aff_history_quota"] - before["aff_history_quota"] == 1_000_000
    assert quota(accounts, payer) == 5_000_000
    # The reward moves into quota, never below zero: two transfers of all of it race, one wins.
    outcomes = []

    def move():
        try:
            invitations.transfer(1, 1_000_000)
            outcomes.append("moved")
        except GatewayError:
            outcomes.append("refused")

    threads = [threading.Thread(target=move) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    after = accounts.users.raw_user(1, consistent=True)
    assert sorted(outcomes) == ["moved", "refused", "refused", "refused"]
    assert after["aff_quota"] == before["aff_quota"] and after["quota"] == inviter["quota"] + 1_000_000
    with pytest.raises(GatewayError, match="smallest transfer"):
        invitations.transfer(1, 10)


def test_the_smallest_transfer_is_one_usd_exactly_and_the_invitation_code_is_answered(accounts):
    from gateway.settings import get_settings

    accounts.users.create_user(username="inviter", user_id=41)
    client("dynamodb").update_item(TableName=get_settings().accounts_table,
                                   Key=to_item({"pk": "USER#41", "sk": "PROFILE"}),
                                   UpdateExpression="SET aff_quota = :q",
                                   ExpressionAttributeValues=to_values({":q": 10**6}))
    with pytest.raises(GatewayError, match=r"smallest transfer is \$1.00 \(500,000 units\)"):
        invitations.transfer(41, 499_999)
    # new-api's TransferAffQuotaToQuota: at least one USD of quota
    assert invitations.transfer(41, 500_000) == {"success": True, "message": "", "data": 500_000}
    user = accounts.users.raw_user(41, consistent=True)
    assert (user["aff_quota"], user["quota"]) == (500_000, 500_000)
    assert invitations.aff(user) == {"success": True, "message": "", "data": user["aff_code"]}


@pytest.mark.parametrize("seed", [3, 11])
def test_randomized_webhooks_credit_each_paid_order_once(payments_on, payer, accounts, commerce_fn, seed,
                                                          monkeypatch):
    """Many orders; their events delivered by several threads in a seeded random order, duplicated,
    with `expired` events mixed in and one credit in five applied then crashed (the answer lost): in
    the end each paid order is credited exactly once and nothing else is."""
    rng = random.Random(seed)
    orders = [start(payer, accounts, amount=rng.randint(1, 9)) for _ in range(12)]
    paid = {o["trade_no"] for o in orders if rng.random() < 0.7}
    deliveries = []
    for o in orders:
        session = dict(stripe_sim.SESSIONS[o["session_id"]])
        if o["trade_no"] in paid:
            session.update(status="complete", payment_status="paid")
            deliveries += [("checkout.session.completed", session)] * rng.randint(1, 4)
        else:
            deliveries += [("checkout.session.expired", dict(session, status="expired"))] * rng.randint(1, 2)
    rng.shuffle(deliveries)
    real, lock = credits.apply, threading.Lock()

    def sometimes_crash(credit, claims, now=None):
        real(credit, claims, now)
        with lock:
            crash = rng.random() < 0.2
        if crash:
            raise RuntimeError("died after the transaction")

    monkeypatch.setattr(credits, "apply", sometimes_crash)

    def deliver(batch):
        for kind, session in batch:
            payload, signature = signed({"id": f"evt_{session['id']}", "type": kind, "data": {"object": session}})
            while post_webhook(commerce_fn, payload, signature)[0] != 200:
                pass  # Stripe retries until it gets a 2xx

    threads = [threading.Thread(target=deliver, args=(deliveries[n::4],)) for n in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    expected = sum(o["quota"] for o in orders if o["trade_no"] in paid)
    assert quota(accounts, payer) == expected
    for o in orders:
        assert CommerceRepository().order(o["trade_no"])["status"] == ("success" if o["trade_no"] in paid
                                                                       else "expired")
    from gateway.api import requestlog

    log = requestlog.account_log(payer, {"type": "1", "page_size": "100"})["data"]["items"]
    assert len(log) == len(paid) and sum(e["quota"] for e in log) == expected


def test_deployed_the_keys_come_from_one_secret_and_the_previous_webhook_secret_still_verifies(
        payments_on, payer, accounts, commerce_fn):
    from gateway import signing_keys

    secrets_manager = client("secretsmanager")
    name = f"stripe-keys-{random.randrange(10**9)}"
    secrets_manager.create_secret(Name=name, SecretString=json.dumps(
        {"api_key": "sk_test_gateway", "webhook_secret": "whsec_before"}))
    secrets_manager.put_secret_value(SecretId=name, SecretString=json.dumps(
        {"api_key": "sk_test_gateway", "webhook_secret": SECRET}))  # rotated: whsec_before is AWSPREVIOUS
    use_environment(GATEWAY_STRIPE_API_KEY=None, GATEWAY_STRIPE_WEBHOOK_SECRET=None, GATEWAY_STRIPE_SECRET_ID=name)
    signing_keys.forget()
    try:
        order = start(payer, accounts)
        session = dict(stripe_sim.SESSIONS[order["session_id"]], status="complete", payment_status="paid")
        event = {"id": "evt_6", "type": "checkout.session.completed", "data": {"object": session}}
        payload, signature = signed(event, secret="whsec_before")  # signed just before the rotation
        signing_keys.forget()  # a cold start of the commerce function: it reads the secret itself
        status, body = post_webhook(commerce_fn, payload, signature)
        assert (status, body["handled"]) == (200, True) and quota(accounts, payer) == 2_500_000
    finally:
        use_environment(GATEWAY_STRIPE_SECRET_ID=None)
        signing_keys.forget()


def test_users_see_their_orders_and_operators_everyones_newest_first_page_by_page(payments_on, payer, accounts,
                                                                                    commerce_fn):
    first, second, third = (start(payer, accounts, amount=n) for n in (1, 2, 3))
    pay(payments_on, second["session_id"])

    def page(path, who, p):
        answer = commerce_fn.lambda_handler(api_event("GET", path, headers=who, query={"p": str(p), "page_size": "1"}),
                                            LambdaContext())
        return answer["statusCode"], json.loads(answer["body"])

    ann = {"Authorization": "Bearer ann-access-token", "X-Api-User": str(payer)}
    operator = {"Authorization": "Bearer demo-access-token", "X-Api-User": "1"}
    seen = []
    for p in (1, 2, 3):
        status, body = page("/api/user/topup/self", ann, p)
        assert status == 200 and body["data"]["has_more"] is (p < 3)
        seen += [(o["trade_no"], o["status"]) for o in body["data"]["items"]]
    assert seen == [(third["trade_no"], "pending"), (second["trade_no"], "success"), (first["trade_no"], "pending")]
    everyone = []
    for p in (1, 2, 3):  # the third page starts at the third order, not the second (`(p - 1) * size`)
        status, body = page("/api/user/topup", operator, p)
        assert status == 200 and body["data"]["has_more"] is (p < 3)
        everyone += [o["trade_no"] for o in body["data"]["items"]]
    assert everyone == [third["trade_no"], second["trade_no"], first["trade_no"]]
    assert page("/api/user/topup", ann, 1)[0] == 403  # everyone's orders are the operators' alone


def test_an_order_is_shown_to_its_payer_only(payments_on, payer, accounts):
    from gateway.errors import NotFound

    order = start(payer, accounts)
    assert payments.order_for(payer, order["trade_no"])["data"]["trade_no"] == order["trade_no"]
    for other, trade_no in ((1, order["trade_no"]), (payer, "ord_none")):  # another user's, or none
        with pytest.raises(NotFound, match="no such order of yours"):
            payments.order_for(other, trade_no)


def test_a_top_up_that_would_take_an_account_past_the_largest_quota_is_refused(payments_on, payer, accounts):
    balances.add_user_quota(payer, payments.MAX_QUOTA_UNITS - 1)
    with pytest.raises(GatewayError, match="more quota than one account may"):
        start(payer, accounts)
    assert quota(accounts, payer) == payments.MAX_QUOTA_UNITS - 1  # and nothing changed


def test_a_top_up_asked_through_the_route_names_stripe_and_any_other_method_is_a_400(payments_on, payer, accounts,
                                                                                      commerce_fn):
    """The method as the route reads it from the JSON body (a string parsed from the request, never
    the literal in the code): "stripe" starts a payment, another method is refused naming the field."""
    def pay_route(body):
        headers = {"Authorization": "Bearer ann-access-token", "X-Api-User": str(payer)}
        answer = commerce_fn.lambda_handler(api_event("POST", "/api/user/pay", body=json.dumps(body),
                                                      headers=headers), LambdaContext())
        return answer["statusCode"], json.loads(answer["body"])

    status, body = pay_route({"amount": 5, "payment_method": "stripe"})
    assert status == 200 and body["success"] is True, body
    assert body["data"]["pay_link"].startswith(payments_on) and body["data"]["quota"] == 2_500_000
    assert CommerceRepository().order(body["data"]["trade_no"])["status"] == "pending"
    status, body = pay_route({"amount": 5, "payment_method": "paypal"})
    assert status == 400 and "payment_method" in body["message"], body
    assert len(CommerceRepository().orders_page(user_id=payer, limit=10)[0]) == 1  # the refused one made none


def test_a_session_paid_later_is_not_handled_until_stripe_says_it_succeeded(payments_on, payer, accounts,
                                                                            commerce_fn):
    """A completed Checkout Session whose `payment_status` is `unpaid` (a delayed method such as a bank
    debit; docs.stripe.com/payments/checkout/fulfill-orders: fulfil on `async_payment_succeeded`) is
    acknowledged, not handled, and credits nothing; the later success credits the order."""
    order = start(payer, accounts)
    session = dict(stripe_sim.SESSIONS[order["session_id"]], status="complete", payment_status="unpaid")
    payload, signature = signed({"id": "evt_7", "type": "checkout.session.completed", "data": {"object": session}})
    assert post_webhook(commerce_fn, payload, signature) == (200, {"received": True, "handled": False})
    assert quota(accounts, payer) == 0
    assert CommerceRepository().order(order["trade_no"])["status"] == "pending"
    session["payment_status"] = "paid"
    payload, signature = signed({"id": "evt_8", "type": "checkout.session.async_payment_succeeded",
                                 "data": {"object": session}})
    assert post_webhook(commerce_fn, payload, signature) == (200, {"received": True, "handled": True})
    assert quota(accounts, payer) == 2_500_000


def test_an_event_for_no_order_or_of_another_kind_is_received_and_not_handled(payments_on, payer, accounts,
                                                                               commerce_fn):
    """Stripe sends every event an endpoint subscribes to, and sessions made elsewhere on the same
    account: each is answered 2xx (else Stripe retries it for days) and marked not handled."""
    order = start(payer, accounts)
    stranger = {"id": "cs_test_made_elsewhere", "object": "checkout.session", "status": "complete",
                "payment_status": "paid", "client_reference_id": None, "metadata": {}}
    for kind, session in (("checkout.session.completed", stranger),
                          ("checkout.session.expired", dict(stranger, status="expired")),
                          ("payment_intent.succeeded", dict(stripe_sim.SESSIONS[order["session_id"]]))):
        payload, signature = signed({"id": f"evt_{kind}", "type": kind, "data": {"object": session}})
        assert post_webhook(commerce_fn, payload, signature) == (200, {"received": True, "handled": False}), kind
    assert quota(accounts, payer) == 0
    assert CommerceRepository().order(order["trade_no"])["status"] == "pending"


def test_two_first_payments_racing_pay_the_inviter_once_and_both_credit(payments_on, payer, accounts, commerce_fn,
                                                                        monkeypatch):
    """The payer's two first orders are credited at once: the second's credit lands between the
    first's read of the payer (no reward paid yet) and its transaction. The first's reward then
    meets the profile's condition, and it is credited without the reward: one reward, both payments."""
    OptionsRepository().put_option("QuotaForInviter", "1000000", by=1, at=0)
    options.forget()
    set_inviter(payer, 1)
    before = accounts.users.raw_user(1, consistent=True)
    first, second = start(payer, accounts), start(payer, accounts, amount=3)
    real, raced = credits.apply, []

    def other_payment_first(credit, claims, now=None):
        if credit.credit_id == f"order-{first['trade_no']}" and not raced:
            raced.append(credit.detail.get("inviter_reward"))
            assert payments.credit_order(CommerceRepository().order(second["trade_no"]), accounts.users) is True
        return real(credit, claims, now)

    monkeypatch.setattr(credits, "apply", other_payment_first)
    session = dict(stripe_sim.SESSIONS[first["session_id"]], status="complete", payment_status="paid")
    payload, signature = signed({"id": "evt_9", "type": "checkout.session.completed", "data": {"object": session}})
    assert post_webhook(commerce_fn, payload, signature) == (200, {"received": True, "handled": True})
    assert raced == [1_000_000]  # the first credit did try to pay the reward
    inviter = accounts.users.raw_user(1, consistent=True)
    assert inviter["aff_quota"] - before["aff_quota"] == 1_000_000
    assert quota(accounts, payer) == (5 + 3) * 500_000
    assert {CommerceRepository().order(o["trade_no"])["status"] for o in (first, second)} == {"success"}


# --- orders limited before Stripe is called (issue 43) ---------------------------------------------------

def pay_route(commerce_fn, user_id, token, ip, amount=5):
    event = api_event("POST", "/api/user/pay", body=json.dumps({"amount": amount, "payment_method": "stripe"}),
                      headers={"Authorization": f"Bearer {token}", "X-Api-User": str(user_id)})
    event["requestContext"]["identity"]["sourceIp"] = ip
    answer = commerce_fn.lambda_handler(event, LambdaContext())
    return answer["statusCode"], json.loads(answer["body"]), answer.get("multiValueHeaders") or {}


def test_orders_are_limited_per_user_and_per_address_before_stripe_is_called(payments_on, payer, accounts,
                                                                             commerce_fn):
    OptionsRepository().put_option("TopUpRateLimitNum", "3", by=1, at=0)
    options.forget()
    sessions = len(stripe_sim.SESSIONS)
    answers = [pay_route(commerce_fn, payer, "ann-access-token", "198.51.100.20", amount=10_000) for _ in range(5)]
    assert [a[0] for a in answers] == [200, 200, 200, 429, 429], [a[1] for a in answers]
    assert int(answers[3][2]["Retry-After"][0]) >= 1 and "top-up orders" in answers[3][1]["message"]
    # The same user from another address: still its own limit. Another user from the first address: its limit.
    assert pay_route(commerce_fn, payer, "ann-access-token", "203.0.113.20")[0] == 429
    assert pay_route(commerce_fn, 1, "demo-access-token", "198.51.100.20")[0] == 429
    assert pay_route(commerce_fn, 1, "demo-access-token", "203.0.113.21")[0] == 200
    assert len(stripe_sim.SESSIONS) == sessions + 4  # nothing refused ever reached Stripe
    assert len(CommerceRepository().orders_page(user_id=payer, limit=10)[0]) == 3


# --- refunds and disputes (issue 43) --------------------------------------------------------------------

def paid_order(payments_on, payer, accounts, amount=5):
    order = start(payer, accounts, amount=amount)
    pay(payments_on, order["session_id"])
    return order, stripe_sim.SESSIONS[order["session_id"]]["payment_intent"]


def stripe_post(payments_on, path, **form):
    answer = httpx.post(f"{payments_on}{path}", data=form, headers={"Authorization": "Bearer sk_test_gateway"},
                        timeout=60)
    assert answer.status_code == 200, answer.text
    return answer.json()


def owed(accounts, user_id):
    return int(accounts.users.raw_user(user_id, consistent=True).get("owed_quota") or 0)


def spend(accounts, user_id, units):
    """What requests would have spent (the profile's quota to used_quota)."""
    from gateway.settings import get_settings
    from gateway.store.table import PROFILE, user_pk

    client("dynamodb").update_item(
        TableName=get_settings().accounts_table, Key=to_item({"pk": user_pk(user_id), "sk": PROFILE}),
        UpdateExpression="ADD quota :minus, used_quota :units", ExpressionAttributeValues=to_values(
            {":minus": -units, ":units": units}))


def test_a_refund_takes_back_what_it_refunds_once(payments_on, payer, accounts, commerce_fn):
    order, intent = paid_order(payments_on, payer, accounts, amount=5)
    assert quota(accounts, payer) == 2_500_000
    stripe_post(payments_on, "/v1/refunds", payment_intent=intent, amount="200")  # 2 of 5 USD
    assert quota(accounts, payer) == 1_500_000
    refunded = dict(stripe_sim.CHARGES[intent])
    payload, signature = signed({"id": "evt_r", "type": "charge.refunded", "data": {"object": refunded}})
    recorded = CommerceRepository().order(order["trade_no"])
    for _ in range(3):  # Stripe delivers it again: nothing more, not even a write of the order
        assert post_webhook(commerce_fn, payload, signature)[0] == 200
    assert CommerceRepository().order(order["trade_no"]) == recorded
    stripe_post(payments_on, "/v1/refunds", payment_intent=intent)  # the rest
    assert quota(accounts, payer) == 0 and owed(accounts, payer) == 0
    # The earlier, smaller refund delivered late changes nothing.
    assert post_webhook(commerce_fn, payload, signature)[0] == 200
    assert quota(accounts, payer) == 0
    from gateway.api import requestlog

    log = requestlog.account_log(payer, {"type": "1"})["data"]["items"]
    assert sorted((e["quota"], e["content"]) for e in log) == [
        (-1_500_000, "stripe refund: $3.00 (1,500,000 units) taken back"),
        (-1_000_000, "stripe refund: $2.00 (1,000,000 units) taken back"),
        (2_500_000, "stripe: $5.00 (2,500,000 units) added")]
    assert CommerceRepository().order(order["trade_no"])["taken_units"] == 2_500_000


def test_a_refund_of_what_was_spent_is_owed_and_holds_the_account_at_zero_until_repaid(
        payments_on, payer, accounts, commerce_fn):
    from gateway.settings import get_settings
    from gateway.store.aws import transact
    from gateway.store.holds import quota_debit

    paid_order(payments_on, payer, accounts, amount=5)
    spend(accounts, payer, 2_000_000)
    _, intent = paid_order(payments_on, payer, accounts, amount=1)  # 0.5 + 0.5 M left
    first = [i for i, c in stripe_sim.CHARGES.items() if c["amount"] == 500][-1]
    stripe_post(payments_on, "/v1/refunds", payment_intent=first)  # the first payment, all of it
    assert quota(accounts, payer) == 0 and owed(accounts, payer) == 1_500_000
    accounts.users.add_quota(payer, 10)  # an operator's gift does not open the account while it owes
    with pytest.raises(Exception, match="ConditionalCheckFailed"):
        transact(client("dynamodb"), [quota_debit(get_settings().accounts_table, payer, 1)])
    # The next credit repays the debt first.
    paid_order(payments_on, payer, accounts, amount=5)
    assert owed(accounts, payer) == 0 and quota(accounts, payer) == 2_500_000 - 1_500_000 + 10


def test_what_is_owed_is_shown_to_the_user_and_the_operator(payments_on, payer, accounts, account_fn,
                                                            lambda_context):
    def read(path, token, user_id):
        answer = account_fn.lambda_handler(api_event("GET", path, headers={
            "Authorization": token, "X-Api-User": str(user_id)}), lambda_context)
        return json.loads(answer["body"])["data"]

    me = read("/api/user/self", "ann-access-token", payer)
    assert me["owed_quota"] == 0 and list(me).index("owed_quota") == list(me).index("quota") + 1
    _, intent = paid_order(payments_on, payer, accounts, amount=2)
    spend(accounts, payer, 600_000)
    stripe_post(payments_on, "/v1/refunds", payment_intent=intent)  # 1 M taken back, 0.4 M held: 0.6 M owed
    me = read("/api/user/self", "ann-access-token", payer)
    assert (me["quota"], me["owed_quota"]) == (0, 600_000)
    users = read("/api/admin/users", "Bearer demo-access-token", 1)["items"]
    assert [(u["quota"], u["owed_quota"]) for u in users if u["id"] == payer] == [(0, 600_000)]
    assert {u["owed_quota"] for u in users if u["id"] != payer} == {0}


def test_a_credit_landing_while_a_refund_takes_more_than_the_quota_is_never_left_beside_the_debt(
        payments_on, payer, accounts):
    """The refund reads 0.5 M of quota for 2.5 M to take back; a code's credit of 1 M lands before its
    write: the refund reads again and takes all 1.5 M, owing 1 M, not 0.5 M beside a debt of 2 M."""
    order, _ = paid_order(payments_on, payer, accounts, amount=5)
    spend(accounts, payer, 2_000_000)

    class CreditLands:
        landed = False

        def raw_user(self, user_id, consistent=False):
            profile = accounts.users.raw_user(user_id, consistent=consistent)
            if not self.landed:
                self.landed = True
                credits.apply(credits.Credit(credit_id="code-between", user_id=user_id, units=1_000_000,
                                             route="redemption"), [])
            return profile

    assert reversals.apply(order["trade_no"], refunded_cents=500, accounts=CreditLands()) == 2_500_000
    assert (quota(accounts, payer), owed(accounts, payer)) == (0, 1_000_000)


def test_a_dispute_freezes_the_credit_until_it_closes(payments_on, payer, accounts, commerce_fn):
    _, won = paid_order(payments_on, payer, accounts, amount=2)
    _, lost = paid_order(payments_on, payer, accounts, amount=3)
    assert quota(accounts, payer) == 2_500_000
    first = stripe_post(payments_on, "/test/disputes", payment_intent=won)
    second = stripe_post(payments_on, "/test/disputes", payment_intent=lost)
    assert quota(accounts, payer) == 0
    stripe_post(payments_on, f"/test/disputes/{first['id']}/close", status="won")
    stripe_post(payments_on, f"/test/disputes/{second['id']}/close", status="lost")
    assert quota(accounts, payer) == 1_000_000 and owed(accounts, payer) == 0
    # A late `created` of a closed dispute never freezes it again.
    created = dict(stripe_sim.DISPUTES[first["id"]], status="needs_response")
    payload, signature = signed({"id": "evt_d", "type": "charge.dispute.created", "data": {"object": created}})
    assert post_webhook(commerce_fn, payload, signature)[0] == 200
    assert quota(accounts, payer) == 1_000_000
    from gateway.api import requestlog

    log = requestlog.account_log(payer, {"type": "1"})["data"]["items"]
    assert sorted(e["content"] for e in log if e["quota"] < 0) == [
        "stripe dispute: $2.00 (1,000,000 units) taken back", "stripe dispute: $3.00 (1,500,000 units) taken back"]
    assert sorted(e["content"] for e in log if e["quota"] > 0 and "dispute" in e["content"]) == [
        "stripe dispute: $2.00 (1,000,000 units) added"]


def test_a_dispute_won_while_the_account_owes_repays_the_debt_first(payments_on, payer, accounts, commerce_fn):
    _, disputed = paid_order(payments_on, payer, accounts, amount=5)
    spend(accounts, payer, 2_500_000)  # all of it spent
    dispute = stripe_post(payments_on, "/test/disputes", payment_intent=disputed)
    assert quota(accounts, payer) == 0 and owed(accounts, payer) == 2_500_000
    paid_order(payments_on, payer, accounts, amount=1)  # repays 0.5 M of the debt
    assert quota(accounts, payer) == 0 and owed(accounts, payer) == 2_000_000
    stripe_post(payments_on, f"/test/disputes/{dispute['id']}/close", status="won")
    assert owed(accounts, payer) == 0 and quota(accounts, payer) == 500_000


def test_a_reversal_before_its_payment_is_credited_is_refused_until_it_is(payments_on, payer, accounts,
                                                                          commerce_fn):
    order = start(payer, accounts, amount=5)
    session = dict(stripe_sim.SESSIONS[order["session_id"]], status="complete", payment_status="paid",
                   payment_intent="pi_early")
    charge = {"id": "ch_early", "object": "charge", "payment_intent": "pi_early", "amount": 500,
              "amount_refunded": 500}
    refund = signed({"id": "evt_early_refund", "type": "charge.refunded", "data": {"object": charge}})
    status, body = post_webhook(commerce_fn, *refund)
    assert status == 409 and "payment_intent" in body["message"]  # Stripe delivers it again later
    assert post_webhook(commerce_fn, *signed({"id": "evt_paid", "type": "checkout.session.completed",
                                              "data": {"object": session}}))[0] == 200
    assert post_webhook(commerce_fn, *refund)[0] == 200
    assert quota(accounts, payer) == 0


def ledger_entries(user_id: int, credit_id: str) -> list[int]:
    """The units of each log entry stored under one credit's id (a credit or a reversal)."""
    from gateway.store.table import AccountsTable
    from gateway.store.usage import ledger_pk

    table = AccountsTable()
    items = table._query_all({"TableName": table.table, "KeyConditionExpression": "pk = :pk",
                              "ExpressionAttributeValues": {":pk": {"S": ledger_pk(user_id, credit_id)}},
                              "ConsistentRead": True})
    return [int(item["credited_units"]) for item in items if item.get("request_id") == credit_id]


def order_events(rng, o, takes_back):
    """One paid order's Stripe events, each repeated as Stripe may deliver it: its credit, then its
    refunds (cumulative) and dispute; and its net credit. `takes_back`: it refunds something."""
    intent = f"pi_{o['trade_no']}"
    session = dict(stripe_sim.SESSIONS[o["session_id"]], status="complete", payment_status="paid",
                   payment_intent=intent)
    credit = [("checkout.session.completed", session)] * rng.randint(1, 3)
    reversing = []
    cents = int(o["money"] * 100)
    refunded = 0
    for _ in range(rng.choice([1, 2, 3] if takes_back else [0, 0, 1, 2, 3])):
        refunded = rng.randint(max(refunded, 1 if takes_back else 0), cents)
        charge = {"id": f"ch_{o['trade_no']}", "object": "charge", "payment_intent": intent, "amount": cents,
                  "amount_refunded": refunded}
        reversing += [("charge.refunded", charge)] * rng.randint(1, 3)
    dispute = ""
    if rng.random() < 0.4:
        dispute = rng.choice(["open", "won", "lost"])
        opened = {"id": f"dp_{o['trade_no']}", "object": "dispute", "payment_intent": intent, "amount": cents,
                  "status": "needs_response"}
        reversing += [("charge.dispute.created", opened)] * rng.randint(1, 2)
        if dispute != "open":
            reversing += [("charge.dispute.closed", dict(opened, status=dispute))] * rng.randint(1, 2)
    net = o["quota"] - reversals.units_taken({"units": o["quota"], "money_cents": cents}, refunded, dispute)
    return credit, reversing, net


def crashing(real, rng, lock):
    """`real`, applied then crashed one time in five (the answer lost: Stripe delivers it again)."""
    def sometimes_crash(*args, **kwargs):
        answer = real(*args, **kwargs)
        with lock:
            crash = rng.random() < 0.2
        if crash:
            raise RuntimeError("died after the transaction")
        return answer
    return sometimes_crash


@pytest.mark.parametrize("seed", [5, 17])
def test_randomized_credits_refunds_disputes_and_spending_leave_each_orders_net_credit_exact(
        payments_on, payer, accounts, commerce_fn, seed, monkeypatch):
    """Orders paid, partly or wholly refunded (several refunds each), disputed (won, lost or still
    open); every event delivered one to three times, shuffled over four threads (instances), a credit
    and a reversal in five applied then crashed (the answer lost: Stripe delivers it again), a
    reversal refused until its payment is credited and delivered again later, as Stripe does, while
    a fifth thread spends the quota as requests' holds do. Then the account is spent to zero and the
    held-back reversals of three orders arrive the same way: what they take was spent, so it is owed.
    Each order ends with exactly its net credit and one log entry per effect; the quota is never seen
    negative nor beside a debt; the account holds the net credits less what was spent, as quota
    when that is positive and as owed quota when it is not."""
    from gateway.settings import get_settings
    from gateway.store.aws import transact
    from gateway.store.holds import quota_debit

    rng = random.Random(seed)
    orders = [start(payer, accounts, amount=rng.randint(1, 9)) for _ in range(10)]
    early, late = [], []  # late: the reversals of the first three orders, after the account is spent
    for n, o in enumerate(orders):
        credit, reversing, o["net"] = order_events(rng, o, takes_back=n < 3)
        early += credit
        (late if n < 3 else early).extend(reversing)
    rng.shuffle(early)
    rng.shuffle(late)
    lock = threading.Lock()

    monkeypatch.setattr(credits, "apply", crashing(credits.apply, rng, lock))
    monkeypatch.setattr(reversals, "apply", crashing(reversals.apply, rng, lock))
    seen = []  # (quota, owed) after every step of every thread

    def look():
        profile = accounts.users.raw_user(payer, consistent=True)
        with lock:
            seen.append((int(profile["quota"]), int(profile.get("owed_quota") or 0)))

    def deliver(batch):
        pending = list(batch)
        while pending:
            kind, thing = pending.pop(0)
            payload, signature = signed({"id": f"evt_{kind}_{thing['id']}", "type": kind, "data": {"object": thing}})
            if post_webhook(commerce_fn, payload, signature)[0] != 200:
                pending.append((kind, thing))  # Stripe delivers it again later
                time.sleep(0.01)
            look()

    spent = [0]
    table = get_settings().accounts_table

    def spend_units(units):
        try:
            transact(client("dynamodb"), [quota_debit(table, payer, units)])
        except Exception as exc:
            assert "ConditionalCheckFailed" in str(exc), exc  # not enough, or owed: refused
        else:
            spent[0] += units
        look()

    def spender(amounts):
        for units in amounts:
            spend_units(units)
            time.sleep(0.005)  # between requests: the deliveries go on meanwhile

    def run(batch, amounts=()):
        threads = [threading.Thread(target=deliver, args=(batch[n::4],)) for n in range(4)]
        threads += [threading.Thread(target=spender, args=(amounts,))] if amounts else []
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()

    run(early, [rng.randint(50_000, 2_000_000) for _ in range(20)])
    left = quota(accounts, payer)
    if left:
        spend_units(left)  # every unit spent before the late reversals arrive
    assert quota(accounts, payer) == 0
    run(late)

    assert [s for s in seen if s[0] < 0 or (s[1] and s[0])] == []  # never negative, never quota beside a debt
    for o in orders:
        saved = CommerceRepository().order(o["trade_no"])
        assert saved["status"] == "success"
        assert o["quota"] - int(saved.get("taken_units") or 0) == o["net"], (o, saved)
        # Each effect once: one entry for the credit, at most one per reversal, summing to the net.
        assert ledger_entries(payer, f"order-{o['trade_no']}") == [o["quota"]]
        reversed_ = [ledger_entries(payer, f"order-{o['trade_no']}-reversal-{v}")
                     for v in range(1, int(saved.get("reversal_version") or 0) + 1)]
        assert all(len(entries) <= 1 for entries in reversed_), reversed_
        assert o["quota"] + sum(sum(entries) for entries in reversed_) == o["net"]
    balance = sum(o["net"] for o in orders) - spent[0]
    assert balance < 0  # the late reversals took back what was spent
    assert (quota(accounts, payer), owed(accounts, payer)) == (max(balance, 0), max(-balance, 0))
    from gateway.api import requestlog

    log = requestlog.account_log(payer, {"type": "1", "page_size": "100"})["data"]["items"]
    assert sum(e["quota"] for e in log) == sum(o["net"] for o in orders)


def cancel_route(commerce_fn, user_id, trade_no):
    headers = {"Authorization": "Bearer ann-access-token", "X-Api-User": str(user_id)}
    answer = commerce_fn.lambda_handler(api_event("POST", "/api/user/pay/cancel", body=json.dumps(
        {"trade_no": trade_no}), headers=headers), LambdaContext())
    return answer["statusCode"], json.loads(answer["body"])


def test_a_pending_order_shows_its_checkout_expiry_and_link_and_its_payer_cancels_it_once(
        payments_on, payer, accounts, commerce_fn):
    order = start(payer, accounts)
    (listed,) = payments.own_orders(payer, None)["data"]["items"]
    session = stripe_sim.SESSIONS[order["session_id"]]
    assert (listed["status"], listed["pay_link"], listed["expires_at"]) == (
        "pending", order["pay_link"], session["expires_at"])  # resumed at the same page while it is open

    status, body = cancel_route(commerce_fn, payer, order["trade_no"])
    assert status == 200 and body["data"]["status"] == "cancelled" and body["data"]["pay_link"] == "", body
    assert session["status"] == "expired"  # expired at Stripe: nobody can pay it any more
    assert [e["type"] for e in stripe_sim.DELIVERED] == ["checkout.session.expired"]
    assert cancel_route(commerce_fn, payer, order["trade_no"]) == (status, body)  # once: the same answer again
    # A paid event for it afterwards (Stripe sends none; forged order of events here) credits nothing.
    paid = dict(session, status="complete", payment_status="paid", payment_intent="pi_late")
    payload, signature = signed({"id": "evt_late", "type": "checkout.session.completed", "data": {"object": paid}})
    assert post_webhook(commerce_fn, payload, signature)[0] == 200
    pay(payments_on, order["session_id"])  # the page of an expired session takes no payment
    assert CommerceRepository().order(order["trade_no"])["status"] == "cancelled"
    assert quota(accounts, payer) == 0

    # Only the payer's pending orders: another's is a 404, a paid one a 409 that changes nothing.
    assert cancel_route(commerce_fn, payer + 1000, order["trade_no"])[0] in (401, 404)
    done = start(payer, accounts)
    pay(payments_on, done["session_id"])
    status, body = cancel_route(commerce_fn, payer, done["trade_no"])
    assert status == 409 and "was paid" in body["message"], body
    assert CommerceRepository().order(done["trade_no"])["status"] == "success"
    assert quota(accounts, payer) == 2_500_000


def test_a_cancel_racing_the_payment_either_cancels_or_credits_once_never_both(
        payments_on, payer, accounts, commerce_fn):
    """The payer pays on Stripe's page in one tab and cancels in another at the same moment."""
    expected = 0
    for _ in range(6):
        order = start(payer, accounts)
        answers: dict[str, int] = {}
        def cancel(trade_no=order["trade_no"], answers=answers):
            answers["cancel"] = cancel_route(commerce_fn, payer, trade_no)[0]

        threads = [threading.Thread(target=pay, args=(payments_on, order["session_id"])),
                   threading.Thread(target=cancel)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        ended = CommerceRepository().order(order["trade_no"])["status"]
        session = stripe_sim.SESSIONS[order["session_id"]]
        if session["status"] == "complete":  # paid first: credited once, the cancel refused
            assert (ended, answers["cancel"]) == ("success", 409)
            expected += 2_500_000
        else:
            assert (session["status"], ended, answers["cancel"]) == ("expired", "cancelled", 200)
        assert quota(accounts, payer) == expected
    credited = [e for e in stripe_sim.DELIVERED if e["type"] == "checkout.session.completed"]
    assert quota(accounts, payer) == 2_500_000 * len(credited)


def test_a_top_up_answers_its_price_to_the_cent(payments_on, payer, accounts):
    """`money` is what Stripe charges, in dollars and cents (a unit price of 7.33 USD: 7.33)."""
    OptionsRepository().put_option("StripeUnitPrice", "7.33", by=1, at=0)
    options.forget()
    order = start(payer, accounts, amount=1)
    assert (order["money"], order["quota"]) == (7.33, 500_000)
    assert stripe_sim.SESSIONS[order["session_id"]]["amount_total"] == 733


@pytest.mark.parametrize(("status", "payment_status", "answer", "ended"), [
    # Stripe expired the session (its 24 hours) and its event has not arrived yet: the cancel goes on
    ("expired", "unpaid", 200, "cancelled"),
    # paid by a delayed method (a bank debit): complete, not yet paid (docs.stripe.com/payments/checkout/
    # how-checkout-works: `checkout.session.async_payment_succeeded` follows): it cannot be cancelled now
    ("complete", "unpaid", 409, "pending"),
])
def test_a_cancel_stripe_cannot_expire_asks_stripe_what_became_of_the_session(
        payments_on, payer, accounts, commerce_fn, status, payment_status, answer, ended):
    order = start(payer, accounts)
    stripe_sim.SESSIONS[order["session_id"]].update(status=status, payment_status=payment_status)
    code, body = cancel_route(commerce_fn, payer, order["trade_no"])
    assert code == answer, body
    if answer == 409:
        assert "being processed" in body["message"], body
    assert CommerceRepository().order(order["trade_no"])["status"] == ended and quota(accounts, payer) == 0


def test_stripe_answering_500_is_asked_three_times_then_the_order_ends_unpaid(payments_on, payer, accounts):
    """The stripe library's retries (`max_network_retries=2`: docs.stripe.com/error-low-level#idempotency,
    a 500 is retried under the same idempotency key), then a 502 naming the provider; the order ends
    expired, shown with no expiry and no link, and nothing is credited."""
    asked: list[str] = []

    async def down(scope, receive, send):
        while (await receive()).get("more_body"):
            pass
        asked.append(dict(scope["headers"]).get(b"idempotency-key", b"").decode())
        await send({"type": "http.response.start", "status": 500, "headers": [
            (b"content-type", b"application/json"), (b"stripe-should-retry", b"true")]})
        await send({"type": "http.response.body", "body": json.dumps(
            {"error": {"type": "api_error", "message": "An unknown error occurred"}}).encode()})

    with serve_asgi(down) as url:
        use_environment(GATEWAY_STRIPE_API_BASE=url)
        with pytest.raises(GatewayError, match="could not start the payment") as refused:
            start(payer, accounts)
    assert refused.value.status == 502 and refused.value.code == "payment_unavailable"
    assert len(asked) == 3 and len(set(asked)) == 1  # one order, one idempotency key, asked three times
    (order,) = payments.own_orders(payer, None)["data"]["items"]
    assert (order["status"], order["expires_at"], order["pay_link"]) == ("expired", 0, "")
    assert quota(accounts, payer) == 0


def test_a_refund_meeting_another_between_its_read_and_its_write_reads_again_and_takes_back_once(
        payments_on, payer, accounts, monkeypatch):
    """Another delivery (an earlier, smaller refund) lands after this one read the order: the
    transaction is refused on the order's version, and this refund reads again and takes back
    what is left to take, in the same delivery (a 200 to Stripe, not a failure to deliver again)."""
    from gateway.admission import transactions

    order, _ = paid_order(payments_on, payer, accounts, amount=5)
    real = transactions.transact
    asked: list[int] = []

    def another_meanwhile(writes, *args, **kwargs):
        asked.append(len(writes))
        if len(asked) == 1:
            assert reversals.apply(order["trade_no"], refunded_cents=100) == 500_000
        return real(writes, *args, **kwargs)

    monkeypatch.setattr(transactions, "transact", another_meanwhile)
    assert reversals.apply(order["trade_no"], refunded_cents=200) == 500_000
    assert asked == [3, 3, 3]  # this one refused, the other written, this one again
    assert quota(accounts, payer) == 2_500_000 - 1_000_000 and owed(accounts, payer) == 0
    assert CommerceRepository().order(order["trade_no"])["taken_units"] == 1_000_000


def test_the_smallest_reward_one_unit_is_paid_at_a_first_payment_read_past_a_stale_replica(
        payments_on, payer, accounts, stale_replica):
    """The payer's inviter is read from the profile as written (never a replica that has not caught
    up with the sign-up), and a reward of 1 unit is a reward."""
    OptionsRepository().put_option("QuotaForInviter", "1", by=1, at=0)
    options.forget()
    set_inviter(payer, 1)
    before = accounts.users.raw_user(1, consistent=True)
    stale_replica("PROFILE")
    order = start(payer, accounts)
    pay(payments_on, order["session_id"])
    inviter = accounts.users.raw_user(1, consistent=True)
    assert (inviter["aff_quota"] - before["aff_quota"], inviter["aff_history_quota"] - before["aff_history_quota"]) \
        == (1, 1)
    assert quota(accounts, payer) == 2_500_000


def test_a_paid_event_for_an_order_that_ended_unpaid_credits_nothing_and_warns_the_operator(
        payments_on, payer, accounts, commerce_fn, monkeypatch):
    warned: list[tuple[str, dict]] = []
    monkeypatch.setattr(payments.logger, "warning", lambda message, extra=None: warned.append((message, extra)))
    order = start(payer, accounts)
    answer = httpx.post(f"{payments_on}/v1/checkout/sessions/{order['session_id']}/expire",
                        headers={"Authorization": "Bearer sk_test_gateway"})
    assert answer.status_code == 200
    paid = dict(stripe_sim.SESSIONS[order["session_id"]], status="complete", payment_status="paid",
                payment_intent="pi_after_expiry")
    payload, signature = signed({"id": "evt_ended", "type": "checkout.session.completed", "data": {"object": paid}})
    assert post_webhook(commerce_fn, payload, signature) == (200, {"received": True, "handled": True})
    assert quota(accounts, payer) == 0
    assert warned == [("stripe paid event for an ended order", {"trade_no": order["trade_no"], "status": "expired"})]
    # a redelivery of a credited order's event is no warning: it was credited before
    warned.clear()
    credited = start(payer, accounts)
    pay(payments_on, credited["session_id"], deliveries=2)
    assert warned == [] and quota(accounts, payer) == 2_500_000


def test_a_payer_whose_inviter_is_gone_is_credited_without_the_reward(payments_on, payer, accounts):
    OptionsRepository().put_option("QuotaForInviter", "1000000", by=1, at=0)
    options.forget()
    set_inviter(payer, 999)  # an inviter deleted since (no profile)
    order = start(payer, accounts)
    pay(payments_on, order["session_id"])
    assert quota(accounts, payer) == 2_500_000 and CommerceRepository().order(order["trade_no"])["status"] == "success"
    assert accounts.users.raw_user(999, consistent=True) is None


def test_only_a_pending_order_shows_its_payment_link(payments_on, payer, accounts):
    pending, paid = start(payer, accounts), start(payer, accounts)
    pay(payments_on, paid["session_id"])
    links = {o["trade_no"]: (o["status"], o["pay_link"]) for o in payments.own_orders(payer, None)["data"]["items"]}
    assert links == {pending["trade_no"]: ("pending", pending["pay_link"]), paid["trade_no"]: ("success", "")}
