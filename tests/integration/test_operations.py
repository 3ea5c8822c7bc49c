"""What an operator relies on: routes behind a custom domain's base path, metric dimensions only
from known models, the operational events the alarms watch."""

import json

import pytest

from gateway import observability
from gateway.admission import billing
from tests.conftest import api_event, load_function, use_environment


def emf_documents(text: str) -> list[dict]:
    return [json.loads(line) for line in text.splitlines() if line.startswith("{") and "_aws" in line]


def test_a_route_behind_a_custom_domain_base_path_is_served(demo, lambda_context):
    # Given a custom domain mapping /ai to the API (the event's path then starts with it)
    saved = use_environment(GATEWAY_BASE_PATH="/ai")
    try:
        account = load_function("account")
        event = api_event("GET", "/ai/v1/dashboard/billing/subscription", resource="/v1/dashboard/billing/subscription",
                          headers={"Authorization": f"Bearer {demo['key']}"})
        # When a client calls a route under it
        answer = account.lambda_handler(event, lambda_context)
    finally:
        use_environment(**saved)
    # Then the route answers, as without the base path
    assert answer["statusCode"] == 200, answer["body"]


def test_an_unknown_model_never_becomes_a_metric_dimension(demo, catalog, capsys, monkeypatch):
    import anyio

    from gateway.api import text
    from gateway.errors import NotFound
    from tests.integration.test_text import channel, inbound

    # Given a channel that serves one model
    monkeypatch.delenv("POWERTOOLS_METRICS_DISABLED", raising=False)
    catalog([channel("chat", models=["m-small"])])
    observability.begin("/v1/chat/completions")
    capsys.readouterr()
    # When a client names a model nobody serves (any string passes the chat schema)
    request = inbound("chat", demo["key"], body={"model": "random-name-7f3a", "messages": [
        {"role": "user", "content": "hi"}]})
    with pytest.raises(NotFound):
        anyio.run(text.chat_completions, request)
    observability.count_answer(404, "not_found")
    observability.flush()
    # Then its metrics carry no model dimension from it (a random name would mint a metric)
    documents = emf_documents(capsys.readouterr().out)
    assert documents and all(d.get("model") == observability.NONE for d in documents)
    assert "random-name-7f3a" not in json.dumps(documents)


def test_a_stale_hold_refund_is_counted_for_its_alarm(demo, accounts, capsys, monkeypatch):
    monkeypatch.delenv("POWERTOOLS_METRICS_DISABLED", raising=False)
    principal = __import__("gateway.auth", fromlist=["authenticate"]).authenticate(
        {"authorization": f"Bearer {demo['key']}"}, {})
    reservation = billing.reserve(principal, 100, model="m-small", route="test", reservation_id="stale-1",
                                  hold_seconds=1)
    observability.begin("-")
    capsys.readouterr()
    counts = billing.sweep_stale(now=reservation.hold_until + 3600)
    observability.flush()
    assert counts["refunded"] == 1
    (document,) = [d for d in emf_documents(capsys.readouterr().out) if "StaleHoldsRefunded" in d]
    assert document["StaleHoldsRefunded"] in (1, [1]) and "route" not in document and "model" not in document


@pytest.mark.parametrize("name", ["TransactionConflicts", "AccountBusy"])
def test_the_alarms_read_the_names_the_gateway_writes(name):
    from tests.deploy_support import translated

    alarm = translated()["Resources"]["TransactionConflictAlarm"]["Properties"]
    assert any(f"SUM({name})" in m.get("Expression", "") for m in alarm["Metrics"])
