"""Account and credit queries: GET /v1/dashboard/billing/{usage,subscription}, the account
(GET/PUT /api/user/self, sign-in and sign-out, GET /api/data/self), the request log
(GET /api/log/self, GET /api/log/token), the user's own keys (/api/token/) and the operator's
/api/admin routes. Every /api route but /api/log/token takes the access token or the session."""

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.logging import correlation_paths

from gateway import groups, observability
from gateway.api import account, channels, operator, pricing, requestlog, session, tasks, tokens
from gateway.http import authenticate, body_model, create_app, json_only, json_response, single_credential
from gateway.routing.channels import check_at_start
from gateway.schemas.tokens import NewToken, TokenStatus, TokenUpdate

# The channels document names the models a key may be limited to and the operator's channel list:
# an unreadable or bad one fails the cold start, naming the cause, as in every function that routes.
check_at_start()

app = create_app()
# Every state-changing route takes JSON only (415 otherwise): no cross-site form reaches them.
app.use(middlewares=[json_only])


def _headers():
    """The request's headers, once the one credential rule has passed (`auth.single_credential`)."""
    single_credential(app)
    return app.current_event.headers


@app.get("/v1/dashboard/billing/usage")
def billing_usage():
    principal = authenticate(app)
    query = app.current_event.query_string_parameters or {}
    return json_response(account.billing_usage(principal, query.get("start_date"), query.get("end_date")))


@app.get("/v1/dashboard/billing/subscription")
def billing_subscription():
    return json_response(account.subscription(authenticate(app)))


@app.get("/api/user/self")
def user_self():
    return json_response(session.self_record(_headers()))


@app.put("/api/user/self")
def user_self_update():
    return json_response(session.change_password(_headers(), app.current_event.decoded_body))


@app.post("/api/user/login")
def user_login():
    event = app.current_event
    signed_in = session.sign_in(event.decoded_body, event.request_context.identity.source_ip or "",
                                session.is_https(_headers()))
    return json_response(signed_in.body, headers={"Set-Cookie": signed_in.cookie, "Cache-Control": "no-store"})


@app.post("/api/user/logout")
def user_logout():
    return json_response({"data": None, "message": "", "success": True},
                         headers={"Set-Cookie": session.sign_out(_headers())})


# new-api signs out with a GET; a GET changes nothing here (a link or a prefetch must not end a
# session): it names the POST that does.
@app.get("/api/user/logout")
def user_logout_get():
    return json_response({"data": None, "success": False,
                          "message": "sign out with POST /api/user/logout (a GET changes nothing)"},
                         status=405, headers={"Allow": "POST"})


@app.get("/api/data/self")
def data_self():
    user_id, _ = session.caller(_headers())
    return json_response(account.self_spend(user_id, app.current_event.query_string_parameters))


@app.get("/api/log/self")
def log_self():
    user_id, _ = session.caller(_headers())
    return json_response(requestlog.account_log(user_id, app.current_event.query_string_parameters))


@app.get("/api/log/self/stat")
def log_self_stat():
    user_id, _ = session.caller(_headers())
    return json_response(requestlog.log_stat(user_id, app.current_event.query_string_parameters))


@app.get("/api/log/self/export")
def log_self_export():
    user_id, _ = session.caller(_headers())
    body, more = requestlog.export_csv(user_id, app.current_event.query_string_parameters)
    return Response(status_code=200, content_type="text/csv; charset=utf-8", body=body, headers={
        "Content-Disposition": 'attachment; filename="request-log.csv"', "Cache-Control": "no-store",
        "X-Export-Truncated": "true" if more else "false"})


@app.get("/api/data")
def data_everyone():
    session.require_operator(_headers())
    return json_response(operator.spend(app.current_event.query_string_parameters))


@app.get("/api/log/token")
def log_token():
    return json_response(requestlog.key_log(authenticate(app), app.current_event.query_string_parameters))


@app.get("/api/task/self")
def task_self():
    user_id, _ = session.caller(_headers())
    return json_response(tasks.own_tasks(user_id, app.current_event.query_string_parameters))


@app.get("/api/admin/users")
def admin_users():
    session.require_operator(_headers())
    return json_response(operator.users(app.current_event.query_string_parameters))


