"""Channels managed like data (`/api/channel/`, new-api's routes): the account function's handler
on API Gateway events, the emulator's accounts table and Secrets Manager, the text function over
real HTTP with the openai SDK, and a fake upstream that records the key it was sent.

The channels document is a file with one channel (`main`, serving m-small) and prices for m-small
and m-new: m-new is served only by what an operator adds."""

from __future__ import annotations

import json
import threading
from collections import Counter
from collections.abc import Iterator

import boto3
import openai
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from gateway.routing import channels
from gateway.settings import get_settings
from tests.conftest import serve_asgi, use_environment
from tests.integration.test_console_api import call

KEY = "sk-upstream-secret-key-1234"
OTHER_KEY = "sk-upstream-other-key-9876"
OP = {"Authorization": "demo-access-token", "X-Api-User": "1"}


class Upstream:
    """OpenAI-style upstreams by name (`{url}/{name}/v1/...`): each records the keys it was sent."""

    def __init__(self) -> None:
        self.keys: dict[str, list[str]] = {}
        self.probes: Counter[str] = Counter()
        self._lock = threading.Lock()
        self.app = Starlette(routes=[Route("/{name}/v1/chat/completions", self._chat, methods=["POST"]),
                                     Route("/{name}/v1/models", self._models, methods=["GET"])])

    def _saw(self, request: Request) -> str:
        name = request.path_params["name"]
        with self._lock:
            self.keys.setdefault(name, []).append(request.headers.get("authorization", ""))
        return name

    async def _chat(self, request: Request) -> JSONResponse:
        name = self._saw(request)
        body = await request.json()
        return JSONResponse({"id": "chatcmpl-1", "object": "chat.completion", "created": 1, "model": body["model"],
                             "choices": [{"index": 0, "finish_reason": "stop",
                                          "message": {"role": "assistant", "content": f"served by {name}"}}],
                             "usage": {"prompt_tokens": 5, "completion_tokens": 3, "total_tokens": 8}})

    async def _models(self, request: Request) -> JSONResponse:
        name = self._saw(request)
        with self._lock:
            self.probes[name] += 1
        if name == "busy":  # an upstream out of capacity (OpenAI's 429 body)
            return JSONResponse({"error": {"message": "Rate limit reached", "type": "requests",
                                           "code": "rate_limit_exceeded"}}, status_code=429)
        return JSONResponse({"object": "list", "data": [{"id": "up-1", "object": "model"},
                                                         {"id": "up-2", "object": "model"}]})


@pytest.fixture(scope="module")
def fake() -> Iterator[tuple[Upstream, str]]:
    upstream = Upstream()
    with serve_asgi(upstream.app) as url:
        yield upstream, url


def document(url: str, *extra: str) -> str:
    return ("channels:\n"
            f"  - {{name: main, protocol: chat, base_url: '{url}/main', api_key: sk-main-document-key,"
            " models: [m-small]}\n" + "".join(extra) +
            "prices:\n  m-small: {input_per_million: 1, output_per_million: 2}\n"
            "  m-new: {input_per_million: 1, output_per_million: 2}\n")


@pytest.fixture
def upstream(fake, store, demo, tmp_path) -> Iterator[Upstream]:
    upstream, url = fake
    upstream.keys.clear()
    upstream.probes.clear()
    path = tmp_path / "channels.yaml"
    path.write_text(document(url))
    saved = use_environment(GATEWAY_CHANNELS_FILE=str(path), GATEWAY_SIMULATOR_URL=None,
                            GATEWAY_CHANNELS_PARAMETER=None)
    upstream.url, upstream.document = url, path  # type: ignore[attr-defined]
    yield upstream
    use_environment(**saved)


def new_channel(upstream, **changes):
    name = changes.get("name") or "added"
    return {"name": "added", "protocol": "chat", "base_url": f"{upstream.url}/{name}", "key": KEY,
            "models": ["m-new"], "priority": 0, "weight": 1, **changes}


