"""Vertex AI channels (issue 30, item 7): a service-account key file as the channel's key, an
OAuth access token minted from it by google-auth at a local simulator of Google's token endpoint
(over real HTTP, signed with an RSA key made here), cached until shortly before it expires and
refreshed once for a burst; the regional addresses; the content and delta protocols on Vertex."""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Iterator

import httpx
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from gateway.routing.catalog import Catalog
from gateway.routing.channel import ChannelsConfigError
from gateway.tasks import adapter as task_adapter
from gateway.tasks.families import family_of
from gateway.tasks.families.delta.adapter import VertexDeltaAdapter
from gateway.upstreams import vertex as vertex_module
from gateway.upstreams.clients import client_for
from gateway.upstreams.content import VertexContentClient
from gateway.upstreams.errors import ACCOUNT, UpstreamError
from gateway.upstreams.vertex import TOKEN_MARGIN, TokenCache, VertexSite
from gateway_local.simulators import vertex as simulator
from tests.conftest import serve_asgi
from tests.unit.health_support import Clock

EMAIL = "gateway@test-project.iam.gserviceaccount.com"


def new_key() -> tuple[str, str]:
    """A fresh RSA key: (private PKCS#8 PEM, public PEM)."""
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    private = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                serialization.NoEncryption()).decode()
    public = key.public_key().public_bytes(serialization.Encoding.PEM,
                                           serialization.PublicFormat.SubjectPublicKeyInfo).decode()
    return private, public


@pytest.fixture(scope="module")
def keys() -> tuple[str, str]:
    return new_key()


@pytest.fixture(scope="module")
def sim_url() -> Iterator[str]:
    with serve_asgi(simulator.app) as url:
        yield url


@pytest.fixture
def account(keys, sim_url, monkeypatch) -> str:
    """The service-account key file (JSON) of a registered account, its token_uri the simulator's."""
    private, public = keys
    monkeypatch.setitem(simulator.SERVICE_ACCOUNTS, EMAIL, public)
    simulator.TOKEN_REQUESTS.clear()
    return json.dumps({"type": "service_account", "project_id": "test-project", "private_key_id": "k1",
                       "private_key": private, "client_email": EMAIL, "client_id": "1",
                       "token_uri": f"{sim_url}/token"})


@pytest.fixture
def cache(monkeypatch) -> TokenCache:
    cache = TokenCache(clock=Clock())
    monkeypatch.setattr(vertex_module, "_tokens", cache)
    return cache


def test_the_token_is_minted_from_the_key_file_cached_and_refreshed_before_it_expires(account, cache):
    # When a token is asked for, google-auth signs a grant and the token endpoint answers it
    first = cache.token(account)
    assert first.startswith("ya29.") and simulator.TOKEN_REQUESTS == [EMAIL]
    # And until shortly before its hour is up, the same token is handed out without asking again
    cache.clock.advance(3599 - TOKEN_MARGIN - 5)
    assert cache.token(account) == first and len(simulator.TOKEN_REQUESTS) == 1
    # Then within the margin a new one is minted, once
    cache.clock.advance(10)
    second = cache.token(account)
    assert second != first and len(simulator.TOKEN_REQUESTS) == 2 and cache.token(account) == second


