"""Online top-up through Stripe Checkout (new-api's `POST /api/user/pay`), credited exactly once by
Stripe's signed webhook, and the invitation reward of a first payment.

1. `start` (`POST /api/user/pay {amount, payment_method: "stripe"}`, amount in USD of quota): the
   order is checked first (payments configured, the amount within the operator's bounds, the user
   enabled, the credit within what one account may hold), so an order that could not be credited
   is never sent to payment. Its price (amount x `StripeUnitPrice`) and the units it will credit
   (amount x 500000 x the user's `topup_ratio`) are fixed then and written with the order
   (`pending`); then a Checkout Session is created through the `stripe` library, naming the order
   in `client_reference_id` and `metadata`, and its id (`cs_...`) is written beside the order. The
   answer carries Stripe's link (`pay_link`), whose path names the session, as Stripe's do.
2. `webhook` (`POST /api/stripe/webhook`): the event is trusted once its `Stripe-Signature`
   verifies (Stripe's scheme, by `stripe.WebhookSignature.verify_header`, five minutes' tolerance); a
   forged, stale or unsigned event is a 400 and changes nothing. `checkout.session.completed` (paid)
   or `checkout.session.async_payment_succeeded` finds the order its signed `client_reference_id`
   names (if the order's session is this one, or not written yet) and credits it through
   `credits.apply`: the order marked `success` while `pending`, the quota, the log entry, in one
   transaction. The units are the order's, never an amount the event names. Stripe retries and
   may deliver an event several times and out of order: a second delivery meets the order's
   condition and credits nothing; `checkout.session.expired` marks a pending order `expired`.
3. `cancel` (`POST /api/user/pay/cancel {trade_no}`): the payer leaves an order unpaid. Its
   Checkout Session is expired through Stripe's API first (`/v1/checkout/sessions/{id}/expire`,
   which Stripe grants only while the session is `open`: after it nobody can pay it), and only
   then is the order marked `cancelled`, once, on the condition that it is still pending. Were the
   order marked first, a payment made a moment before the expiry would find it not pending and
   never be credited. Stripe refusing because the session was paid meanwhile credits the order
   now (the same exactly-once claim as the webhook's) and answers a 409 saying so. The
   `checkout.session.expired` event the expiry sends may come before the mark: an order whose
   payer asked to cancel (`cancel_asked_at`) ends `cancelled` by it, else `expired`. A paid event
   after either never credits: crediting is conditioned on the order being pending.
   A pending order also carries its session's link (`pay_link`, to pay again while it is open)
   and Stripe's `expires_at` (24 hours after it was made, Stripe's default).
4. The invitation reward (`QuotaForInviter`) is paid in the same transaction as the invitee's
   first credited payment, into the inviter's `aff_quota` and `aff_history_quota`, on the
   condition that the invitee's profile has not paid a reward yet (`inviter_rewarded_at`): once per
   invitee, whatever races. Every credited payment sets `has_payment_method`.

Secrets: deployed, one Secrets Manager secret (`GATEWAY_STRIPE_SECRET_ID`) holding
`{"api_key": "sk_...", "webhook_secret": "whsec_..."}`, read at cold start and every five minutes
(`signing_keys`); the value before its last rotation still verifies webhooks. Locally
`GATEWAY_STRIPE_API_KEY` and `GATEWAY_STRIPE_WEBHOOK_SECRET` (the local runner sets both, and
`GATEWAY_STRIPE_API_BASE` to its Stripe simulator).
"""

from __future__ import annotations

import json
import secrets
import time
from collections.abc import Mapping
from dataclasses import dataclass
from decimal import ROUND_HALF_UP, Decimal
from typing import Any

from gateway import options, signing_keys
from gateway.commerce import credits, reversals, signup
from gateway.commerce.store import CommerceRepository, order_key, payment_key
from gateway.errors import Conflict, GatewayError, InvalidRequest, NotFound, Unavailable
from gateway.observability import logger
from gateway.prices import UNITS_PER_USD
from gateway.schemas.account import MAX_QUOTA_UNITS
from gateway.settings import get_settings
from gateway.store.aws import to_item, to_values
from gateway.store.table import PROFILE, user_pk
from gateway.store.users import UsersRepository