def api(fn, ctx, method, path, body=None, query=None, headers=OP):
    resource = path
    if path.startswith("/api/channel/test/"):
        resource = "/api/channel/test/{id}"
    elif path.startswith("/api/channel/") and path != "/api/channel/":
        resource = "/api/channel/{id}"
    return call(fn, ctx, method, path.rstrip("/") if resource == path else path, headers=headers, body=body,
                query=query, resource=resource.rstrip("/"))[:2]


def ask(gateway_url, key, model="m-new"):
    client = openai.OpenAI(base_url=f"{gateway_url}/v1", api_key=key, max_retries=0)
    return client.chat.completions.create(model=model, messages=[{"role": "user", "content": "hi"}]
                                          ).choices[0].message.content


def test_an_operator_adds_a_channel_that_serves_at_once_and_its_key_is_never_shown_again(
        upstream, account_fn, lambda_context, gateway_url, demo, aws):
    # Given m-new served by no channel
    with pytest.raises(openai.NotFoundError):
        ask(gateway_url, demo["key"])
    # When the operator adds a channel for it, with its upstream key
    status, made = api(account_fn, lambda_context, "POST", "/api/channel/", new_channel(upstream))
    assert status == 200 and made["success"] is True
    row = made["data"]
    assert row["id"] >= 1 and row["name"] == "added" and row["source"] == "api" and row["read_only"] is False
    assert row["key_last4"] == "1234" and row["key"] == "" and row["state"] == "healthy" and row["status"] == 1
    # Then the key is in Secrets Manager, one secret for the channel, and nowhere in the table
    secret = boto3.client("secretsmanager").get_secret_value(
        SecretId=f"{get_settings().channel_key_prefix}{row['id']}")
    assert secret["SecretString"] == KEY
    scanned = boto3.client("dynamodb").scan(TableName=get_settings().accounts_table)["Items"]
    assert KEY not in str(scanned) and any(item["pk"] == {"S": "CHANNEL"} for item in scanned)
    # And no answer ever shows it again: the list, the channel, its test
    status, listed = api(account_fn, lambda_context, "GET", "/api/channel/")
    assert status == 200 and KEY not in str(listed)
    assert [(r["name"], r["source"], r["id"]) for r in listed["data"]["items"]] == [
        ("main", "document", None), ("added", "api", row["id"])]
    assert listed["data"]["total"] == 2 and listed["data"]["page"] == 1
    status, one = api(account_fn, lambda_context, "GET", f"/api/channel/{row['id']}")
    assert status == 200 and one["data"]["key_last4"] == "1234" and KEY not in str(one)
    # And its test sends one free call with the key and shows the latency and the answer
    status, tested = api(account_fn, lambda_context, "GET", f"/api/channel/test/{row['id']}")
    assert status == 200 and tested["success"] is True and KEY not in str(tested)
    assert tested["data"]["ok"] is True and isinstance(tested["data"]["latency_ms"], int)
    assert "2 models (up-1, up-2)" in tested["data"]["answer"] and isinstance(tested["time"], float)
    assert upstream.probes["added"] == 1 and upstream.keys["added"] == [f"Bearer {KEY}"]
    # And the list keeps the test's response time beside its time (new-api's response time column)
    _, listed = api(account_fn, lambda_context, "GET", "/api/channel/")
    added = next(r for r in listed["data"]["items"] if r["name"] == "added")
    assert added["last_probe_ms"] == tested["data"]["latency_ms"] > 0 and added["last_probe"] == "ok"
    assert next(r for r in listed["data"]["items"] if r["name"] == "main")["last_probe_ms"] is None  # never tested
    # And a request for m-new is served through it, with its key, on the next request
    assert ask(gateway_url, demo["key"]) == "served by added"
    assert upstream.keys["added"][-1] == f"Bearer {KEY}"
    # And the model list shows it
    models = openai.OpenAI(base_url=f"{gateway_url}/v1", api_key=demo["key"]).models.list()
    assert "m-new" in {m.id for m in models.data}


