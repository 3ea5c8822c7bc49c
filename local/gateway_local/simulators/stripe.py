"""Simulated Stripe: the Checkout Session API, a hosted payment page, and signed webhooks.

Mounted at `/stripe`, so the `stripe` library reaches it with `api_base` `<simulators>/stripe`. What
it takes and answers follows Stripe's API reference (docs.stripe.com/api/checkout/sessions):

- `POST /v1/checkout/sessions` (form-encoded, `Authorization: Bearer <GATEWAY_STRIPE_API_KEY>` (or
  `GATEWAY_SIM_STRIPE_API_KEY`, when the gateway reads its keys from a secret), else 401
  `Invalid API Key provided`): `mode` (`payment`), `line_items[n][quantity]` and
  `line_items[n][price_data][currency|unit_amount|product_data][name]` required; a total below
  Stripe's minimum charge (50 cents for USD, docs.stripe.com/currencies#minimum-and-maximum-charge-amounts)
  is a 400 `amount_too_small`; an `Idempotency-Key` sent again with the same parameters answers the
  same session (and with other parameters a 400 `idempotency_error`), as Stripe's idempotent
  requests do (docs.stripe.com/api/idempotent_requests). Answers a `checkout.session` object whose
  `url` is this simulator's payment page.
- `GET /v1/checkout/sessions/{id}`; `POST /v1/checkout/sessions/{id}/expire` (an open session ends
  `expired` and `checkout.session.expired` is sent).
- `GET /pay/{id}`: the hosted page, a "Pay" and a "Cancel" button. `POST /pay/{id}` completes the
  session (`complete`, `paid`), sends `checkout.session.completed` and redirects to `success_url`;
  `?deliveries=N` sends the event N times (Stripe retries and may deliver an event more than once:
  docs.stripe.com/webhooks#handle-duplicate-events).

- `POST /v1/refunds` (`payment_intent`, `amount` in cents, all that is left when absent;
  docs.stripe.com/api/refunds/create): a paid session's charge is refunded, at most what is left
  (else a 400 `charge_already_refunded`), and `charge.refunded` is sent with the Charge
  (`payment_intent`, `amount`, `amount_refunded` so far: docs.stripe.com/api/charges/object).
- Disputes are opened by Stripe, never by an API call (in test mode, by its dispute test cards:
  docs.stripe.com/testing#disputes); here `POST /test/disputes` (`payment_intent`) opens one and
  `POST /test/disputes/{id}/close` (`status` `won` or `lost`) closes it, sending
  `charge.dispute.created` and `charge.dispute.closed` with the Dispute (`id`, `payment_intent`,
  `amount`, `status`: docs.stripe.com/api/disputes/object).

Events go to `GATEWAY_STRIPE_WEBHOOK_URL` signed with `GATEWAY_STRIPE_WEBHOOK_SECRET` by the
`stripe` library's own signer (`stripe.WebhookSignature.generate_signature_header`: `t=...,v1=...`,
HMAC-SHA256 over `"<t>.<payload>"`, docs.stripe.com/webhooks#verify-manually).
"""

from __future__ import annotations

import html
import json
import os
import secrets
import time
from typing import Any

import httpx
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, RedirectResponse, Response
from starlette.routing import Route

SESSIONS: dict[str, dict[str, Any]] = {}
CHARGES: dict[str, dict[str, Any]] = {}  # payment intent id -> its charge
DISPUTES: dict[str, dict[str, Any]] = {}
_IDEMPOTENT: dict[str, tuple[str, str]] = {}  # key -> (parameters, session id)
MIN_CHARGE = {"usd": 50}
DELIVERED: list[dict[str, Any]] = []  # every event sent, for tests


def _error(status: int, message: str, *, code: str | None = None, param: str | None = None,
           kind: str = "invalid_request_error") -> JSONResponse:
    error: dict[str, Any] = {"type": kind, "message": message}
    if code:
        error["code"] = code
    if param:
        error["param"] = param
    return JSONResponse({"error": error}, status)


def _authorized(request: Request) -> bool:
    expected = os.environ.get("GATEWAY_SIM_STRIPE_API_KEY") or os.environ.get("GATEWAY_STRIPE_API_KEY", "")
    given = request.headers.get("authorization", "")
    return bool(expected) and given == f"Bearer {expected}"


def _base(request: Request) -> str:
    """This simulator's own address (where it is mounted), from the create request's URL."""
    return str(request.url).split("?")[0].removesuffix("/v1/checkout/sessions")


