"""Errors as each provider means them (issue 30, row 7 and item 3): one table per protocol and
task family, read from the provider's own reference, judged here on the bodies the providers
really send (each case names where the body was seen); then the whole path for the bodies that
were misjudged before: the simulator answers the provider's body, the adapter or client reads
it, the verdict fails the request over, the channel cools down for the maximum with an
operator alert, and the client never reads "API key not valid"."""

from __future__ import annotations

import asyncio
import json

import httpx
import pytest

from gateway.routing import health
from gateway.routing.catalog import Catalog
from gateway.routing.failover import first_success, first_success_async, record_failure
from gateway.routing.health import HealthBook, Policy
from gateway.tasks import adapter as task_adapter
from gateway.tasks.families.alpha.adapter import AlphaAdapter
from gateway.tasks.families.alpha.errors import ERRORS as ALPHA
from gateway.tasks.families.beta.errors import ERRORS as BETA
from gateway.tasks.families.delta.adapter import DeltaAdapter
from gateway.tasks.families.delta.errors import ERRORS as DELTA
from gateway.tasks.families.epsilon.errors import ERRORS as EPSILON
from gateway.tasks.families.gamma.adapter import GammaAdapter
from gateway.tasks.families.gamma.errors import ERRORS as GAMMA
from gateway.tasks.families.imgtask.adapter import ImgtaskAdapter
from gateway.tasks.families.imgtask.errors import ERRORS as IMGTASK
from gateway.tasks.families.zeta.adapter import ZetaAdapter
from gateway.tasks.families.zeta.errors import ERRORS as ZETA
from gateway.upstreams.chat import ERRORS as CHAT
from gateway.upstreams.chat import ChatClient
from gateway.upstreams.content import ERRORS as CONTENT
from gateway.upstreams.content import ContentClient
from gateway.upstreams.errors import ACCOUNT, CAPACITY, CLIENT, UPSTREAM, UpstreamError
from gateway.upstreams.messages import ERRORS as MESSAGES
from gateway.upstreams.messages import MessagesClient
from gateway.upstreams.verdict import exhausted_error
from gateway_local.simulators import alpha, chat, content, delta, gamma, imgtask, messages, zeta
from tests.unit.health_support import Clock
from tests.unit.video.conftest import asgi_client

API_KEY_INVALID = {"error": {  # continuedev/continue#8516
    "code": 400, "message": "API key not valid. Please pass a valid API key.", "status": "INVALID_ARGUMENT",
    "details": [{"@type": "type.googleapis.com/google.rpc.ErrorInfo", "reason": "API_KEY_INVALID",
                 "domain": "googleapis.com", "metadata": {"service": "generativelanguage.googleapis.com"}},
                {"@type": "type.googleapis.com/google.rpc.LocalizedMessage", "locale": "en-US",
                 "message": "API key not valid. Please pass a valid API key."}]}}


def google(status: int, word: str, message: str = "m") -> dict:
    return {"error": {"code": status, "message": message, "status": word}}