def test_a_failed_test_counts_against_the_channel_and_says_the_status_once(
        upstream, account_fn, lambda_context, demo, aws):
    # Given a healthy added channel whose upstream answers 429
    _, made = api(account_fn, lambda_context, "POST", "/api/channel/", new_channel(upstream, name="busy"))
    assert made["data"]["state"] == "healthy" and made["data"]["failures"] == 0
    # When the operator tests it
    status, tested = api(account_fn, lambda_context, "GET", f"/api/channel/test/{made['data']['id']}")
    # Then the test failed, saying the status once, and the channel's health counts the failure
    assert status == 200 and tested["success"] is False and tested["data"]["ok"] is False
    said = tested["data"]["answer"]
    assert said.startswith("the upstream answered 429") and said.count("429") == 1, said
    _, row = api(account_fn, lambda_context, "GET", f"/api/channel/{made['data']['id']}")
    assert row["data"]["failures"] == 1 or row["data"]["state"] == "cooling", row
    assert row["data"]["last_error"] and row["data"]["last_probe"] == row["data"]["last_error"]
    assert row["data"]["last_probe_at"] is not None


@pytest.mark.parametrize("changes,field", [
    ({"protocol": "smtp"}, "protocol"),
    ({"base_url": "ftp://upstream.example"}, "base_url"),
    ({"base_url": "https://user:pass@upstream.example"}, "base_url"),
    ({"models": []}, "models"),
    ({"models": ["ok", ""]}, "models"),
    ({"weight": -1}, "weight"),
    ({"priority": "high"}, "priority"),
    ({"name": "1234"}, "name"),
    ({"name": "has space"}, "name"),
    ({"name": ""}, "name"),
    ({"key": None}, "key"),
    ({"key": "sk with space"}, "key"),
    ({"key": ""}, "key"),
    ({"api_key": "sk-x"}, "api_key"),
    ({"api_key_env": "X"}, "api_key_env"),
    ({"status": 2}, "status"),
    ({"id": 7}, "id"),
    ({"colour": "blue"}, "colour"),
    ({"model_map": {"m-new": ""}}, "model_map"),
    ({"poll_hosts": ["http://x/y"]}, "poll_hosts"),
])
def test_a_bad_channel_is_a_400_naming_the_field_and_changes_nothing(upstream, account_fn, lambda_context,
                                                                    changes, field):
    body = {k: v for k, v in new_channel(upstream, **changes).items() if v is not None}
    status, refused = api(account_fn, lambda_context, "POST", "/api/channel/", body)
    assert status == 400 and refused["success"] is False and refused["message"].startswith(f"{field}"), refused
    assert KEY not in refused["message"]
    _, listed = api(account_fn, lambda_context, "GET", "/api/channel/")
    assert [r["name"] for r in listed["data"]["items"]] == ["main"]
    assert boto3.client("secretsmanager").list_secrets()["SecretList"] == []


def test_a_channel_with_several_bad_fields_is_one_400_listing_every_fields_problem(upstream, account_fn,
                                                                                   lambda_context):
    # The console's Add channel shows each at its field at once (issue 45, 6); the message and its
    # first problem are the same, for a script that reads only the message.
    body = new_channel(upstream, name="has space", base_url="ftp://upstream.example", models=[], weight=-1)
    status, refused = api(account_fn, lambda_context, "POST", "/api/channel/", body)
    assert status == 400 and refused["success"] is False
    assert [p["param"] for p in refused["errors"]] == ["name", "base_url", "models", "weight"]
    assert all(p["message"].startswith(f"{p['param']}: ") for p in refused["errors"])
    assert refused["message"] == refused["errors"][0]["message"] + " (and 3 more problems)"
    assert KEY not in json.dumps(refused)