@app.post("/api/admin/users")
def admin_user_create():
    _, manager = session.require_operator(_headers())
    return json_response(operator.create_user(app.current_event.decoded_body, manager=manager))


@app.put("/api/admin/users/<user_id>/status")
def admin_user_status(user_id: str):
    operator_id, manager = session.require_operator(_headers())
    return json_response(operator.set_status(operator.user_id_of(user_id), app.current_event.decoded_body,
                                             operator_id=operator_id, manager=manager))


@app.post("/api/admin/users/<user_id>/quota")
def admin_user_quota(user_id: str):
    _, manager = session.require_operator(_headers())
    return json_response(operator.add_quota(operator.user_id_of(user_id), app.current_event.decoded_body,
                                      manager=manager))


@app.put("/api/admin/users/<user_id>/limits")
def admin_user_limits(user_id: str):
    _, manager = session.require_operator(_headers())
    return json_response(operator.set_limits(operator.user_id_of(user_id), app.current_event.decoded_body,
                                      manager=manager))


# new-api's operator edit of a user (API Gateway serves /api/user and /api/user/ alike).
@app.put("/api/user")
def user_update():
    _, manager = session.require_operator(_headers())
    return json_response(operator.update_user(app.current_event.decoded_body, manager=manager))


@app.get("/api/user/self/groups")
def user_self_groups():
    _, user = session.caller(_headers())
    return json_response(groups.self_groups(user))


@app.get("/api/pricing")
def pricing_page():
    return json_response(pricing.answer(_headers()))


@app.get("/api/admin/channels")
def admin_channels():
    session.require_operator(_headers())
    return json_response(operator.channels())


@app.get("/api/admin/prices")
def admin_prices():
    session.require_operator(_headers())
    return json_response(pricing.operator_view())


@app.get("/api/admin/spend")
def admin_spend():
    session.require_operator(_headers())
    return json_response(operator.spend(app.current_event.query_string_parameters))


# The operator's channels as data, new-api's /api/channel/ routes (API Gateway serves the paths
# with and without the trailing slash alike).
@app.get("/api/channel")
def channel_list():
    session.require_operator(_headers())
    return json_response(channels.list_channels(app.current_event.query_string_parameters))


@app.post("/api/channel")
def channel_create():
    session.require_operator(_headers())
    return json_response(channels.create_channel(app.current_event.decoded_body))


@app.put("/api/channel")
def channel_update():
    session.require_operator(_headers())
    return json_response(channels.update_channel(app.current_event.decoded_body))


@app.get("/api/channel/test/<channel_id>")
def channel_test(channel_id: str):
    session.require_operator(_headers())
    return json_response(channels.test_channel(channel_id))


@app.get("/api/channel/<channel_id>")
def channel_get(channel_id: str):
    session.require_operator(_headers())
    return json_response(channels.get_channel(channel_id))


@app.delete("/api/channel/<channel_id>")
def channel_delete(channel_id: str):
    session.require_operator(_headers())
    return json_response(channels.delete_channel(channel_id))


def _token_user() -> int:
    return session.caller(_headers())[0]


# API Gateway serves /api/token and /api/token/ alike (new-api's clients call the second).
@app.get("/api/token")
def token_list():
    return json_response(tokens.list_tokens(_token_user(), app.current_event.query_string_parameters))


@app.post("/api/token")
def token_create():
    user_id = _token_user()
    return json_response(tokens.create_token(user_id, body_model(app, NewToken)))


@app.put("/api/token")
def token_update():
    user_id = _token_user()
    query = app.current_event.query_string_parameters or {}
    if str(query.get("status_only") or "").lower() == "true":
        return json_response(tokens.set_token_status(user_id, body_model(app, TokenStatus)))
    return json_response(tokens.update_token(user_id, body_model(app, TokenUpdate)))


@app.delete("/api/token/<token_id>")
def token_delete(token_id: str):
    return json_response(tokens.delete_token(_token_user(), token_id))


@observability.lambda_handler(correlation_id_path=correlation_paths.API_GATEWAY_REST)
def lambda_handler(event, context):
    return app.resolve(event, context)
