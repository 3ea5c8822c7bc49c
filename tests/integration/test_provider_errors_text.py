"""The text function against the simulators answering as the providers do (issue 30): a revoked
Gemini key's 400 fails over and is never told to the client as its own key; a Vertex AI content
channel serves every client dialect with a token minted from its service account."""

from __future__ import annotations

import json

import httpx
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from gateway.errors import UpstreamFailed
from gateway.upstreams import vertex as vertex_module
from gateway.upstreams.vertex import TokenCache
from gateway_local.server import simulators_app
from gateway_local.simulators import vertex as vertex_simulator
from tests.integration.test_text import body_for, inbound, ledger, quota, run
from tests.unit.video.conftest import SyncASGITransport


def content_channel(name: str, base: str, priority: int = 0) -> dict:
    return {"name": name, "protocol": "content", "base_url": base, "api_key": "AIza-upstream", "models": ["*"],
            "priority": priority}


@pytest.mark.parametrize("stream", [False, True])
def test_a_revoked_gemini_key_fails_over_to_the_next_channel(demo, catalog, stream):
    # Given the preferred content channel's key revoked: Google answers it with a 400
    catalog([content_channel("revoked", "http://sim/content/account/keyinvalid", 1),
             content_channel("working", "http://sim/content", 0)])
    request = inbound("content", demo["key"], stream=stream)
    # When a request comes (before: the 400 was relayed, "API key not valid", and nothing failed over)
    status, _, data = run("content", request)
    # Then the other channel answers it
    assert status == 200 and b"You" in data
    assert ledger(request.request_id)["detail"]["channel"] == "working"


def test_when_every_channel_refuses_its_key_the_client_hears_it_is_not_its_own(demo, catalog):
    catalog([content_channel("revoked", "http://sim/content/account/keyinvalid")])
    before = quota()
    request = inbound("chat", demo["key"])
    with pytest.raises(UpstreamFailed) as caught:
        run("chat", request)
    assert caught.value.status == 502 and "not a problem with your key" in caught.value.message
    assert "API key not valid" not in caught.value.message and caught.value.upstream is None
    assert quota() == before and ledger(request.request_id)["outcome"] == "refunded"


@pytest.fixture
def service_account(monkeypatch) -> str:
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    private = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                serialization.NoEncryption()).decode()
    public = key.public_key().public_bytes(serialization.Encoding.PEM,
                                           serialization.PublicFormat.SubjectPublicKeyInfo).decode()
    email = "text@vertex-project.iam.gserviceaccount.com"
    monkeypatch.setitem(vertex_simulator.SERVICE_ACCOUNTS, email, public)
    vertex_simulator.TOKEN_REQUESTS.clear()
    # The token exchange reaches the same simulators (mounted at /vertex) as every upstream call here.
    monkeypatch.setattr(vertex_module, "_tokens",
                        TokenCache(http=httpx.Client(transport=SyncASGITransport(simulators_app()))))
    return json.dumps({"type": "service_account", "project_id": "vertex-project", "private_key": private,
                       "client_email": email, "token_uri": "http://sim/vertex/token"})


@pytest.mark.parametrize("dialect", ["content", "chat", "messages", "responses"])
@pytest.mark.parametrize("stream", [False, True])
def test_a_vertex_content_channel_serves_every_dialect(demo, catalog, service_account, dialect, stream):
    catalog([{"name": "vertex", "protocol": "content", "base_url": "http://sim/vertex", "api_key": service_account,
              "models": ["*"], "vertex": {"region": "us-central1"}}])
    request = inbound(dialect, demo["key"], body=body_for(dialect, "hi cat", stream), stream=stream)
    status, _, data = run(dialect, request)
    assert status == 200 and b"cat" in data
    assert ledger(request.request_id)["detail"]["channel"] == "vertex"
    assert vertex_simulator.TOKEN_REQUESTS == ["text@vertex-project.iam.gserviceaccount.com"]


@pytest.fixture(scope="module")
def over_http(aws):
    """The text function and the simulators, each over real HTTP on 127.0.0.1."""
    from tests.conftest import load_function, serve_asgi

    with serve_asgi(simulators_app()) as simulators, serve_asgi(load_function("text").app) as gateway:
        yield simulators, gateway


def test_the_google_genai_sdk_is_served_past_a_revoked_key_and_never_told_it(demo, over_http, tmp_path):
    from google import genai
    from google.genai import errors as genai_errors
    from google.genai import types

    from tests.conftest import use_environment

    simulators, gateway = over_http

    def channels(*entries: dict) -> dict:
        path = tmp_path / "channels.json"
        path.write_text(json.dumps({"channels": list(entries)}))
        return use_environment(GATEWAY_CHANNELS_FILE=str(path), GATEWAY_SIMULATOR_URL=None,
                               GATEWAY_CHANNELS_PARAMETER=None)

    client = genai.Client(api_key=demo["key"], http_options=types.HttpOptions(base_url=gateway, api_version="v1beta"))
    saved = channels(content_channel("revoked", f"{simulators}/content/account/keyinvalid", 1),
                     content_channel("working", f"{simulators}/content", 0))
    try:
        # Given the preferred channel's Gemini key revoked, the SDK's call is answered by the other
        answer = client.models.generate_content(model="m-small", contents="hi cat")
        assert "cat" in answer.text
        # And with only the revoked channel left, the SDK raises a server error that is not about its key
        channels(content_channel("revoked", f"{simulators}/content/account/keyinvalid"))
        with pytest.raises(genai_errors.ServerError) as raised:
            client.models.generate_content(model="m-small", contents="hi cat")
        assert raised.value.code == 502 and "not a problem with your key" in str(raised.value)
        assert "API key not valid" not in str(raised.value)
    finally:
        use_environment(**saved)