def test_a_burst_after_expiry_refreshes_once(account, cache):
    cache.token(account)
    cache.clock.advance(3600)
    start = threading.Barrier(12)
    got: list[str] = []

    def ask() -> None:
        start.wait()
        got.append(cache.token(account))

    threads = [threading.Thread(target=ask) for _ in range(12)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    # Then twelve callers shared one refresh: one token request for the burst, one token for all
    assert len(simulator.TOKEN_REQUESTS) == 2 and len(set(got)) == 1 and cache.refreshes == 2


def test_a_key_google_no_longer_knows_is_the_channels_account(account, cache, monkeypatch):
    # Given the key deleted in Google Cloud: its signature no longer verifies
    _, other_public = new_key()
    monkeypatch.setitem(simulator.SERVICE_ACCOUNTS, EMAIL, other_public)
    with pytest.raises(UpstreamError) as raised:
        cache.token(account)
    # Then it is the channel's account (failed over, cooled down, the operator told), never the client's
    assert raised.value.fault == ACCOUNT and "invalid_grant" in raised.value.message
    assert "not a problem with your key" in raised.value.shown


def test_an_unreachable_token_endpoint_is_retryable(account, cache):
    broken = json.loads(account) | {"token_uri": "http://127.0.0.1:9/token"}
    with pytest.raises(UpstreamError) as raised:
        cache.token(json.dumps(broken))
    assert raised.value.retryable and raised.value.fault != ACCOUNT


# --- the channels document ---------------------------------------------------------------------------

def vertex_channel(account: str, **fields) -> dict:
    return {"name": "vx", "protocol": "content", "api_key": account, "models": ["gemini-2.5-pro"],
            "vertex": {"region": "europe-west4"}} | fields


def test_a_vertex_channel_gets_its_regional_host_and_its_key_files_project(account):
    channel = Catalog.from_document({"channels": [vertex_channel(account)]}).channels[0]
    assert channel.base_url == "https://europe-west4-aiplatform.googleapis.com"
    assert channel.vertex == VertexSite("test-project", "europe-west4")
    assert channel.vertex.model_path("gemini-2.5-pro", "generateContent") == (
        "/v1/projects/test-project/locations/europe-west4/publishers/google/models/gemini-2.5-pro:generateContent")
    worldwide = Catalog.from_document({"channels": [vertex_channel(account, vertex={
        "project": "other-project", "region": "global"})]}).channels[0]
    assert worldwide.base_url == "https://aiplatform.googleapis.com" and worldwide.vertex.project == "other-project"


@pytest.mark.parametrize("fields, words", [
    ({"api_key": "AIza-not-a-key-file"}, "service-account key file"),
    ({"api_key": json.dumps({"type": "authorized_user"})}, "service_account"),
    ({"vertex": {"region": "us-central1/../x"}}, "Vertex AI location"),
    ({"protocol": "chat"}, "only the content and delta protocols"),
])
def test_a_bad_vertex_channel_fails_the_start_naming_the_rule(account, fields, words):
    with pytest.raises(ChannelsConfigError) as raised:
        Catalog.from_document({"channels": [vertex_channel(account, **fields)]})
    assert words in str(raised.value)


# --- content on Vertex -------------------------------------------------------------------------------

def test_content_on_vertex_generates_streams_and_counts_with_a_bearer_token(account, cache, sim_url):
    channel = Catalog.from_document({"channels": [vertex_channel(account, base_url=sim_url)]}).channels[0]
    body = {"contents": [{"role": "user", "parts": [{"text": "hi"}]}]}

    async def scenario():
        async with httpx.AsyncClient() as http:
            client = client_for(channel, http)
            assert isinstance(client, VertexContentClient)
            answer = await client.generate_content("gemini-2.5-pro", body)
            async with client.stream_generate_content("gemini-2.5-pro", body) as events:
                streamed = [event.json() async for event in events]
            counted = await client.count_tokens("gemini-2.5-pro", body)
            await client.probe()
            return answer, streamed, counted

    answer, streamed, counted = asyncio.run(scenario())
    assert answer["candidates"][0]["content"]["parts"][0]["text"] == "You said: hi"
    assert streamed[-1]["candidates"][0]["finishReason"] == "STOP" and counted["totalTokens"] > 0
    assert len(simulator.TOKEN_REQUESTS) == 1  # one token for all four calls


def test_without_a_valid_token_vertex_answers_unauthenticated(sim_url):
    path = VertexSite("p1", "us-central1").model_path("gemini-2.5-pro", "generateContent")
    answer = httpx.post(sim_url + path, headers={"authorization": "Bearer ya29.forged"}, json={})
    assert answer.status_code == 401 and answer.json()["error"]["status"] == "UNAUTHENTICATED"


# --- delta on Vertex ---------------------------------------------------------------------------------

def test_veo_on_vertex_starts_then_fetches_the_operation_and_reads_the_inline_video(account, cache, sim_url,
                                                                                   monkeypatch):
    clock = Clock()
    monkeypatch.setattr(simulator, "clock", clock)
    channel = Catalog.from_document({"channels": [vertex_channel(account, protocol="delta", base_url=sim_url,
                                                                 models=["veo-3.0-generate-001"])]}).channels[0]
    adapter = family_of("delta").adapter_for(channel)
    assert isinstance(adapter, VertexDeltaAdapter)
    request = {"instances": [{"prompt": "a cat"}], "parameters": {"durationSeconds": 8, "sampleCount": 2}}
    with httpx.Client() as http:
        name = task_adapter.submit(http, adapter, channel.base_url, channel.api_key, "veo-3.0-generate-001", request)
        assert name.startswith("projects/test-project/locations/europe-west4/publishers/google/models/"
                               "veo-3.0-generate-001/operations/")
        running = task_adapter.poll(http, adapter, channel.base_url, channel.api_key, name)
        clock.advance(60)
        done = task_adapter.poll(http, adapter, channel.base_url, channel.api_key, name)
    assert running.status == "in_progress"
    # Then the videos Vertex sent inline are handed to the engine to keep, and kept out of the record
    assert done.status == "succeeded" and [r.mime_type for r in done.inline_results] == ["video/mp4"] * 2
    assert done.inline_results[0].data == simulator.MP4_BYTES
    assert done.raw["response"]["videos"][0]["bytesBase64Encoded"].endswith("base64 characters>")


def test_a_vertex_operation_name_of_another_shape_is_never_put_in_a_url():
    adapter = VertexDeltaAdapter(VertexSite("p1", "us-central1"))
    with pytest.raises(ValueError):
        adapter.build_poll("https://x", "{}", "models/veo/operations/../../secrets")


def test_a_token_count_is_sent_in_vertexs_own_shape(account, cache, sim_url):
    # Given a count in the Gemini API's shape (what the messages dialect's count is converted to)
    channel = Catalog.from_document({"channels": [vertex_channel(account, base_url=sim_url)]}).channels[0]
    gemini_shaped = {"generateContentRequest": {"model": "models/gemini-2.5-pro", "contents": [
        {"role": "user", "parts": [{"text": "count me"}]}], "toolConfig": {}}}
    path = VertexSite("test-project", "europe-west4").model_path("gemini-2.5-pro", "countTokens")
    # Then Vertex itself refuses that shape (its CountTokensRequest has no generateContentRequest)
    refused = httpx.post(sim_url + path, json=gemini_shaped,
                         headers={"authorization": f"Bearer {cache.token(account)}"})
    assert refused.status_code == 400 and '"generateContentRequest"' in refused.json()["error"]["message"]

    # And the Vertex client unpacks it, so the count is answered
    async def scenario():
        async with httpx.AsyncClient() as http:
            return await client_for(channel, http).count_tokens("gemini-2.5-pro", gemini_shaped)

    assert asyncio.run(scenario())["totalTokens"] > 0


def test_the_probes_of_cooling_vertex_channels_reach_vertex_with_a_token(account, cache, sim_url, monkeypatch):
    from gateway.tasks import probes

    catalog = Catalog.from_document({"channels": [
        vertex_channel(account, base_url=sim_url),
        vertex_channel(account, name="veo", protocol="delta", base_url=sim_url, models=["veo-3.0-generate-001"])]})
    with httpx.Client() as http:
        # A working channel's probe: a token, then an answer (a 404 for the probe's operation is one)
        assert [probes.probe(channel, sender=http) for channel in catalog.channels] == [None, None]
        assert len(simulator.TOKEN_REQUESTS) == 1
        # A channel whose key Google no longer knows: the probe says so, as the channel's account
        _, other_public = new_key()
        monkeypatch.setitem(simulator.SERVICE_ACCOUNTS, EMAIL, other_public)
        monkeypatch.setattr(vertex_module, "_tokens", TokenCache(clock=Clock()))
        failure = probes.probe(catalog.channels[1], sender=http)
    assert failure is not None and failure.account