CASES = [
    # --- content (Gemini API; ai.google.dev/gemini-api/docs/troubleshooting) and delta (Veo) ---
    (CONTENT, 400, API_KEY_INVALID, ACCOUNT),
    (DELTA, 400, API_KEY_INVALID, ACCOUNT),
    (CONTENT, 400, google(400, "INVALID_ARGUMENT", "Request contains an invalid argument."), CLIENT),
    (CONTENT, 400, google(400, "FAILED_PRECONDITION", "Gemini API free tier is not available in your country. "
                                                      "Please enable billing on your project in Google AI Studio."),
     ACCOUNT),
    (CONTENT, 403, {"error": {"code": 403, "message": "Generative Language API has not been used in project 1 "
                                                      "before or it is disabled.", "status": "PERMISSION_DENIED",
                              "details": [{"@type": "type.googleapis.com/google.rpc.ErrorInfo",
                                           "reason": "SERVICE_DISABLED", "domain": "googleapis.com"}]}}, ACCOUNT),
    (CONTENT, 404, google(404, "NOT_FOUND", "models/nope is not found"), CLIENT),
    (CONTENT, 429, google(429, "RESOURCE_EXHAUSTED"), CAPACITY),
    (CONTENT, 503, google(503, "UNAVAILABLE", "The model is overloaded. Please try again later."), UPSTREAM),
    (DELTA, 500, google(500, "INTERNAL"), UPSTREAM),
    # --- chat and responses (OpenAI; platform.openai.com/docs/guides/error-codes) ---
    (CHAT, 429, {"error": {"message": "You exceeded your current quota, please check your plan and billing "
                                      "details.", "type": "insufficient_quota", "param": None,
                           "code": "insufficient_quota"}}, ACCOUNT),  # plexpt/chatgpt-java#249
    (CHAT, 429, {"error": {"message": "Rate limit reached for gpt-4o", "type": "requests",
                           "code": "rate_limit_exceeded"}}, CAPACITY),
    (CHAT, 401, {"error": {"message": "Incorrect API key provided: sk-...", "type": "invalid_request_error",
                           "code": "invalid_api_key"}}, ACCOUNT),
    (CHAT, 403, {"error": {"message": "Country, region, or territory not supported", "type": "request_forbidden",
                           "code": "unsupported_country_region_territory"}}, ACCOUNT),
    (CHAT, 400, {"error": {"message": "Billing hard limit has been reached", "type": "invalid_request_error",
                           "code": "billing_hard_limit_reached"}}, ACCOUNT),
    (CHAT, 400, {"error": {"message": "Unknown parameter: 'response_format'.", "type": "invalid_request_error",
                           "param": "response_format", "code": "unknown_parameter"}}, CLIENT),
    (EPSILON, 429, {"error": {"type": "insufficient_quota", "code": "insufficient_quota", "message": "quota"}},
     ACCOUNT),
    # --- messages (Anthropic; docs.anthropic.com/en/api/errors) ---
    (MESSAGES, 400, {"type": "error", "error": {  # anthropics/claude-code#4684
        "type": "invalid_request_error", "message": "Your credit balance is too low to access the Anthropic API. "
                                                    "Please go to Plans & Billing to upgrade or purchase credits."}},
     ACCOUNT),
    (MESSAGES, 400, {"type": "error", "error": {"type": "invalid_request_error",
                                                "message": "messages: at least one message is required"}}, CLIENT),
    (MESSAGES, 402, {"type": "error", "error": {"type": "billing_error", "message": "billing"}}, ACCOUNT),
    (MESSAGES, 529, {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}, CAPACITY),
    (MESSAGES, 429, {"type": "error", "error": {"type": "rate_limit_error", "message": "slow down"}}, CAPACITY),
    # --- gamma (DashScope; help.aliyun.com/zh/dashscope/return-status-code-description) ---
    (GAMMA, 400, {"statusCode": 400, "code": "Arrearage", "request_id": "8af536f9",  # tencentmusic/supersonic#1572
                  "message": "Access denied, please make sure your account is in good standing."}, ACCOUNT),
    (GAMMA, 400, {"code": "DataInspectionFailed", "message": "Input or output data may contain inappropriate "
                                                             "content.", "request_id": "r"}, CLIENT),
    (GAMMA, 400, {"code": "InvalidParameter", "message": "Required parameter(s) missing or invalid",
                  "request_id": "r"}, CLIENT),
    (GAMMA, 401, {"code": "InvalidApiKey", "message": "Invalid API-key provided.", "request_id": "r"}, ACCOUNT),
    (GAMMA, 403, {"code": "AccessDenied.Unpurchased", "message": "Access to model denied.", "request_id": "r"},
     ACCOUNT),
    (GAMMA, 429, {"code": "Throttling.RateQuota", "message": "Requests rate limit exceeded", "request_id": "r"},
     CAPACITY),
    (GAMMA, 500, {"code": "InternalError", "message": "An internal error has occured", "request_id": "r"}, UPSTREAM),
    # --- zeta (Ark; volcengine.com/docs/82379/1299023) ---
    (ZETA, 403, {"error": {"code": "AccountOverdueError", "param": "", "type": "Forbidden",  # coze-studio#2195
                           "message": "The request failed because your account has an overdue balance."}}, ACCOUNT),
    (ZETA, 401, {"error": {"code": "AuthenticationError", "type": "Unauthorized",
                           "message": "The API key or AK/SK in the request is missing or invalid."}}, ACCOUNT),
    (ZETA, 429, {"error": {"code": "SetLimitExceeded", "type": "TooManyRequests", "message": "limit"}}, ACCOUNT),
    (ZETA, 429, {"error": {"code": "ServerOverloaded", "type": "TooManyRequests", "message": "busy"}}, CAPACITY),
    (ZETA, 400, {"error": {"code": "InputTextSensitiveContentDetected", "type": "BadRequest", "message": "no"}},
     CLIENT),
    # --- alpha (Kling API reference, General Information: Error Code) ---
    (ALPHA, 429, {"code": 1101, "message": "Account in arrears", "request_id": "r"}, ACCOUNT),
    (ALPHA, 429, {"code": 1102, "message": "Resource pack depleted or expired", "request_id": "r"}, ACCOUNT),
    (ALPHA, 429, {"code": 1100, "message": "Account exception", "request_id": "r"}, ACCOUNT),
    (ALPHA, 401, {"code": 1004, "message": "Authorization has expired", "request_id": "r"}, ACCOUNT),
    (ALPHA, 403, {"code": 1304, "message": "Trigger IP whitelisting policy", "request_id": "r"}, ACCOUNT),
    (ALPHA, 429, {"code": 1302, "message": "API request too fast", "request_id": "r"}, CAPACITY),
    (ALPHA, 429, {"code": 1303, "message": "Concurrency exceeds the resource package limit", "request_id": "r"},
     CAPACITY),
    (ALPHA, 400, {"code": 1301, "message": "Trigger content security policy", "request_id": "r"}, CLIENT),
    (ALPHA, 400, {"code": 1201, "message": "Invalid parameters", "request_id": "r"}, CLIENT),
    # --- beta (BFL: docs.bfl.ai) ---
    (BETA, 402, {"detail": "Insufficient credits"}, ACCOUNT),
    (BETA, 422, {"detail": [{"loc": ["body", "prompt"], "msg": "field required", "type": "missing"}]}, CLIENT),
    (BETA, 429, {"detail": "You have exceeded the number of active tasks"}, CAPACITY),
    # --- imgtask (midjourney-proxy SubmitController) ---
    (IMGTASK, 200, {"code": 3, "description": "无可用的账号实例", "result": None}, ACCOUNT),
    (IMGTASK, 200, {"code": 3, "description": "关联任务不存在或已失效", "result": None}, CLIENT),
    (IMGTASK, 200, {"code": 23, "description": "队列已满，请稍后尝试", "result": None}, CAPACITY),
]


