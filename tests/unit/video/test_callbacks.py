"""Where a callback may go and how it is signed (no sockets: name resolution is faked)."""

import socket

import httpx
import pytest

from gateway.settings import reload_settings
from gateway.tasks import callbacks


@pytest.fixture(autouse=True)
def deployed_defaults(monkeypatch):
    for name in ("GATEWAY_CALLBACK_ALLOW_PRIVATE", "GATEWAY_CALLBACK_SECRET"):
        monkeypatch.delenv(name, raising=False)
    reload_settings()
    yield
    reload_settings()


def resolving_to(monkeypatch, *addresses):
    def fake(host, port, *args, **kwargs):
        return [(socket.AF_INET6 if ":" in a else socket.AF_INET, socket.SOCK_STREAM, 6, "", (a, port))
                for a in addresses]
    monkeypatch.setattr(socket, "getaddrinfo", fake)


@pytest.mark.parametrize("url", [
    "http://127.0.0.1/hook", "http://127.8.9.10:8080/hook", "http://10.0.0.7/hook", "http://172.16.3.4/hook",
    "http://192.168.1.1/hook", "http://169.254.169.254/latest/meta-data/", "http://[::1]:9000/hook",
    "http://[fd00:ec2::254]/latest", "http://[::ffff:127.0.0.1]/hook", "http://0.0.0.0/hook",
    "http://100.64.0.1/hook", "http://localhost:8000/hook", "http://api.localhost/hook",
])
def test_by_default_private_loopback_link_local_and_metadata_addresses_are_refused(url):
    with pytest.raises(callbacks.UnsafeCallback):
        callbacks.check_url(url)
    with pytest.raises(callbacks.UnsafeCallback):
        callbacks.check_url(url, resolve=False)


@pytest.mark.parametrize("url", ["ftp://example.com/hook", "file:///etc/passwd", "gopher://example.com",
                                 "javascript:alert(1)", "//example.com/hook", "http:///nohost"])
def test_only_http_and_https_urls_are_called(url):
    with pytest.raises(callbacks.UnsafeCallback, match="http or https"):
        callbacks.check_url(url)


def test_a_name_that_resolves_to_a_private_address_is_refused(monkeypatch):
    resolving_to(monkeypatch, "93.184.216.34", "10.1.2.3")
    with pytest.raises(callbacks.UnsafeCallback, match="resolves to a private"):
        callbacks.check_url("https://hooks.example.com/x")


def test_a_name_that_resolves_to_public_addresses_is_allowed(monkeypatch):
    resolving_to(monkeypatch, "93.184.216.34", "2606:2800:220:1:248:1893:25c8:1946")
    callbacks.check_url("https://hooks.example.com/x")


def test_the_allow_private_setting_lets_tests_and_the_local_runner_call_this_machine(monkeypatch):
    monkeypatch.setenv("GATEWAY_CALLBACK_ALLOW_PRIVATE", "1")
    reload_settings()
    callbacks.check_url("http://127.0.0.1:8000/hook")
    with pytest.raises(callbacks.UnsafeCallback):
        callbacks.check_url("ftp://127.0.0.1/hook")


def test_the_signature_is_hmac_sha256_of_timestamp_dot_body_and_verifies():
    import hashlib
    import hmac

    body = b'{"task_id":"task_1","task_status":"succeeded"}'
    header = callbacks.signature(body, "s3cret", 1_700_000_000)
    expected = hmac.new(b"s3cret", b"1700000000." + body, hashlib.sha256).hexdigest()
    assert header == f"t=1700000000,v1={expected}"
    assert callbacks.verify(body, header, "s3cret", now=1_700_000_100)
    assert not callbacks.verify(body, header, "other", now=1_700_000_100)
    assert not callbacks.verify(body, header, "s3cret", now=1_700_001_000)  # too old: a replay
    assert not callbacks.verify(body, "garbage", "s3cret")


def test_a_callback_is_never_sent_unsigned(monkeypatch):
    resolving_to(monkeypatch, "93.184.216.34")
    client = httpx.Client(transport=httpx.MockTransport(lambda request: httpx.Response(200)))
    with pytest.raises(callbacks.CallbackFailed, match="GATEWAY_CALLBACK_SECRET"):
        callbacks.deliver(client, "https://hooks.example.com/x", b"{}", task_id="task_1")


def test_a_delivery_carries_the_signature_and_a_non_2xx_is_a_failure(monkeypatch):
    monkeypatch.setenv("GATEWAY_CALLBACK_SECRET", "s3cret")
    reload_settings()
    resolving_to(monkeypatch, "93.184.216.34")
    seen = []

    def answer(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(200 if len(seen) == 1 else 302, headers={"Location": "http://10.0.0.1/"})

    client = httpx.Client(transport=httpx.MockTransport(answer))
    assert callbacks.deliver(client, "https://hooks.example.com/x", b'{"a":1}', task_id="task_1") == 200
    assert callbacks.verify(b'{"a":1}', seen[0].headers["x-gateway-signature"], "s3cret")
    # A redirect is not followed (it could point anywhere): it is a failed delivery
    with pytest.raises(callbacks.CallbackFailed, match="302"):
        callbacks.deliver(client, "https://hooks.example.com/x", b"{}", task_id="task_1")
    assert len(seen) == 2