PENDING, SUCCESS, EXPIRED, CANCELLED = "pending", "success", "expired", "cancelled"
#: The most one order may buy (USD of quota): a bound on a typo, not a business rule.
MAX_TOPUP_USD = 10_000
#: Stripe's smallest charge in USD is 0.50 (docs.stripe.com/currencies#minimum-and-maximum-charge-amounts).
MIN_CHARGE_CENTS = 50
STRIPE_TOLERANCE_SECONDS = 300  # Stripe's default: a signature older than five minutes is refused
_PAID_EVENTS = ("checkout.session.completed", "checkout.session.async_payment_succeeded")
_ENDED_EVENTS = ("checkout.session.expired", "checkout.session.async_payment_failed")
_REVERSAL_EVENTS = ("charge.refunded", "charge.dispute.created", "charge.dispute.closed")


@dataclass(frozen=True)
class StripeKeys:
    api_key: str
    webhook_secrets: tuple[str, ...]  # the one in use first, then the one before its last rotation


def keys() -> StripeKeys | None:
    """The Stripe keys, or None when payments are not configured."""
    settings = get_settings()
    if settings.stripe_api_key or settings.stripe_webhook_secret:
        return StripeKeys(settings.stripe_api_key, (settings.stripe_webhook_secret,))
    values = signing_keys.versions(signing_keys.STRIPE)
    if not values:
        return None
    parsed = [json.loads(value) for value in values]
    return StripeKeys(str(parsed[0].get("api_key") or ""),
                      tuple(str(p.get("webhook_secret") or "") for p in parsed if p.get("webhook_secret")))


def _client(api_key: str):
    import stripe

    base = get_settings().stripe_api_base
    return stripe.StripeClient(api_key, base_addresses={"api": base} if base else None,
                               http_client=stripe.HTTPXClient(allow_sync_methods=True), max_network_retries=2)


def _cents(amount_usd: int, unit_price: float) -> int:
    return int((Decimal(amount_usd) * Decimal(str(unit_price)) * 100).quantize(Decimal(1), ROUND_HALF_UP))


def start(user_id: int, user: Mapping[str, Any], amount: int, payment_method: str, *, return_url: str,
          address: str = "", repo: CommerceRepository | None = None, now: int | None = None) -> dict[str, Any]:
    """POST /api/user/pay: an order and its Checkout Session; `data.pay_link` is Stripe's link.
    Orders are counted per user and per address first (`TopUpRateLimitNum` per
    `TopUpRateLimitDurationSeconds`; past it a 429 with Retry-After), before anything is stored or sent."""
    repo = repo or CommerceRepository()
    now = int(time.time()) if now is None else now
    signup.limit(f"order-user:{user_id}", f"order-addr:{address or 'unknown'}", now=now,
                 most=int(options.current("TopUpRateLimitNum")),
                 window=int(options.current("TopUpRateLimitDurationSeconds")), what="top-up orders")
    if payment_method != "stripe":
        raise InvalidRequest("payment_method: must be stripe", param="payment_method")
    found = keys()
    if found is None or not found.api_key:
        raise Unavailable("online payment is not configured on this gateway; redeem a code instead",
                          code="payment_not_configured")
    minimum = int(options.current("StripeMinTopUp"))
    if not minimum <= amount <= MAX_TOPUP_USD:
        raise InvalidRequest(f"amount: must be {minimum} to {MAX_TOPUP_USD} (USD of quota)", param="amount")
    cents = _cents(amount, float(options.current("StripeUnitPrice")))
    if cents < MIN_CHARGE_CENTS:
        raise InvalidRequest(f"amount: the charge would be {cents} cents, below Stripe's smallest "
                             f"({MIN_CHARGE_CENTS})", param="amount")
    ratio = max(int(user.get("topup_ratio") or 1), 1)
    units = amount * UNITS_PER_USD * ratio
    if int(user.get("quota") or 0) + units > MAX_QUOTA_UNITS:
        raise InvalidRequest("amount: the account would hold more quota than one account may", param="amount")
    # Newest first in the lists: a fixed-width nanosecond time orders the orders of one second too.
    trade_no = f"ord_{time.time_ns():016x}{secrets.token_hex(3)}"
    order = {"trade_no": trade_no, "user_id": user_id, "amount": amount, "money_cents": cents, "currency": "usd",
             "units": units, "topup_ratio": ratio, "status": PENDING, "payment_method": "stripe",
             "created_at": now, "paid_at": 0, "session_id": ""}
    repo.put_order(order)
    try:
        session = _client(found.api_key).v1.checkout.sessions.create(params={
            "mode": "payment", "client_reference_id": trade_no, "metadata": {"trade_no": trade_no},
            "line_items": [{"quantity": 1, "price_data": {
                "currency": "usd", "unit_amount": cents,
                "product_data": {"name": f"{amount} USD of API quota"}}}],
            "success_url": f"{return_url}?topup=success&order={trade_no}",
            "cancel_url": f"{return_url}?topup=cancelled&order={trade_no}",
        }, options={"idempotency_key": trade_no})
    except Exception as exc:  # Stripe refused or could not be reached: no link, the order never paid
        repo.end_order(trade_no, EXPIRED)
        logger.warning("stripe checkout failed", extra={"trade_no": trade_no, "error": str(exc)[:300]})
        raise GatewayError("the payment provider could not start the payment; nothing was charged",
                           status=502, code="payment_unavailable") from None
    repo.set_order_session(trade_no, session.id, str(session.url or ""), int(session.expires_at or 0))
    return {"success": True, "message": "", "data": {"pay_link": session.url, "trade_no": trade_no,
                                                      "session_id": session.id, "amount": amount,
                                                      "money": cents / 100, "quota": units}}


