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