@pytest.mark.parametrize("table, status, body, fault", CASES,
                         ids=[f"{t.name}-{s}-{i}" for i, (t, s, _, _) in enumerate(CASES)])
def test_each_providers_answer_is_the_fault_its_reference_says(table, status, body, fault):
    assert table.fault(status, body) == fault


def test_a_table_never_crashes_on_a_body_of_a_shape_the_provider_never_sends():
    for table in (CONTENT, CHAT, MESSAGES, GAMMA, ZETA, ALPHA, BETA, IMGTASK, DELTA, EPSILON):
        for body in (None, [], "text", {"error": "a string"}, {"error": {"details": "x"}}, {"code": True}, [1]):
            assert table.fault(400, body) == CLIENT and table.fault(401, body) == ACCOUNT


# --- the whole path, from the simulators' real bodies ---------------------------------------------------

@pytest.fixture
def book(health_store, monkeypatch):
    clock = Clock()
    book = HealthBook(health_store, clock=clock, cache_seconds=0, policy=Policy())
    monkeypatch.setattr(health, "_book", book)
    return book


def two_channels(protocol: str, bad_url: str, good_url: str, key: str = "k") -> Catalog:
    return Catalog.from_document({"channels": [
        {"name": "main", "protocol": protocol, "base_url": bad_url, "api_key": key, "models": ["m"], "priority": 1},
        {"name": "spare", "protocol": protocol, "base_url": good_url, "api_key": key, "models": ["m"]},
    ]})