class BadWebhook(InvalidRequest):
    code = "webhook_refused"


def webhook(body: bytes, signature: str | None, repo: CommerceRepository | None = None,
            accounts: UsersRepository | None = None) -> dict[str, Any]:
    """POST /api/stripe/webhook: verified, then acted on (see the module)."""
    import stripe

    found = keys()
    if found is None or not found.webhook_secrets:
        raise Unavailable("online payment is not configured on this gateway", code="payment_not_configured")
    verified = False
    for secret in found.webhook_secrets:
        try:  # Stripe's scheme, by its own library: HMAC-SHA256 of "<t>.<body>", t within the tolerance
            stripe.WebhookSignature.verify_header(body, signature, secret, tolerance=STRIPE_TOLERANCE_SECONDS)
            verified = True
            break
        except stripe.SignatureVerificationError:
            continue
    if not verified:
        raise BadWebhook("Stripe-Signature: the signature does not verify (forged, stale or signed with another "
                         "secret)", param="Stripe-Signature")
    try:  # the very bytes the signature covers
        event = json.loads(body)
        kind, session = str(event["type"]), dict(event["data"]["object"])
    except (ValueError, KeyError, TypeError):
        raise BadWebhook("body: a signed event that is not a Stripe event object", param="body") from None
    repo = repo or CommerceRepository()
    if kind in _REVERSAL_EVENTS:
        return _reversal(kind, session, repo)
    if kind not in (*_PAID_EVENTS, *_ENDED_EVENTS):
        return {"received": True, "handled": False}
    order = _order_of(session, repo)
    if order is None:
        logger.warning("stripe event for no order", extra={"event": event["id"], "session": session.get("id")})
        return {"received": True, "handled": False}
    if kind in _ENDED_EVENTS:
        repo.end_order(order["trade_no"], CANCELLED if order.get("cancel_asked_at") else EXPIRED)
        return {"received": True, "handled": True}
    if session.get("payment_status") not in ("paid", "no_payment_required"):
        return {"received": True, "handled": False}  # paid later: async_payment_succeeded comes then
    if not credit_order(order, accounts or UsersRepository(), payment_intent=str(session.get("payment_intent") or "")) \
            and order.get("status") not in (PENDING, SUCCESS):
        # Stripe completes no session it expired: this would be a payment of an ended order.
        logger.warning("stripe paid event for an ended order", extra={"trade_no": order["trade_no"],
                                                                       "status": order.get("status")})
    return {"received": True, "handled": True}