def test_an_edit_keeps_the_key_unless_given_and_a_new_key_is_used_at_once(upstream, account_fn, lambda_context,
                                                                         gateway_url, demo):
    _, made = api(account_fn, lambda_context, "POST", "/api/channel/", new_channel(upstream))
    ident = made["data"]["id"]
    # An edit of other fields keeps the key
    status, edited = api(account_fn, lambda_context, "PUT", "/api/channel/", {"id": ident, "weight": 5,
                                                                              "model_map": {"m-new": "up-1"}})
    assert status == 200 and edited["data"]["weight"] == 5 and edited["data"]["key_last4"] == "1234"
    assert edited["data"]["models"] == ["m-new"] and edited["data"]["model_map"] == {"m-new": "up-1"}
    assert ask(gateway_url, demo["key"]) == "served by added" and upstream.keys["added"][-1] == f"Bearer {KEY}"
    # A new key replaces it: shown by its last four, sent from the next request on
    status, rekeyed = api(account_fn, lambda_context, "PUT", "/api/channel/", {"id": ident, "key": OTHER_KEY})
    assert status == 200 and rekeyed["data"]["key_last4"] == "9876" and OTHER_KEY not in str(rekeyed)
    assert ask(gateway_url, demo["key"]) == "served by added" and upstream.keys["added"][-1] == f"Bearer {OTHER_KEY}"
    # A bad change is refused whole, naming the field: nothing changed
    for body, field in (({"id": ident, "weight": -2}, "weight"), ({"id": ident, "name": "renamed"}, "name"),
                        ({"id": ident, "key": "bad key"}, "key"), ({"id": "x"}, "id"), ({"weight": 1}, "id"),
                        ({"id": ident, "status": 3}, "status"), ({"id": ident, "api_key": "k"}, "api_key"),
                        ({"id": ident, "protocol": "nope"}, "protocol")):
        status, refused = api(account_fn, lambda_context, "PUT", "/api/channel/", body)
        assert status == 400 and refused["message"].startswith(field), (body, refused)
    status, missing = api(account_fn, lambda_context, "PUT", "/api/channel/", {"id": 999, "weight": 1})
    assert status == 404 and missing["message"].startswith("id")
    _, one = api(account_fn, lambda_context, "GET", f"/api/channel/{ident}")
    assert one["data"]["weight"] == 5 and one["data"]["key_last4"] == "9876" and one["data"]["name"] == "added"


def test_a_new_key_whose_channel_write_loses_a_race_is_never_used(upstream, account_fn, lambda_context,
                                                                   gateway_url, demo, monkeypatch):
    from gateway.routing.channel_store import ChannelStore, StaleChannel

    _, made = api(account_fn, lambda_context, "POST", "/api/channel/", new_channel(upstream))

    def lost(self, record):
        raise StaleChannel(record.name)

    # Given another operator's change landing between the read and the write of this one
    monkeypatch.setattr(ChannelStore, "replace", lost)
    status, refused = api(account_fn, lambda_context, "PUT", "/api/channel/", {"id": made["data"]["id"],
                                                                               "key": OTHER_KEY})
    assert status == 409 and refused["message"].startswith("id")
    monkeypatch.undo()
    # Then the key the channel's record names is still the one sent, on every instance
    channels.reset_catalog()
    assert ask(gateway_url, demo["key"]) == "served by added" and upstream.keys["added"][-1] == f"Bearer {KEY}"
    _, one = api(account_fn, lambda_context, "GET", f"/api/channel/{made['data']['id']}")
    assert one["data"]["key_last4"] == "1234"


