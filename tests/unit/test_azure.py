"""The azure protocol's pieces (issue 40): its keys, addresses, errors, filter chunks and Entra ID
tokens; the Azure simulator's rules."""

from __future__ import annotations

import asyncio
import json
import threading

import httpx
import pytest

from gateway.routing.catalog import Catalog
from gateway.routing.channel import ChannelsConfigError
from gateway.sse import SSEEvent
from gateway.upstreams.azure import (
    DEFAULT_API_VERSION,
    ERRORS,
    AzureClient,
    EntraTokenCache,
    ServicePrincipal,
    _annotation_only,
    service_principal,
)
from gateway.upstreams.errors import ACCOUNT, CAPACITY, CLIENT, UPSTREAM, UpstreamError
from gateway.upstreams.tokens import TOKEN_MARGIN
from gateway_local.simulators import azure as simulator
from tests.unit.health_support import Clock
from tests.unit.video.conftest import SyncASGITransport

# ---- keys -----------------------------------------------------------------------------------------------


def test_a_key_is_an_api_key_or_a_service_principal_in_one_of_two_forms():
    assert service_principal("0123456789abcdef0123456789abcdef") is None
    short = service_principal("tenant-1|app-1|se|cret")  # the secret keeps anything after the second bar
    assert short == ServicePrincipal("tenant-1", "app-1", "se|cret")
    assert short.token_url == "https://login.microsoftonline.com/tenant-1/oauth2/v2.0/token"
    printed = json.dumps({"appId": "app-1", "displayName": "gw", "password": "pw", "tenant": "tenant-1"})
    assert service_principal(printed) == ServicePrincipal("tenant-1", "app-1", "pw")
    sovereign = service_principal(json.dumps({"tenant": "t", "appId": "a", "password": "p",
                                              "authority": "https://login.microsoftonline.us"}))
    assert sovereign is not None and sovereign.token_url == "https://login.microsoftonline.us/t/oauth2/v2.0/token"
    assert "pw" not in repr(service_principal(printed))


@pytest.mark.parametrize("key,named", [
    ("tenant||secret", "tenant|client_id|client_secret"),
    ('{"tenant": "t", "appId": "a"}', "password"),
    ('{"tenant": "t"', "JSON key"),
    ('{"tenant": "t", "appId": "a", "password": "p", "authority": "ftp://x"}', "authority"),
])
def test_a_broken_service_principal_is_refused_when_the_document_is_read(key, named):
    assert_refused = pytest.raises(ChannelsConfigError, match=named)
    with assert_refused:
        Catalog.from_document({"channels": [{"name": "a", "protocol": "azure", "base_url": "https://r.openai.azure.com",
                                             "api_key": key, "models": ["*"]}]})


def test_api_version_is_an_azure_channels_and_a_dated_one():
    entry = {"name": "a", "protocol": "azure", "base_url": "https://r.openai.azure.com", "api_key": "k",
             "models": ["*"], "api_version": "2025-04-01-preview"}
    assert Catalog.from_document({"channels": [entry]}).channels[0].api_version == "2025-04-01-preview"
    assert Catalog.from_document({"channels": [{**entry, "api_version": None}]}).channels[0].api_version is None
    with pytest.raises(ChannelsConfigError, match="api_version"):
        Catalog.from_document({"channels": [{**entry, "api_version": "latest"}]})
    with pytest.raises(ChannelsConfigError, match="only an azure channel"):
        Catalog.from_document({"channels": [{**entry, "protocol": "chat"}]})


# ---- addresses ------------------------------------------------------------------------------------------

