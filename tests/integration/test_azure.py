"""Azure OpenAI channels (issue 40): the text function against the Azure simulator, in process and
through the openai SDK over HTTP. Chat (streamed or not), embeddings and responses are served on
Azure's addresses with its key; a content-filter 400 is the client's (no failover, nothing
cooled); a service principal's Entra ID token is minted once for a burst; Azure's filter
annotations never reach a client as a chunk it cannot read."""

from __future__ import annotations

import json
from collections.abc import Iterator

import httpx
import openai
import pytest

from gateway.errors import InvalidRequest
from gateway.routing.health import COOLING, HEALTHY, DynamoHealthStore
from gateway.upstreams import azure as azure_module
from gateway.upstreams.azure import EntraTokenCache
from gateway_local.server import simulators_app
from gateway_local.simulators import azure as azure_simulator
from tests.conftest import load_function, serve_asgi, use_environment
from tests.integration.test_text import body_for, events_of, inbound, ledger, quota, run
from tests.unit.video.conftest import SyncASGITransport


def azure_channel(name: str = "azure", base: str = "http://sim/azure", priority: int = 0, **extra) -> dict:
    return {"name": name, "protocol": "azure", "base_url": base, "api_key": "0123456789abcdef0123456789abcdef",
            "models": ["*"], "priority": priority, **extra}


def chat_channel(name: str = "chat", priority: int = 0) -> dict:
    return {"name": name, "protocol": "chat", "base_url": "http://sim/chat", "api_key": "sk-upstream",
            "models": ["*"], "priority": priority}


@pytest.mark.parametrize("dialect", ["chat", "messages", "responses", "content"])
@pytest.mark.parametrize("stream", [False, True])
def test_an_azure_channel_serves_every_dialect(demo, catalog, dialect, stream):
    catalog([azure_channel(model_map={"m-small": "my-gpt-deployment"})])
    request = inbound(dialect, demo["key"], body=body_for(dialect, "hi cat", stream), stream=stream)
    status, _, data = run(dialect, request)
    assert status == 200 and b"cat" in data
    assert b"my-gpt-deployment" not in data  # the client sees its own model name
    entry = ledger(request.request_id)
    assert entry["outcome"] == "settled" and entry["detail"]["channel"] == "azure"
    if stream and dialect == "chat":
        # Azure's first chunk (no choices, an empty id: the prompt's filter results) never reaches a client
        chunks = [d for _, d in events_of(data) if isinstance(d, dict)]
        assert chunks and all(c["id"] and c["choices"] for c in chunks)


def test_a_content_filter_400_is_relayed_never_failed_over_and_cools_nothing(demo, catalog):
    # Given an azure channel preferred over a chat channel
    catalog([azure_channel("filtered", priority=1), chat_channel(priority=0)])
    before = quota()
    for stream in (False, True):
        # When Azure's content filter refuses the prompt
        request = inbound("chat", demo["key"], "tell me #fault=content_filter", stream=stream)
        with pytest.raises(InvalidRequest) as caught:
            run("chat", request)
        # Then the client hears it, the other channel is never asked, nothing is charged
        assert caught.value.status == 400 and "content management policy" in caught.value.message
        assert caught.value.upstream["error"]["code"] == "content_filter"
        entry = ledger(request.request_id)
        assert entry["outcome"] == "refunded" and entry["detail"].get("channel") in (None, "filtered")
    assert quota() == before
    # And the channel is as healthy as before: no cooldown, no failure counted
    health = DynamoHealthStore().get("filtered")
    assert health.state == HEALTHY and not health.failures
    # While a refused key on the same channel is failed over and cools it
    request = inbound("chat", demo["key"], "hi #fault=keyinvalid")
    status, _, data = run("chat", request)
    assert status == 200 and ledger(request.request_id)["detail"]["channel"] == "chat"
    assert DynamoHealthStore().get("filtered").state == COOLING


def test_the_deployment_and_api_version_are_the_channels(demo, catalog):
    # A deployment the resource lacks is the operator's mapping: failed over
    catalog([azure_channel("unmapped", model_map={"m-small": "missing-deployment"}, priority=1),
             azure_channel("dated", api_version="2025-04-01-preview")])
    request = inbound("chat", demo["key"], "hi cat")
    status, _, data = run("chat", request)
    assert status == 200 and ledger(request.request_id)["detail"]["channel"] == "dated"


@pytest.fixture
def principal(monkeypatch) -> str:
    """A service principal the simulator knows, whose token exchange reaches it in process."""
    monkeypatch.setitem(azure_simulator.PRINCIPALS, "app-1", "s3cret~value")
    azure_simulator.TOKEN_REQUESTS.clear()
    monkeypatch.setattr(azure_module, "_tokens",
                        EntraTokenCache(http=httpx.Client(transport=SyncASGITransport(simulators_app()))))
    return json.dumps({"tenant": "tenant-1", "appId": "app-1", "password": "s3cret~value",
                       "authority": "http://sim/azure"})


def test_a_service_principal_is_exchanged_for_one_token_for_a_burst(demo, catalog, principal):
    catalog([azure_channel(api_key=principal)])
    for dialect, stream in (("chat", False), ("chat", True), ("responses", False), ("messages", True)):
        request = inbound(dialect, demo["key"], body=body_for(dialect, "hi cat", stream), stream=stream)
        status, _, data = run(dialect, request)
        assert status == 200 and b"cat" in data
    assert azure_simulator.TOKEN_REQUESTS == ["app-1"]