def assert_cooled_for_the_maximum(book) -> None:
    state = book.of("main")
    assert state.cooling_until == book.clock() + 600 and state.last_fault == ACCOUNT


def run_text(client_type, simulator_app, catalog: Catalog, call):
    async def go():
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=simulator_app)) as http:
            def attempt_for(channel):
                return call(client_type(channel.base_url, channel.api_key, http))
            return await first_success_async(catalog.candidates("m", [catalog.channels[0].protocol]), attempt_for)
    return asyncio.run(go())


def test_a_revoked_gemini_key_400_fails_over_cools_down_and_is_never_told_to_the_client(book):
    # Given the preferred content channel's key revoked: the simulator answers Google's own 400
    catalog = two_channels("content", "http://sim/account/keyinvalid", "http://sim")
    body = {"contents": [{"role": "user", "parts": [{"text": "hi"}]}]}
    # When a request comes, it is answered by the other channel (before: relayed as the client's 400)
    answer, channel = run_text(ContentClient, content.app, catalog, lambda c: c.generate_content("m", body))
    assert channel.name == "spare" and answer["candidates"][0]["content"]["parts"][0]["text"] == "You said: hi"
    # And the revoked channel is out for the maximum, as an account problem the operator is told of
    assert_cooled_for_the_maximum(book)
    # And once every channel refused, the client is told it is not its key, never "API key not valid"
    failures: list = []
    error = asyncio.run(_refused(ContentClient, content.app, "http://sim/account/keyinvalid",
                                 lambda c: c.generate_content("m", body)))
    record_failure(catalog.channels[0], error, failures)
    told = exhausted_error(failures)
    assert told.status == 502 and "not a problem with your key" in told.message
    assert "API key not valid" not in told.message and told.upstream is None


async def _refused(client_type, app, url, call) -> UpstreamError:
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app)) as http:
        with pytest.raises(UpstreamError) as raised:
            await call(client_type(url, "k", http))
    return raised.value


@pytest.mark.parametrize("client_type, app, fault, call", [
    (ContentClient, content.app, "keyinvalid", lambda c: c.count_tokens("m", {"contents": [
        {"role": "user", "parts": [{"text": "#fault=keyinvalid"}]}]})),
    (ContentClient, content.app, "precondition", lambda c: c.generate_content("m", {"contents": [
        {"role": "user", "parts": [{"text": "#fault=precondition"}]}]})),
    (ChatClient, chat.app, "quota", lambda c: c.chat_completions({"model": "m", "messages": [
        {"role": "user", "content": "#fault=quota"}]})),
    (MessagesClient, messages.app, "credit", lambda c: c.messages({"model": "m", "max_tokens": 5, "messages": [
        {"role": "user", "content": "#fault=credit"}]})),
])
def test_the_text_simulators_answer_the_providers_account_refusals_and_the_clients_read_them(
        client_type, app, fault, call):
    error = asyncio.run(_refused(client_type, app, "http://sim", call))
    assert error.fault == ACCOUNT and "not a problem with your key" in error.shown


def test_a_gemini_quota_429_cools_the_channel_for_its_retry_info_delay():
    error = asyncio.run(_refused(ContentClient, content.app, "http://sim/account/exhausted",
                                 lambda c: c.generate_content("m", {"contents": [
                                     {"role": "user", "parts": [{"text": "hi"}]}]})))
    assert (error.status, error.fault, error.retry_after) == (429, CAPACITY, 17.0)


