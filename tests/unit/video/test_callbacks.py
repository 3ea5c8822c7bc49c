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


# --- IPv6 forms of private addresses, and DNS pinning (issue 9, item 7) --------------------------

@pytest.mark.parametrize("address", [
    "64:ff9b::a9fe:a9fe",  # NAT64 of the metadata address
    "64:ff9b::7f00:1", "64:ff9b::a00:1",  # NAT64 of loopback and 10/8
    "64:ff9b:1::a9fe:a9fe",  # local-use NAT64
    "::a9fe:a9fe", "::127.0.0.1", "::10.0.0.1",  # IPv4-compatible
    "::ffff:169.254.169.254", "::ffff:0:a9fe:a9fe",  # IPv4-mapped, and the SIIT translated form
    "2002:a9fe:a9fe::1", "2002:7f00:1::",  # 6to4 around a private v4
    "2001:0:4136:e378:8000:63bf:56fe:56fe",  # Teredo
    "fe80::1%eth0", "fd00:ec2::254", "::", "ff02::1",
])
def test_the_ipv6_forms_of_private_and_metadata_addresses_are_refused(address):
    # Given a literal address in the URL, and the same address as what a name resolves to
    with pytest.raises(callbacks.UnsafeCallback):
        callbacks.check_url(f"http://[{address.replace('%', '%25')}]/hook", resolve=False)


@pytest.mark.parametrize("address", ["64:ff9b::a9fe:a9fe", "::a9fe:a9fe", "::ffff:10.0.0.1", "2002:c0a8:101::1"])
def test_a_name_resolving_to_an_ipv6_form_of_a_private_address_is_refused(monkeypatch, address):
    resolving_to(monkeypatch, address)
    with pytest.raises(callbacks.UnsafeCallback):
        callbacks.check_url("https://hooks.example.com/x")


@pytest.mark.parametrize("address", ["64:ff9b::808:808", "::ffff:8.8.8.8", "2606:4700::1111"])
def test_public_addresses_in_ipv6_forms_are_allowed(address):
    callbacks.check_url(f"http://[{address}]/hook", resolve=False)


def test_a_delivery_connects_to_the_address_it_checked_with_the_original_host_and_sni(monkeypatch):
    # Given a name that first resolves to a public address, then (rebinding) to the metadata one
    monkeypatch.setenv("GATEWAY_CALLBACK_SECRET", "s3cret")
    reload_settings()
    answers = [["93.184.216.34"], ["169.254.169.254"]]
    asked = []

    def rebinding(host, port, *args, **kwargs):
        asked.append(host)
        addresses = answers[min(len(asked), 2) - 1]
        return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", (a, port)) for a in addresses]

    monkeypatch.setattr(socket, "getaddrinfo", rebinding)
    seen = []
    client = httpx.Client(transport=httpx.MockTransport(lambda request: seen.append(request) or httpx.Response(204)))
    # When the callback is delivered
    assert callbacks.deliver(client, "https://hooks.example.com:8443/x?a=1", b"{}", task_id="task_1") == 204
    # Then the name was resolved once and the connection went to that checked address,
    # carrying the original Host header and TLS server name
    assert asked == ["hooks.example.com"]
    request = seen[0]
    assert request.url.host == "93.184.216.34" and request.url.port == 8443
    assert request.url.raw_path == b"/x?a=1"
    assert request.headers["host"] == "hooks.example.com:8443"
    assert request.extensions["sni_hostname"] == "hooks.example.com"


def test_a_delivery_to_a_name_tries_each_checked_address_until_one_connects(monkeypatch):
    monkeypatch.setenv("GATEWAY_CALLBACK_SECRET", "s3cret")
    reload_settings()
    resolving_to(monkeypatch, "2606:2800:220:1:248:1893:25c8:1946", "93.184.216.34")
    tried = []

    def answer(request: httpx.Request) -> httpx.Response:
        tried.append(request.url.host)
        if ":" in request.url.host:
            raise httpx.ConnectError("no IPv6 route")
        return httpx.Response(200)

    client = httpx.Client(transport=httpx.MockTransport(answer))
    assert callbacks.deliver(client, "http://hooks.example.com/x", b"{}", task_id="task_1") == 200
    assert tried == ["2606:2800:220:1:248:1893:25c8:1946", "93.184.216.34"]


def test_a_pinned_delivery_reaches_a_real_receiver_with_its_own_host_header(monkeypatch):
    # Given a receiver on this machine, reached by a name (private addresses allowed, as locally)
    from starlette.applications import Starlette
    from starlette.responses import PlainTextResponse
    from starlette.routing import Route

    from tests.conftest import serve_asgi

    monkeypatch.setenv("GATEWAY_CALLBACK_SECRET", "s3cret")
    monkeypatch.setenv("GATEWAY_CALLBACK_ALLOW_PRIVATE", "1")
    reload_settings()
    hosts = []

    async def hook(request):
        hosts.append(request.headers["host"])
        return PlainTextResponse("ok")

    with serve_asgi(Starlette(routes=[Route("/hook", hook, methods=["POST"])])) as url:
        port = url.rsplit(":", 1)[1]
        resolving_to(monkeypatch, "127.0.0.1")
        with httpx.Client() as client:
            assert callbacks.deliver(client, f"http://receiver.test:{port}/hook", b"{}", task_id="task_1") == 200
    assert hosts == [f"receiver.test:{port}"]