def cancel(user_id: int, trade_no: str, repo: CommerceRepository | None = None,
           accounts: UsersRepository | None = None, now: int | None = None) -> dict[str, Any]:
    """POST /api/user/pay/cancel: the payer's pending order ends unpaid (see the module)."""
    import stripe

    repo = repo or CommerceRepository()
    now = int(time.time()) if now is None else now
    order = repo.order(trade_no)
    if order is None or int(order["user_id"]) != user_id:
        raise NotFound("trade_no: no such order of yours", param="trade_no")
    if order["status"] == CANCELLED:
        return {"success": True, "message": "", "data": shown(order)}  # cancelled before: the same answer
    if not repo.ask_cancel(trade_no, now):
        raise _ended(order)
    found = keys()
    if order.get("session_id"):
        if found is None or not found.api_key:
            raise Unavailable("online payment is not configured on this gateway", code="payment_not_configured")
        sessions = _client(found.api_key).v1.checkout.sessions
        try:
            sessions.expire(str(order["session_id"]))
        except stripe.InvalidRequestError:  # not open: paid (complete) or expired already
            session = sessions.retrieve(str(order["session_id"]))
            if session.status == "complete" and session.payment_status in ("paid", "no_payment_required"):
                credit_order(order, accounts or UsersRepository(), payment_intent=str(session.payment_intent or ""))
                raise Conflict("trade_no: the order was paid meanwhile and its quota is credited; it cannot be "
                               "cancelled", param="trade_no", code="order_paid") from None
            if session.status != "expired":
                raise Conflict("trade_no: the payment is being processed; it cannot be cancelled now",
                               param="trade_no", code="order_processing") from None
        except stripe.StripeError as exc:
            logger.warning("stripe expire failed", extra={"trade_no": trade_no, "error": str(exc)[:300]})
            raise GatewayError("the payment provider could not be reached; the order is unchanged, try again",
                               status=502, code="payment_unavailable") from None
    repo.end_order(trade_no, CANCELLED)  # False: the expiry's own event ended it first, as cancelled
    ended = repo.order(trade_no) or order
    if ended["status"] != CANCELLED:
        raise _ended(ended)
    return {"success": True, "message": "", "data": shown(ended)}


def _ended(order: Mapping[str, Any]) -> Conflict:
    said = {SUCCESS: "was paid", EXPIRED: "expired unpaid"}.get(str(order["status"]), str(order["status"]))
    return Conflict(f"trade_no: the order {said}; only a pending order can be cancelled", param="trade_no",
                    code="order_ended")


def _reversal(kind: str, thing: Mapping[str, Any], repo: CommerceRepository) -> dict[str, Any]:
    """`charge.refunded` (a Charge: `amount_refunded` so far) or `charge.dispute.created` /
    `.closed` (a Dispute: `status`), found by their `payment_intent` (`commerce.reversals`)."""
    trade_no = repo.order_for_payment(str(thing.get("payment_intent") or ""))
    if trade_no is None:
        # Not credited yet (Stripe does not keep the order of events): a non-2xx, and Stripe
        # delivers it again later (docs.stripe.com/webhooks#retries), once the payment is known.
        raise Conflict("payment_intent: no credited payment of this gateway has it (yet); deliver it again later",
                       param="payment_intent")
    try:
        return {"received": True, "handled": True, "taken_back": _reverse(kind, thing, trade_no, repo)}
    except reversals.NotCredited:
        raise Conflict("payment_intent: its order is not credited (yet); deliver it again later",
                       param="payment_intent") from None


def _reverse(kind: str, thing: Mapping[str, Any], trade_no: str, repo: CommerceRepository) -> int:
    if kind == "charge.refunded":
        # a Charge always carries what was refunded of it so far (docs.stripe.com/api/charges/object)
        return reversals.apply(trade_no, refunded_cents=int(thing["amount_refunded"]), repo=repo)
    else:
        status = str(thing.get("status") or "")
        state = reversals.OPEN if kind == "charge.dispute.created" else (
            reversals.LOST if status == "lost" else reversals.WON)  # won, warning_closed: the money stays
    return reversals.apply(trade_no, dispute=state, repo=repo)


def _order_of(session: Mapping[str, Any], repo: CommerceRepository) -> dict[str, Any] | None:
    """The order `start` named in the session's `client_reference_id`, if that order's session is
    this one (or not written yet: the event may arrive before `start` records the session)."""
    trade_no = str(session.get("client_reference_id") or "")
    order = repo.order(trade_no) if trade_no else None
    return order if order is not None and order.get("session_id") in ("", session.get("id")) else None