async def create_session(request: Request) -> Response:
    if not _authorized(request):
        return _error(401, "Invalid API Key provided")
    form = await request.form()
    params = {k: str(v) for k, v in form.items()}
    if params.get("mode") != "payment":
        return _error(400, "Missing required param: mode.", param="mode") if "mode" not in params else \
            _error(400, f"Invalid mode: {params['mode']} (this simulator serves payment)", param="mode")
    items: list[dict[str, Any]] = []
    n = 0
    while f"line_items[{n}][quantity]" in params or f"line_items[{n}][price_data][currency]" in params:
        prefix = f"line_items[{n}]"
        try:
            quantity = int(params[f"{prefix}[quantity]"])
            amount = int(params[f"{prefix}[price_data][unit_amount]"])
            currency = params[f"{prefix}[price_data][currency]"].lower()
            name = params[f"{prefix}[price_data][product_data][name]"]
        except (KeyError, ValueError) as exc:
            return _error(400, f"Invalid line item {n}: {exc}", param=f"line_items[{n}]")
        if quantity < 1 or amount < 0:
            return _error(400, f"Invalid line item {n}: quantity and unit_amount", param=f"line_items[{n}]")
        items.append({"quantity": quantity, "amount": amount, "currency": currency, "name": name})
        n += 1
    if not items:
        return _error(400, "Missing required param: line_items.", param="line_items")
    currency = str(items[0]["currency"])
    total = sum(int(i["quantity"]) * int(i["amount"]) for i in items)
    if total < MIN_CHARGE.get(currency, 50):
        return _error(400, "The Checkout Session's total amount due must add up to at least $0.50 usd",
                      code="amount_too_small")
    key = request.headers.get("idempotency-key")
    fingerprint = json.dumps(params, sort_keys=True)
    if key and key in _IDEMPOTENT:
        seen, session_id = _IDEMPOTENT[key]
        if seen != fingerprint:
            return _error(400, "Keys for idempotent requests can only be used with the same parameters they were "
                          "first used with.", kind="idempotency_error")
        return JSONResponse(SESSIONS[session_id])
    session_id = f"cs_test_{secrets.token_hex(24)}"
    metadata = {k[len("metadata["):-1]: v for k, v in params.items() if k.startswith("metadata[")}
    session = {
        "id": session_id, "object": "checkout.session", "mode": "payment", "status": "open",
        "payment_status": "unpaid", "amount_total": total, "amount_subtotal": total, "currency": currency,
        "client_reference_id": params.get("client_reference_id"), "metadata": metadata, "livemode": False,
        "success_url": params.get("success_url"), "cancel_url": params.get("cancel_url"),
        "created": int(time.time()), "expires_at": int(time.time()) + 86400,
        "url": f"{_base(request)}/pay/{session_id}",
    }
    SESSIONS[session_id] = session
    if key:
        _IDEMPOTENT[key] = (fingerprint, session_id)
    return JSONResponse(session)


async def get_session(request: Request) -> Response:
    if not _authorized(request):
        return _error(401, "Invalid API Key provided")
    session = SESSIONS.get(request.path_params["session_id"])
    if session is None:
        return _error(404, f"No such checkout.session: '{request.path_params['session_id']}'",
                      code="resource_missing", param="session")
    return JSONResponse(session)


async def expire_session(request: Request) -> Response:
    if not _authorized(request):
        return _error(401, "Invalid API Key provided")
    session = SESSIONS.get(request.path_params["session_id"])
    if session is None:
        return _error(404, "No such checkout.session", code="resource_missing")
    if session["status"] != "open":
        return _error(400, f"Only Checkout Sessions with a status in [\"open\"] can be expired. This Checkout "
                      f"Session has a status of \"{session['status']}\".")
    session["status"] = "expired"
    await deliver("checkout.session.expired", session)
    return JSONResponse(session)


async def deliver(kind: str, session: dict[str, Any], times: int = 1) -> list[int]:
    """Sends one event (the same event id every time, as Stripe's retries do); answers the statuses."""
    event = {"id": f"evt_{secrets.token_hex(12)}", "object": "event", "type": kind, "api_version": "2025-09-30",
             "created": int(time.time()), "livemode": False, "data": {"object": dict(session)}}
    payload = json.dumps(event)
    import stripe

    url = os.environ.get("GATEWAY_STRIPE_WEBHOOK_URL", "")
    secret = os.environ.get("GATEWAY_SIM_STRIPE_WEBHOOK_SECRET") or os.environ.get("GATEWAY_STRIPE_WEBHOOK_SECRET", "")
    statuses = []
    async with httpx.AsyncClient(timeout=30) as client:
        for _ in range(times):
            header = stripe.WebhookSignature.generate_signature_header(payload, secret)
            DELIVERED.append(event)
            if not url:
                continue
            answer = await client.post(url, content=payload, headers={"Stripe-Signature": header,
                                                                       "Content-Type": "application/json"})
            statuses.append(answer.status_code)
    return statuses


