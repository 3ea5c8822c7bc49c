"""Account and credit queries: GET /v1/dashboard/billing/{usage,subscription}, GET /api/user/self,
and the request log (GET /api/log/self, GET /api/log/token)."""

from aws_lambda_powertools.logging import correlation_paths

from gateway import observability
from gateway.api import account, requestlog
from gateway.http import authenticate, create_app, json_response

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
    headers = app.current_event.headers
    return json_response(account.user_self(headers.get("authorization"), headers.get("x-api-user")))


@app.get("/api/log/self")
def log_self():
    headers = app.current_event.headers
    user_id = account.access_token_user(headers.get("authorization"), headers.get("x-api-user"))
    return json_response(requestlog.account_log(user_id, app.current_event.query_string_parameters))


@app.get("/api/log/token")
def log_token():
    return json_response(requestlog.key_log(authenticate(app), app.current_event.query_string_parameters))


@observability.lambda_handler(correlation_id_path=correlation_paths.API_GATEWAY_REST)
def lambda_handler(event, context):
    return app.resolve(event, context)