def test_disable_enable_and_delete(upstream, account_fn, lambda_context, gateway_url, demo):
    _, made = api(account_fn, lambda_context, "POST", "/api/channel/", new_channel(upstream))
    ident = made["data"]["id"]
    assert ask(gateway_url, demo["key"]) == "served by added"
    # Disabled: never tried, the model has no channel left
    status, off = api(account_fn, lambda_context, "PUT", "/api/channel/", {"id": ident, "status": 2})
    assert status == 200 and off["data"]["status"] == 2 and off["data"]["state"] == "disabled"
    with pytest.raises(openai.InternalServerError) as refused:
        ask(gateway_url, demo["key"])
    assert refused.value.status_code == 503
    # Enabled again: served
    status, on = api(account_fn, lambda_context, "PUT", "/api/channel/", {"id": ident, "status": 1})
    assert status == 200 and on["data"]["state"] == "healthy"
    assert ask(gateway_url, demo["key"]) == "served by added"
    # Deleted: gone from the list, the model not served, the key's secret deleted
    status, gone = api(account_fn, lambda_context, "DELETE", f"/api/channel/{ident}")
    assert status == 200 and gone["data"] == {"id": ident, "name": "added"}
    _, listed = api(account_fn, lambda_context, "GET", "/api/channel/")
    assert [r["name"] for r in listed["data"]["items"]] == ["main"]
    with pytest.raises(openai.NotFoundError):
        ask(gateway_url, demo["key"])
    described = boto3.client("secretsmanager").describe_secret(
        SecretId=f"{get_settings().channel_key_prefix}{ident}")
    assert described.get("DeletedDate")
    assert api(account_fn, lambda_context, "DELETE", f"/api/channel/{ident}")[0] == 404
    assert api(account_fn, lambda_context, "GET", f"/api/channel/{ident}")[0] == 404
    # A new channel of the same name takes a new id (a deleted secret is never reused)
    _, again = api(account_fn, lambda_context, "POST", "/api/channel/", new_channel(upstream))
    assert again["data"]["id"] > ident and ask(gateway_url, demo["key"]) == "served by added"


def test_the_documents_channels_are_read_only_and_the_document_wins_a_name(upstream, account_fn, lambda_context,
                                                                          gateway_url, demo):
    _, listed = api(account_fn, lambda_context, "GET", "/api/channel/")
    main = listed["data"]["items"][0]
    assert main["source"] == "document" and main["read_only"] is True and main["key_last4"] == "-key"
    assert "sk-main-document-key" not in str(listed)
    # Its name cannot be added; it is not edited nor deleted here ...
    status, taken = api(account_fn, lambda_context, "POST", "/api/channel/", new_channel(upstream, name="main"))
    assert status == 409 and taken["message"].startswith("name")
    status, refused = api(account_fn, lambda_context, "PUT", "/api/channel/", {"name": "main", "weight": 3})
    assert status == 400 and "channels document" in refused["message"]
    status, refused = api(account_fn, lambda_context, "DELETE", "/api/channel/main")
    assert status == 400 and "channels document" in refused["message"]
    # ... but it is disabled, enabled and tested by its name
    status, off = api(account_fn, lambda_context, "PUT", "/api/channel/", {"name": "main", "status": 2})
    assert status == 200 and off["data"]["state"] == "disabled"
    with pytest.raises(openai.InternalServerError):
        ask(gateway_url, demo["key"], "m-small")
    assert api(account_fn, lambda_context, "PUT", "/api/channel/", {"name": "main", "status": 1})[0] == 200
    status, tested = api(account_fn, lambda_context, "GET", "/api/channel/test/main")
    assert status == 200 and tested["data"]["ok"] is True and tested["data"]["id"] is None
    assert upstream.keys["main"] == ["Bearer sk-main-document-key"]
    # An added channel the document later names: the document's is in force, the added one shadowed
    _, made = api(account_fn, lambda_context, "POST", "/api/channel/", new_channel(upstream, name="later"))
    assert ask(gateway_url, demo["key"]) == "served by later"
    upstream.document.write_text(document(upstream.url, "  - {name: later, protocol: chat, base_url: "
                                          f"'{upstream.url}/document-later', api_key: sk-doc, models: [m-new]}}\n"))
    use_environment(GATEWAY_CHANNELS_FILE=str(upstream.document))
    assert ask(gateway_url, demo["key"]) == "served by document-later"
    _, listed = api(account_fn, lambda_context, "GET", "/api/channel/")
    rows = [(r["name"], r["source"], r["shadowed"]) for r in listed["data"]["items"]]
    assert rows == [("main", "document", False), ("later", "document", False), ("later", "api", True)]
    # The shadowed one is still the operator's to delete, by its id
    assert api(account_fn, lambda_context, "DELETE", f"/api/channel/{made['data']['id']}")[0] == 200