async def page(request: Request) -> Response:
    session = SESSIONS.get(request.path_params["session_id"])
    if session is None:
        return HTMLResponse("<h1>No such payment</h1>", 404)
    amount = f"${session['amount_total'] / 100:.2f}"
    return HTMLResponse(f"""<!doctype html><html lang="en"><head><meta charset="utf-8"><title>Pay {amount}</title>
<meta name="viewport" content="width=device-width, initial-scale=1"></head>
<body style="font-family: sans-serif; max-width: 24rem; margin: 3rem auto">
<h1>Simulated Stripe Checkout</h1><p>Pay <strong>{amount}</strong> ({html.escape(session['currency'])})</p>
<form method="post"><label>Card number <input name="card" value="4242 4242 4242 4242"></label>
<p><button type="submit">Pay {amount}</button></p></form>
<p><a href="{html.escape(session.get('cancel_url') or '/')}">Cancel</a></p></body></html>""")


async def pay(request: Request) -> Response:
    session = SESSIONS.get(request.path_params["session_id"])
    if session is None:
        return HTMLResponse("<h1>No such payment</h1>", 404)
    if session["status"] == "open":
        intent = f"pi_{secrets.token_hex(12)}"
        session.update(status="complete", payment_status="paid", payment_intent=intent)
        CHARGES[intent] = {"id": f"ch_{secrets.token_hex(12)}", "object": "charge", "payment_intent": intent,
                           "amount": session["amount_total"], "amount_refunded": 0, "refunded": False,
                           "currency": session["currency"], "disputed": False}
        times = max(1, min(int(request.query_params.get("deliveries") or 1), 10))
        await deliver("checkout.session.completed", session, times)
    return RedirectResponse(session.get("success_url") or "/", 303)


async def refund(request: Request) -> Response:
    if not _authorized(request):
        return _error(401, "Invalid API Key provided")
    params = {k: str(v) for k, v in (await request.form()).items()}
    charge = CHARGES.get(params.get("payment_intent", ""))
    if charge is None:
        return _error(404, f"No such payment_intent: '{params.get('payment_intent', '')}'", code="resource_missing",
                      param="payment_intent")
    left = int(charge["amount"]) - int(charge["amount_refunded"])
    amount = int(params.get("amount") or left)
    if amount < 1 or amount > left:
        return _error(400, f"Refund amount ({amount}) is greater than unrefunded amount on charge ({left})",
                      code="charge_already_refunded" if left == 0 else "amount_too_large", param="amount")
    charge["amount_refunded"] = int(charge["amount_refunded"]) + amount
    charge["refunded"] = charge["amount_refunded"] == charge["amount"]
    refund_object = {"id": f"re_{secrets.token_hex(12)}", "object": "refund", "amount": amount,
                     "charge": charge["id"], "payment_intent": charge["payment_intent"], "status": "succeeded"}
    await deliver("charge.refunded", charge)
    return JSONResponse(refund_object)


async def open_dispute(request: Request) -> Response:
    params = {k: str(v) for k, v in (await request.form()).items()}
    charge = CHARGES.get(params.get("payment_intent", ""))
    if charge is None:
        return _error(404, "No such payment_intent", code="resource_missing", param="payment_intent")
    dispute = {"id": f"dp_{secrets.token_hex(12)}", "object": "dispute", "charge": charge["id"],
               "payment_intent": charge["payment_intent"], "amount": charge["amount"], "status": "needs_response"}
    DISPUTES[dispute["id"]] = dispute
    charge["disputed"] = True
    await deliver("charge.dispute.created", dispute)
    return JSONResponse(dispute)


async def close_dispute(request: Request) -> Response:
    dispute = DISPUTES.get(request.path_params["dispute_id"])
    status = str((await request.form()).get("status") or "")
    if dispute is None or status not in ("won", "lost"):
        return _error(400, "a known dispute and a status of won or lost", param="status")
    dispute["status"] = status
    await deliver("charge.dispute.closed", dispute)
    return JSONResponse(dispute)


app = Starlette(routes=[
    Route("/v1/checkout/sessions", create_session, methods=["POST"]),
    Route("/v1/checkout/sessions/{session_id}", get_session, methods=["GET"]),
    Route("/v1/checkout/sessions/{session_id}/expire", expire_session, methods=["POST"]),
    Route("/pay/{session_id}", page, methods=["GET"]),
    Route("/pay/{session_id}", pay, methods=["POST"]),
    Route("/v1/refunds", refund, methods=["POST"]),
    Route("/test/disputes", open_dispute, methods=["POST"]),
    Route("/test/disputes/{dispute_id}/close", close_dispute, methods=["POST"]),
])