def credit_order(order: Mapping[str, Any], accounts: UsersRepository, now: int | None = None,
                 payment_intent: str = "") -> bool:
    """Credits a paid order once (False: it was credited before), with the inviter's reward when this
    is the payer's first credited payment; its PaymentIntent then finds it (refunds, disputes)."""
    now = int(time.time()) if now is None else now
    table = get_settings().accounts_table
    claim = {"Update": {"TableName": table, "Key": to_item(order_key(order["trade_no"])),
                        "UpdateExpression": "SET #s = :success, paid_at = :now",
                        "ConditionExpression": "#s = :pending", "ExpressionAttributeNames": {"#s": "status"},
                        "ExpressionAttributeValues": to_values({":success": SUCCESS, ":now": now,
                                                                ":pending": PENDING})}}
    user_id = int(order["user_id"])
    for with_reward in (True, False):
        payer = accounts.raw_user(user_id, consistent=True) or {}
        reward = int(options.current("QuotaForInviter"))
        inviter = int(payer.get("inviter_id") or 0)
        rewarding = with_reward and reward > 0 and inviter > 0 and not payer.get("inviter_rewarded_at")
        claims = [claim]
        if payment_intent:
            claims.append({"Put": {"TableName": table, "Item": to_item(
                {**payment_key(payment_intent), "trade_no": order["trade_no"]})}})
        profile_condition = ""
        sets: dict[str, Any] = {"has_payment_method": True}
        if rewarding:
            claims.append({"Update": {
                "TableName": table, "Key": to_item({"pk": user_pk(inviter), "sk": PROFILE}),
                "UpdateExpression": "ADD aff_quota :r, aff_history_quota :r",
                "ConditionExpression": "attribute_exists(pk)", "ExpressionAttributeValues": to_values({":r": reward})}})
            profile_condition = "attribute_not_exists(inviter_rewarded_at)"
            sets["inviter_rewarded_at"] = now
        credit = credits.Credit(
            credit_id=f"order-{order['trade_no']}", user_id=user_id, units=int(order["units"]), route="stripe",
            detail={"trade_no": order["trade_no"], "amount_usd": int(order["amount"]),
                    "money_cents": int(order["money_cents"]), **({"inviter_reward": reward} if rewarding else {})},
            profile_sets=sets, profile_condition=profile_condition)
        try:
            credits.apply(credit, claims)
            return True
        except credits.ClaimFailed as failed:
            if failed.index == 0:
                return False  # credited before: a redelivered or reordered event
            continue  # the inviter is gone: credit the payment without the reward
        except credits.ProfileRefused:
            if rewarding:
                continue  # another first payment paid the reward meanwhile
            raise
    raise GatewayError("the payment could not be credited; it will be tried again")


# --- what users and operators see ------------------------------------------------------------------------

_SHOWN = ("trade_no", "user_id", "amount", "money_cents", "currency", "units", "status", "payment_method",
          "created_at", "paid_at", "expires_at")


def shown(order: Mapping[str, Any]) -> dict[str, Any]:
    """An order as its payer and the operators see it; a pending one with its payment page's link."""
    view = {name: order.get(name) for name in _SHOWN}
    view["expires_at"] = int(order.get("expires_at") or 0)
    view["pay_link"] = str(order.get("pay_link") or "") if order.get("status") == PENDING else ""
    return view


def own_orders(user_id: int, query: Mapping[str, str] | None, repo: CommerceRepository | None = None) -> dict:
    """GET /api/user/topup/self: the caller's orders, newest first."""
    from gateway.commerce.redemption import _page_params

    page, size = _page_params(query)
    orders, more = (repo or CommerceRepository()).orders_page(user_id=user_id, limit=page * size)
    return {"success": True, "message": "", "data": {"items": [shown(o) for o in orders[(page - 1) * size:]],
                                                      "page": page, "page_size": size, "has_more": more}}


def all_orders(query: Mapping[str, str] | None, repo: CommerceRepository | None = None) -> dict:
    """GET /api/user/topup (operators): every order, newest first."""
    from gateway.commerce.redemption import _page_params

    page, size = _page_params(query)
    orders, more = (repo or CommerceRepository()).orders_page(user_id=None, limit=page * size)
    return {"success": True, "message": "", "data": {"items": [shown(o) for o in orders[(page - 1) * size:]],
                                                      "page": page, "page_size": size, "has_more": more}}


def order_for(user_id: int, trade_no: str, repo: CommerceRepository | None = None) -> dict[str, Any]:
    order = (repo or CommerceRepository()).order(trade_no)
    if order is None or int(order["user_id"]) != user_id:
        raise NotFound("trade_no: no such order of yours", param="trade_no")
    return {"success": True, "message": "", "data": shown(order)}
