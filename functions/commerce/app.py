"""The people and the money they bring, in new-api's web API shapes: the site's status and
options (GET /api/status, /api/option/), redemption codes (/api/redemption/) and redeeming one
(POST /api/user/topup), online top-up through Stripe Checkout (POST /api/user/pay, the signed
webhook POST /api/stripe/webhook, the orders), and invitations (/api/user/aff, aff_transfer).
Every route but /api/status and the webhook takes the access token or the session
(`gateway.api.session.caller`); the operator's need role 10 or more."""

from aws_lambda_powertools.logging import correlation_paths

from gateway import observability, options
from gateway.api import session
from gateway.commerce import invitations, payments, redemption, signup
from gateway.http import body_model, create_app, json_only, json_response, public_base_url, single_credential
from gateway.multipart import event_body
from gateway.schemas.commerce import (
    AffTransfer,
    CodeStatus,
    CodeUpdate,
    NewCodes,
    OptionUpdate,
    PasswordReset,
    PayCancel,
    PayRequest,
    Redeem,
    Register,
)
from gateway.signing_keys import STRIPE, load_at_start

# The Stripe keys' secret, when one is configured: unreadable, the cold start fails naming it.
load_at_start(STRIPE)

app = create_app()
# Every state-changing route takes JSON only (415 otherwise): no cross-site form reaches them.
app.use(middlewares=[json_only])


def _headers():
    """The request's headers, once the one credential rule has passed (`auth.single_credential`)."""
    single_credential(app)
    return app.current_event.headers


def _operator() -> int:
    return session.require_operator(_headers())[0]


def _address() -> str:
    return app.current_event.request_context.identity.source_ip or ""


def _query(name: str) -> str:
    return str((app.current_event.query_string_parameters or {}).get(name) or "")


@app.get("/api/status")
def status():
    return json_response(options.status(), headers={"Cache-Control": "no-store"})


# API Gateway serves /api/option and /api/option/ alike (new-api's clients call the second).
@app.get("/api/option")
def option_list():
    _operator()
    return json_response(options.listed())


@app.put("/api/option")
def option_update():
    operator_id = _operator()
    return json_response(options.update(body_model(app, OptionUpdate).model_dump(), operator_id))


@app.get("/api/redemption")
def redemption_list():
    _operator()
    return json_response(redemption.listed(app.current_event.query_string_parameters))


@app.post("/api/redemption")
def redemption_create():
    operator_id = _operator()
    return json_response(redemption.create(body_model(app, NewCodes), operator_id))


@app.put("/api/redemption")
def redemption_update():
    _operator()
    query = app.current_event.query_string_parameters or {}
    if str(query.get("status_only") or "").lower() == "true":
        return json_response(redemption.set_status(body_model(app, CodeStatus)))
    return json_response(redemption.update(body_model(app, CodeUpdate)))


@app.get("/api/redemption/<code_id>")
def redemption_one(code_id: str):
    _operator()
    return json_response(redemption.one(redemption.code_id_of(code_id)))


@app.delete("/api/redemption/<code_id>")
def redemption_delete(code_id: str):
    _operator()
    return json_response(redemption.delete(redemption.code_id_of(code_id)))


@app.post("/api/user/topup")
def user_topup():
    user_id, _ = session.caller(_headers())
    return json_response(redemption.redeem(user_id, body_model(app, Redeem)))


@app.get("/api/user/topup")
def topup_list():
    _operator()
    return json_response(payments.all_orders(app.current_event.query_string_parameters))


@app.get("/api/user/topup/self")
def topup_self():
    user_id, _ = session.caller(_headers())
    return json_response(payments.own_orders(user_id, app.current_event.query_string_parameters))


@app.post("/api/user/pay")
def user_pay():
    user_id, user = session.caller(_headers())
    request = body_model(app, PayRequest)
    return json_response(payments.start(user_id, user, request.amount, request.payment_method,
                                        return_url=f"{public_base_url(app)}/console/", address=_address()))


@app.post("/api/user/pay/cancel")
def user_pay_cancel():
    user_id, _ = session.caller(_headers())
    return json_response(payments.cancel(user_id, body_model(app, PayCancel).trade_no))


@app.post("/api/stripe/webhook")
def stripe_webhook():
    event = app.current_event
    signature = next((v for k, v in (event.headers or {}).items() if k.lower() == "stripe-signature"), None)
    return json_response(payments.webhook(event_body(event.raw_event), signature))


@app.get("/api/user/aff")
def user_aff():
    return json_response(invitations.aff(session.caller(_headers())[1]))


@app.post("/api/user/aff_transfer")
def user_aff_transfer():
    user_id, _ = session.caller(_headers())
    return json_response(invitations.transfer(user_id, body_model(app, AffTransfer).quota))


@app.get("/api/verification")
def verification():
    return json_response(signup.send_code(_query("email"), _address()))


@app.post("/api/user/register")
def register():
    return json_response(signup.register(body_model(app, Register), _address()))


@app.get("/api/reset_password")
def reset_password():
    return json_response(signup.send_reset(_query("email"), _address(), f"{public_base_url(app)}/console/"))


@app.post("/api/user/reset")
def user_reset():
    request = body_model(app, PasswordReset)
    return json_response(signup.reset(request.email, request.token, _address()))


@observability.lambda_handler(correlation_id_path=correlation_paths.API_GATEWAY_REST)
def lambda_handler(event, context):
    return app.resolve(event, context)