def test_a_change_reaches_another_instance_within_the_refresh(upstream, account_fn, lambda_context, monkeypatch):
    catalog = channels.get_catalog()
    assert catalog.named("added") is None
    # Another instance adds a channel: this one's catalog is as it read it ...
    now = [1000.0]
    monkeypatch.setattr(channels.time, "monotonic", lambda: now[0])
    channels.reread_added()
    assert channels.get_catalog().named("added") is None
    from gateway.routing import channel_keys
    from gateway.routing.channel_store import ChannelRecord, ChannelStore

    store = ChannelStore()
    ident = store.next_id()
    spec = {k: v for k, v in new_channel(upstream).items() if k not in ("name", "key")}
    ref, version = channel_keys.store().put(ident, KEY, new=True)
    store.create(ChannelRecord(id=ident, name="added", spec=spec, key_ref=ref, key_last4="1234", key_version=version))
    now[0] += get_settings().channels_refresh_seconds - 1
    assert channels.get_catalog().named("added") is None
    # ... until its refresh is due
    now[0] += 1
    assert channels.get_catalog().named("added").api_key == KEY


def test_paging_and_only_an_operator(upstream, account_fn, lambda_context, accounts):
    for n in range(3):
        api(account_fn, lambda_context, "POST", "/api/channel/", new_channel(upstream, name=f"c{n}"))
    status, page = api(account_fn, lambda_context, "GET", "/api/channel/", query={"p": "2", "page_size": "2"})
    assert status == 200 and [r["name"] for r in page["data"]["items"]] == ["c1", "c2"]
    assert page["data"]["total"] == 4
    for query in ({"p": "0"}, {"page_size": "101"}, {"p": "x"}):
        status, refused = api(account_fn, lambda_context, "GET", "/api/channel/", query=query)
        assert status == 400 and refused["message"].startswith(next(iter(query))), query
    accounts.users.create_user(username="ann", access_token="ann-access-token")
    ann = {"Authorization": "ann-access-token", "X-Api-User": "2"}
    for method, path in (("GET", "/api/channel/"), ("POST", "/api/channel/"), ("PUT", "/api/channel/"),
                         ("GET", "/api/channel/2"), ("DELETE", "/api/channel/2"), ("GET", "/api/channel/test/2")):
        status, _ = api(account_fn, lambda_context, method, path, body=new_channel(upstream), headers=ann)
        assert status == 403, (method, path)


def test_the_local_runner_keeps_an_added_channels_key_across_a_restart(upstream, account_fn, lambda_context, aws,
                                                                       tmp_path):
    from gateway_local.state import State

    _, made = api(account_fn, lambda_context, "POST", "/api/channel/", new_channel(upstream))
    name = f"{get_settings().channel_key_prefix}{made['data']['id']}"
    state = State(aws, tmp_path, log=lambda line: None)
    assert state.save()
    assert KEY in (tmp_path / "emulator.jsonl").read_text()  # the local state only: never a deployed file
    # A restart: the emulator starts empty and loads the saved state
    aws.reset()
    assert State(aws, tmp_path, log=lambda line: None).load()["secrets"] == 1
    assert boto3.client("secretsmanager").get_secret_value(SecretId=name)["SecretString"] == KEY
    channels.reset_catalog()
    assert channels.get_catalog().named("added").api_key == KEY