def test_a_refused_client_secret_is_the_channels_account(demo, catalog, principal):
    wrong = json.dumps({**json.loads(principal), "password": "old-secret"})
    catalog([azure_channel("rotated", api_key=wrong, priority=1), chat_channel()])
    request = inbound("chat", demo["key"], "hi cat")
    status, _, data = run("chat", request)
    assert status == 200 and ledger(request.request_id)["detail"]["channel"] == "chat"
    assert DynamoHealthStore().get("rotated").state == COOLING
    assert "old-secret" not in json.dumps(DynamoHealthStore().get("rotated").view())


# ---- through the openai SDK, over HTTP ----------------------------------------------------------------

@pytest.fixture(scope="module")
def over_http(aws) -> Iterator[tuple[str, str]]:
    with serve_asgi(simulators_app()) as simulators, serve_asgi(load_function("text").app) as gateway:
        yield simulators, gateway


@pytest.fixture
def azure_only(over_http, tmp_path) -> Iterator[openai.OpenAI]:
    simulators, gateway = over_http
    path = tmp_path / "channels.json"
    path.write_text(json.dumps({"channels": [
        azure_channel("azure-sdk", base=f"{simulators}/azure/", model_map={"m-small": "gpt-4o-deployment",
                                                              "m-embed": "embedding-deployment"})]}))
    saved = use_environment(GATEWAY_CHANNELS_FILE=str(path), GATEWAY_SIMULATOR_URL=None,
                            GATEWAY_CHANNELS_PARAMETER=None)
    yield openai.OpenAI(base_url=f"{gateway}/v1", api_key=_demo_key(), max_retries=0)
    use_environment(**saved)


def _demo_key() -> str:
    return "sk-" + "d" * 48  # the demo fixture's key


def test_the_openai_sdk_gets_chat_streamed_and_not_from_an_azure_channel(demo, azure_only):
    answer = azure_only.chat.completions.create(model="m-small", messages=[{"role": "user", "content": "hi cat"}])
    assert "cat" in answer.choices[0].message.content and answer.model == "m-small"
    assert answer.usage.completion_tokens > 0
    chunks = list(azure_only.chat.completions.create(
        model="m-small", messages=[{"role": "user", "content": "hi cat"}], stream=True,
        stream_options={"include_usage": True}))
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert "cat" in text and all(c.id for c in chunks) and chunks[-1].usage.completion_tokens > 0
    assert all(c.choices for c in chunks[:-1])  # only the usage chunk has none


def test_the_openai_sdk_gets_embeddings_from_an_azure_channel(demo, azure_only):
    answer = azure_only.embeddings.create(model="m-embed", input=["one", "two"])
    assert [d.index for d in answer.data] == [0, 1] and len(answer.data[0].embedding) > 0
    assert answer.model == "m-embed" and answer.usage.prompt_tokens > 0


def test_the_openai_sdk_gets_responses_streamed_and_not_from_an_azure_channel(demo, azure_only):
    answer = azure_only.responses.create(model="m-small", input="hi cat")
    assert "cat" in answer.output_text and answer.model == "m-small"
    with azure_only.responses.stream(model="m-small", input="hi cat") as stream:
        final = stream.get_final_response()
    assert "cat" in final.output_text and final.usage.output_tokens > 0


def test_the_openai_sdk_hears_a_content_filter_refusal_as_its_own_400(demo, azure_only):
    with pytest.raises(openai.BadRequestError) as raised:
        azure_only.chat.completions.create(model="m-small",
                                           messages=[{"role": "user", "content": "x #fault=content_filter"}])
    assert raised.value.status_code == 400 and "content management policy" in str(raised.value)
    assert DynamoHealthStore().get("azure-sdk").state == HEALTHY


def test_microsofts_own_sdk_client_is_answered_by_the_simulator_as_by_azure(over_http):
    # The simulator's addresses are those openai-python's AzureOpenAI sends (deployments, the
    # api-version query, api-key), and the v1 route the plain client reaches with the key
    simulators, _ = over_http
    azure = openai.AzureOpenAI(azure_endpoint=f"{simulators}/azure", api_key="k" * 32, api_version="2024-10-21",
                               max_retries=0)
    answer = azure.chat.completions.create(model="my-deployment", messages=[{"role": "user", "content": "hi cat"}])
    assert "cat" in answer.choices[0].message.content and answer.prompt_filter_results
    chunks = list(azure.chat.completions.create(model="my-deployment", stream=True,
                                                messages=[{"role": "user", "content": "hi cat"}]))
    assert chunks[0].choices == [] and chunks[0].id == ""  # Azure's first chunk, as the gateway meets it
    assert "cat" in "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert len(azure.embeddings.create(model="my-embedding", input="x").data) == 1
    with pytest.raises(openai.NotFoundError):  # the Responses API is not under /deployments/
        azure.responses.create(model="my-deployment", input="hi")
    v1 = openai.OpenAI(base_url=f"{simulators}/azure/openai/v1/", api_key="k" * 32, max_retries=0)
    assert "cat" in v1.responses.create(model="my-deployment", input="hi cat").output_text
    bearer = openai.AzureOpenAI(azure_endpoint=f"{simulators}/azure", azure_ad_token="k" * 32,
                                api_version="2024-10-21", max_retries=0)
    with pytest.raises(openai.AuthenticationError):  # a key as a bearer, on a deployment route
        bearer.chat.completions.create(model="d", messages=[{"role": "user", "content": "x"}])