TASK_CASES = [
    # family adapter, simulator, its submit request, the fault, the status the provider sends
    (GammaAdapter(), gamma.app, {"input": {"prompt": "a cat #fault=arrearage"}, "parameters": {}}, 400),
    (DeltaAdapter(), delta.app, {"instances": [{"prompt": "a cat #fault=keyinvalid"}], "parameters": {}}, 400),
    (ZetaAdapter(), zeta.app, {"content": [{"type": "text", "text": "a cat #fault=overdue"}]}, 403),
    (AlphaAdapter(), alpha.app, {"operation": "text2video", "body": {"prompt": "a cat #fault=arrears"}}, 429),
]


@pytest.mark.parametrize("adapter, app, request_body, status", TASK_CASES,
                         ids=["gamma-Arrearage", "delta-API_KEY_INVALID", "zeta-AccountOverdueError", "alpha-1101"])
def test_a_task_submit_refused_for_the_channels_account_fails_over_and_cools_the_channel(
        book, adapter, app, request_body, status):
    key = "access|secret-of-at-least-32-bytes-long-enough" if isinstance(adapter, AlphaAdapter) else "k"
    catalog = two_channels("gamma", "http://sim", "http://sim", key)
    tried: list[str] = []

    def attempt(channel):
        tried.append(channel.name)
        with asgi_client(app) as http:
            if channel.name == "main":
                return task_adapter.submit(http, adapter, "http://sim", channel.api_key, "m", request_body)
            return "accepted elsewhere"

    # When the preferred channel's upstream refuses the account (before: a 400 or 429 that was
    # relayed as the client's, or retried every few seconds as a rate limit)
    answer, channel = first_success(catalog.candidates("m", ["gamma"]), attempt)
    # Then the submit goes to the other channel, and the refused one cools down for the maximum
    assert (answer, channel.name, tried) == ("accepted elsewhere", "spare", ["main", "spare"])
    assert_cooled_for_the_maximum(book) and book.of("main").last_status == status


def test_a_proxy_with_no_discord_account_left_is_the_channels_account():
    with asgi_client(imgtask.app) as http:
        response = http.post("http://sim/mj/submit/imagine", json={"prompt": "a cat #fault=noaccount"})
    with pytest.raises(UpstreamError) as raised:
        ImgtaskAdapter().parse_submit(response)
    assert raised.value.fault == ACCOUNT


def test_the_alert_names_an_account_fault_of_a_400(book, monkeypatch, capsys):
    import io

    from gateway import observability

    written = io.StringIO()
    monkeypatch.setattr(observability.logger.registered_handler, "stream", written)
    monkeypatch.delenv("POWERTOOLS_METRICS_DISABLED", raising=False)
    observability.begin("/v1beta/models/m:generateContent")
    # When a 400 the provider's table says is the account's cools a channel down
    book.failed("main", health.Failure.of(UpstreamError(400, "API key not valid", fault=ACCOUNT)))
    observability.flush()
    # Then the operator's alarm sees the credentials event, at error level, with the fault
    events = [json.loads(line) for line in written.getvalue().splitlines()]
    refused = next(e for e in events if e.get("event") == "channel_credentials_refused")
    assert (refused["level"], refused["last_status"], refused["last_fault"]) == ("ERROR", 400, ACCOUNT)
    # And a ChannelAccountRefused point for the channel, the metric an alarm watches
    points = [json.loads(line) for line in capsys.readouterr().out.splitlines() if "ChannelAccountRefused" in line]
    assert [(p["channel"], p["ChannelAccountRefused"]) for p in points] in ([("main", 1.0)], [("main", [1.0])])


def test_an_unpaid_account_answered_with_a_429_is_never_told_as_a_rate_limit():
    # Given every channel refused with Kling's 429 1101 (arrears) and OpenAI's 429 insufficient_quota
    failures: list = []

    class Channel:
        name = "c"

    for table, body in ((ALPHA, {"code": 1101, "message": "Account in arrears"}),
                        (CHAT, {"error": {"type": "insufficient_quota", "code": "insufficient_quota"}})):
        record_failure(Channel(), table.error(429, "refused", body), failures)
    # Then the client gets a 502 about the gateway's own account, not a 429 asking it to wait
    told = exhausted_error(failures)
    assert told.status == 502 and "not a problem with your key" in told.message and not told.headers