def test_a_failing_test_says_what_the_upstream_did_without_the_key(upstream, account_fn, lambda_context):
    # An upstream that does not answer at all (nothing listens on port 9)
    _, made = api(account_fn, lambda_context, "POST", "/api/channel/",
                  new_channel(upstream, base_url="http://127.0.0.1:9"))
    status, tested = api(account_fn, lambda_context, "GET", f"/api/channel/test/{made['data']['id']}")
    # new-api's answer: 200, success false, the message, the time taken
    assert status == 200 and tested["success"] is False and isinstance(tested["time"], float)
    assert tested["message"].startswith("the channel failed its test") and tested["data"]["ok"] is False
    assert KEY not in str(tested)
    _, one = api(account_fn, lambda_context, "GET", f"/api/channel/{made['data']['id']}")
    assert one["data"]["last_probe"] and one["data"]["last_probe"] != "ok"
    assert api(account_fn, lambda_context, "GET", "/api/channel/test/999")[0] == 404
    assert api(account_fn, lambda_context, "GET", "/api/channel/test/nobody")[0] == 404


def test_a_document_channel_whose_key_this_function_does_not_read_is_not_tested_with_none(
        upstream, account_fn, lambda_context, monkeypatch):
    # The account function reads the document without the channel keys (GATEWAY_CHANNEL_KEYS_NEEDED=false)
    monkeypatch.setenv("SECRET_MAIN_KEY", "sk-from-the-environment")
    upstream.document.write_text(document(upstream.url).replace("api_key: sk-main-document-key",
                                                                "api_key_env: SECRET_MAIN_KEY"))
    use_environment(GATEWAY_CHANNELS_FILE=str(upstream.document), GATEWAY_CHANNEL_KEYS_NEEDED="false")
    try:
        status, refused = api(account_fn, lambda_context, "GET", "/api/channel/test/main")
        assert status == 409 and refused["message"].startswith("id:") and upstream.probes["main"] == 0
        # Added channels' keys are the account function's own to read: their test works there
        _, made = api(account_fn, lambda_context, "POST", "/api/channel/", new_channel(upstream))
        _, tested = api(account_fn, lambda_context, "GET", f"/api/channel/test/{made['data']['id']}")
        assert tested["success"] is True and upstream.keys["added"] == [f"Bearer {KEY}"]
    finally:
        use_environment(GATEWAY_CHANNEL_KEYS_NEEDED=None)


# --- issue 43: the stored key never follows a new host; bounds DynamoDB can store -----------------------------

def test_a_new_host_without_a_new_key_is_refused_and_the_key_stays_where_it_was(upstream, account_fn,
                                                                              lambda_context):
    status, made = api(account_fn, lambda_context, "POST", "/api/channel/", new_channel(upstream))
    assert status == 200, made
    ident = made["data"]["id"]
    status, body = api(account_fn, lambda_context, "PUT", "/api/channel/",
                       {"id": ident, "base_url": "http://attacker.example:8080/v1"})
    assert status == 400 and "base_url" in body["message"], body
    assert api(account_fn, lambda_context, "GET", f"/api/channel/{ident}")[1]["data"]["base_url"] == \
        f"{upstream.url}/added"
    # Another path on the same host keeps the key; a new host with its own key is a plain edit.
    assert api(account_fn, lambda_context, "PUT", "/api/channel/", {"id": ident, "base_url": f"{upstream.url}/x"}
               )[0] == 200
    status, body = api(account_fn, lambda_context, "PUT", "/api/channel/",
                       {"id": ident, "base_url": "http://other.example:8080/v1", "key": OTHER_KEY})
    assert status == 200 and body["data"]["key_last4"] == "9876", body


@pytest.mark.parametrize("field", ["priority", "weight"])
@pytest.mark.parametrize("value", [1e200, 10**40, -(10**40)])
def test_a_channels_priority_and_weight_stay_within_what_dynamodb_stores(upstream, account_fn, lambda_context,
                                                                          field, value):
    status, body = api(account_fn, lambda_context, "POST", "/api/channel/", new_channel(upstream, **{field: value}))
    assert status == 400 and field in body["message"], body
