"""Account and credit queries: GET /v1/dashboard/billing/{usage,subscription}, GET /api/user/self,
the request log (GET /api/log/self, GET /api/log/token) and the user's own keys (/api/token/)."""

from aws_lambda_powertools.logging import correlation_paths

from gateway import observability
from gateway.api import account, requestlog, tokens
from gateway.http import authenticate, body_model, create_app, json_response, single_credential
from gateway.schemas.tokens import NewToken, TokenStatus, TokenUpdate

app = create_app()


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
    single_credential(app)
    headers = app.current_event.headers
    return json_response(account.user_self(headers.get("authorization"), headers.get("x-api-user")))


@app.get("/api/log/self")
def log_self():
    single_credential(app)
    headers = app.current_event.headers
    user_id = account.access_token_user(headers.get("authorization"), headers.get("x-api-user"))
    return json_response(requestlog.account_log(user_id, app.current_event.query_string_parameters))


@app.get("/api/log/token")
def log_token():
    return json_response(requestlog.key_log(authenticate(app), app.current_event.query_string_parameters))


def _token_user() -> int:
    single_credential(app)
    headers = app.current_event.headers
    return account.access_token_user(headers.get("authorization"), headers.get("x-api-user"))


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