def _recording(answer: dict | bytes) -> tuple[list[httpx.Request], httpx.AsyncClient]:
    seen: list[httpx.Request] = []

    def handle(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        if isinstance(answer, bytes):
            return httpx.Response(200, content=answer, headers={"content-type": "text/event-stream"})
        return httpx.Response(200, json=answer)

    return seen, httpx.AsyncClient(transport=httpx.MockTransport(handle))


@pytest.mark.parametrize("base", ["https://r.openai.azure.com", "https://r.openai.azure.com/openai/",
                                  "https://r.openai.azure.com/openai/v1"])
def test_chat_and_embeddings_go_to_the_deployment_with_the_api_version_and_the_key_in_api_key(base):
    seen, http = _recording({"choices": []})
    client = AzureClient(base, "k" * 32, http)

    async def calls() -> None:
        await client.chat_completions({"model": "my deployment", "messages": [], "stream": False})
        await client.embeddings({"model": "emb", "input": "x"})
        await client.responses({"model": "my-deployment", "input": "x"})
        await client.probe()

    asyncio.run(calls())
    assert [str(r.url) for r in seen] == [
        f"https://r.openai.azure.com/openai/deployments/my%20deployment/chat/completions?api-version={DEFAULT_API_VERSION}",
        f"https://r.openai.azure.com/openai/deployments/emb/embeddings?api-version={DEFAULT_API_VERSION}",
        "https://r.openai.azure.com/openai/v1/responses",
        f"https://r.openai.azure.com/openai/models?api-version={DEFAULT_API_VERSION}"]
    assert all(r.headers["api-key"] == "k" * 32 and "authorization" not in r.headers for r in seen)
    assert json.loads(seen[2].content)["model"] == "my-deployment"


def test_a_stream_keeps_the_api_version_and_drops_the_filter_only_chunks():
    first = {"choices": [], "created": 0, "id": "", "model": "", "object": "",
             "prompt_filter_results": [{"prompt_index": 0, "content_filter_results": {}}]}
    text = {"id": "c1", "object": "chat.completion.chunk", "choices": [
        {"index": 0, "delta": {"content": "hi"}, "finish_reason": None, "content_filter_results": {}}]}
    late = {"id": "c1", "choices": [{"index": 0, "finish_reason": None,
                                     "content_filter_results": {"hate": {"filtered": False}},
                                     "content_filter_offsets": {"start_offset": 0, "end_offset": 2}}]}
    done = {"id": "c1", "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}
    body = b"".join(f"data: {json.dumps(c)}\n\n".encode() for c in (first, text, late, done)) + b"data: [DONE]\n\n"
    seen, http = _recording(body)
    client = AzureClient("https://r.openai.azure.com", "k", http, api_version="2025-04-01-preview")

    async def read() -> tuple[list, bool]:
        async with client.stream_chat_completions({"model": "d", "messages": []}) as events:
            return [event.json() async for event in events], events.completed

    got, completed = asyncio.run(read())
    assert got == [text, done] and completed
    assert str(seen[0].url).endswith("/openai/deployments/d/chat/completions?api-version=2025-04-01-preview")


@pytest.mark.parametrize("data,dropped", [
    ('{"choices":[],"id":"","prompt_filter_results":[]}', True),
    ('{"choices":[{"index":0,"content_filter_results":{}}],"id":"x"}', True),
    ('{"choices":[],"usage":{"prompt_tokens":1},"id":"x","prompt_filter_results":[]}', False),  # the usage chunk
    ('{"choices":[{"index":0,"delta":{"content":"a"},"content_filter_results":{}}],"id":"x"}', False),
    ('{"choices":[{"index":0,"finish_reason":"content_filter","content_filter_results":{}}],"id":"x"}', False),
    ('{"error":{"message":"filtered","code":"content_filter"}}', False),
    ("[DONE]", False),
])
def test_only_chunks_that_carry_nothing_but_filter_results_are_dropped(data, dropped):
    assert _annotation_only(SSEEvent(event=None, data=data)) is dropped


# ---- errors ---------------------------------------------------------------------------------------------

CONTENT_FILTER = {"error": {"message": "The response was filtered", "type": None, "param": "prompt",
                            "code": "content_filter", "status": 400,
                            "innererror": {"code": "ResponsibleAIPolicyViolation"}}}


@pytest.mark.parametrize("status,body,fault", [
    (400, CONTENT_FILTER, CLIENT),
    (403, {"error": {"code": "x", "innererror": {"code": "ResponsibleAIPolicyViolation"}}}, CLIENT),
    (429, {"error": {"code": "content_filter"}}, CLIENT),  # the filter's, whatever the status
    (404, {"error": {"code": "DeploymentNotFound", "message": "The API deployment for this resource does not exist."}},
     ACCOUNT),
    (401, {"error": {"code": "401", "message": "Access denied due to invalid subscription key"}}, ACCOUNT),
    (429, {"error": {"code": "429", "message": "Requests to the ChatCompletions_Create Operation have exceeded"}},
     CAPACITY),
    (500, {"error": {"code": "InternalServerError"}}, UPSTREAM),
])
def test_azure_errors_are_whose_fault_azure_says(status, body, fault):
    assert ERRORS.fault(status, body) == fault


# ---- Entra ID tokens ------------------------------------------------------------------------------------

@pytest.fixture
def entra(monkeypatch) -> EntraTokenCache:
    monkeypatch.setitem(simulator.PRINCIPALS, "app-1", "s3cret")
    simulator.TOKEN_REQUESTS.clear()
    return EntraTokenCache(clock=Clock(), http=httpx.Client(transport=SyncASGITransport(simulator.app),
                                                                    base_url="http://sim"))


KEY = json.dumps({"tenant": "t-1", "appId": "app-1", "password": "s3cret", "authority": "http://sim"})


def test_a_token_is_kept_until_near_its_expiry_and_refreshed_once_for_a_burst(entra):
    first = entra.token(KEY)
    entra.clock.advance(3599 - TOKEN_MARGIN - 5)
    assert entra.token(KEY) == first and simulator.TOKEN_REQUESTS == ["app-1"]
    entra.clock.advance(10)
    got: list[str] = []
    threads = [threading.Thread(target=lambda: got.append(entra.token(KEY))) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(set(got)) == 1 and got[0] != first and simulator.TOKEN_REQUESTS == ["app-1", "app-1"]


@pytest.mark.parametrize("key,words", [
    (json.dumps({"tenant": "t-1", "appId": "app-1", "password": "wrong", "authority": "http://sim"}), "AADSTS7000215"),
    (json.dumps({"tenant": "t-1", "appId": "app-9", "password": "s3cret", "authority": "http://sim"}), "AADSTS700016"),
])
def test_a_refused_principal_is_the_channels_account(entra, key, words):
    with pytest.raises(UpstreamError) as raised:
        entra.token(key)
    assert raised.value.fault == ACCOUNT and words in raised.value.message and "wrong" not in raised.value.message


def test_a_failing_token_endpoint_is_the_upstreams_and_may_be_retried():
    failing = httpx.Client(transport=httpx.MockTransport(lambda request: httpx.Response(503, json={})))
    with pytest.raises(UpstreamError) as raised:
        EntraTokenCache(http=failing).token("t|a|s")
    assert raised.value.fault == UPSTREAM and raised.value.retryable


# ---- the simulator's rules ------------------------------------------------------------------------------

@pytest.fixture
def resource() -> httpx.Client:
    return httpx.Client(transport=SyncASGITransport(simulator.app), base_url="http://sim")


CHAT = {"messages": [{"role": "user", "content": "hi"}]}


@pytest.mark.parametrize("path,headers,status", [
    ("/openai/deployments/d/chat/completions?api-version=2024-10-21", {"api-key": "k"}, 200),
    ("/openai/deployments/d/chat/completions", {"api-key": "k"}, 404),  # no api-version
    ("/openai/deployments/d/chat/completions?api-version=v9", {"api-key": "k"}, 400),
    ("/openai/deployments/d/chat/completions?api-version=2024-10-21", {"authorization": "Bearer k"}, 401),
    ("/openai/deployments/d/chat/completions?api-version=2024-10-21", {}, 401),
    ("/openai/deployments/missing-d/chat/completions?api-version=2024-10-21", {"api-key": "k"}, 404),
    ("/openai/deployments/d/responses?api-version=2024-10-21", {"api-key": "k"}, 404),  # v1 route only
    ("/v1/chat/completions", {"api-key": "k"}, 404),
])
def test_the_simulator_checks_the_key_the_version_and_the_deployment(resource, path, headers, status):
    assert resource.post(path, json=CHAT, headers=headers).status_code == status


def test_the_simulator_annotates_answers_and_refuses_a_filtered_prompt(resource):
    answer = resource.post("/openai/deployments/d/chat/completions?api-version=2024-10-21", json=CHAT,
                           headers={"api-key": "k"}).json()
    assert answer["prompt_filter_results"][0]["content_filter_results"]["hate"]["filtered"] is False
    assert "content_filter_results" in answer["choices"][0]
    filtered = resource.post("/openai/deployments/d/chat/completions?api-version=2024-10-21",
                             json={"messages": [{"role": "user", "content": "x #fault=content_filter"}]},
                             headers={"api-key": "k"})
    assert filtered.status_code == 400 and filtered.json()["error"]["code"] == "content_filter"
    streamed = resource.post("/openai/deployments/d/chat/completions?api-version=2024-10-21",
                             json={**CHAT, "stream": True}, headers={"api-key": "k"})
    chunks = [json.loads(line[6:]) for line in streamed.text.split("\n\n") if line.startswith("data: {")]
    assert chunks[0]["choices"] == [] and chunks[0]["id"] == "" and "prompt_filter_results" in chunks[0]
    assert all("content_filter_results" in c["choices"][0] for c in chunks[1:])
