"""Completion callbacks: where they may go, how they are signed, how one is delivered.

A callback goes only to an http(s) URL whose host resolves to public addresses (checked once,
then connected to as checked: see `deliver`): never to a
private, loopback, link-local (the cloud metadata service lives there), multicast or reserved
address, so a client cannot make the gateway probe its own network. Tests and the local runner
allow private addresses with `GATEWAY_CALLBACK_ALLOW_PRIVATE=1`; deployed it is off.

The body is signed: `X-Gateway-Signature: t=<unix seconds>,v1=<hex HMAC-SHA256 of "<t>.<body>">`
with the secret `GATEWAY_CALLBACK_SECRET`; a receiver recomputes it over the raw body and
rejects an old `t` (replays). Redirects are not followed.
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import socket
import time
from urllib.parse import SplitResult, urlsplit

import httpx

from gateway import signing_keys
from gateway.settings import get_settings
from gateway.tasks.adapter import Sender

SIGNATURE_HEADER = "X-Gateway-Signature"
TIMEOUT = httpx.Timeout(10.0, connect=3.0)


class UnsafeCallback(ValueError):
    """The URL may never be called: retrying cannot help."""


class CallbackFailed(Exception):
    """The receiver did not take the callback (connection error, timeout, non-2xx): retry later."""


# IPv6 ranges that carry an IPv4 address in their last 32 bits: NAT64 (RFC 6052), the
# deprecated IPv4-compatible form and SIIT's IPv4-translated form. A gateway in a network with
# NAT64 reaches the embedded IPv4 address through them, so they are judged by it.
_EMBEDDING_V4 = tuple(ipaddress.ip_network(n) for n in ("64:ff9b::/96", "::/96", "::ffff:0:0:0/96"))


def _embedded_v4(ip: ipaddress.IPv6Address) -> ipaddress.IPv4Address | None:
    if ip.ipv4_mapped is not None:
        return ip.ipv4_mapped
    if ip.sixtofour is not None:
        return ip.sixtofour
    if ip.teredo is not None:
        return ip.teredo[1]
    if any(ip in network for network in _EMBEDDING_V4):
        return ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
    return None


def _forbidden(address: str) -> bool:
    """Private, loopback, link-local, multicast, reserved, or an IPv6 form of one of those."""
    ip = ipaddress.ip_address(address.split("%", 1)[0])  # drop an IPv6 zone id
    if not ip.is_global or ip.is_multicast:
        return True
    if isinstance(ip, ipaddress.IPv6Address):
        embedded = _embedded_v4(ip)
        if embedded is not None:
            return not embedded.is_global or embedded.is_multicast
    return False


_FORBIDDEN_MESSAGE = "a private, loopback, link-local or reserved address (or an IPv6 form of one)"


def _checked(url: str) -> tuple[SplitResult, bool]:
    """The URL's parts, and whether private addresses are allowed; `UnsafeCallback` for a
    scheme other than http(s), a loopback name or a forbidden literal address."""
    parts = urlsplit(url)
    try:
        hostname, _ = parts.hostname, parts.port  # a malformed port raises here
    except ValueError:
        raise UnsafeCallback("callback_url has an invalid port") from None
    if parts.scheme not in ("http", "https") or not hostname:
        raise UnsafeCallback("callback_url must be an http or https URL")
    if get_settings().callback_allow_private:
        return parts, True
    if hostname == "localhost" or hostname.endswith(".localhost"):
        raise UnsafeCallback("callback_url must not point at a loopback address")
    try:
        ipaddress.ip_address(hostname.split("%", 1)[0])
    except ValueError:
        return parts, False
    if _forbidden(hostname):
        raise UnsafeCallback(f"callback_url must not point at {_FORBIDDEN_MESSAGE}")
    return parts, False


def checked_addresses(url: str) -> list[str]:
    """The addresses `url` may be called at, each checked: its literal address, or what its
    name resolves to, once (delivery connects to these, so a name cannot re-resolve elsewhere)."""
    parts, allow_private = _checked(url)
    host = parts.hostname or ""
    try:
        return [str(ipaddress.ip_address(host.split("%", 1)[0]))]
    except ValueError:
        pass
    try:
        port = parts.port or (443 if parts.scheme == "https" else 80)
        infos = socket.getaddrinfo(host, port, proto=socket.IPPROTO_TCP)
    except (OSError, ValueError, UnicodeError) as exc:
        raise CallbackFailed(f"cannot resolve the callback host {host!r}: {exc}") from None
    addresses = list(dict.fromkeys(str(info[4][0]) for info in infos))  # in the resolver's order
    if not addresses:
        raise CallbackFailed(f"the callback host {host!r} has no address")
    if not allow_private and any(_forbidden(address) for address in addresses):
        raise UnsafeCallback(f"callback_url host {host!r} resolves to {_FORBIDDEN_MESSAGE}")
    return addresses


def check_url(url: str, *, resolve: bool = True) -> None:
    """Raises `UnsafeCallback` unless `url` may be called. `resolve=False` checks the scheme and
    a literal address only (what a submit can afford); delivery resolves the name too."""
    if resolve:
        checked_addresses(url)
    else:
        _checked(url)


def signature(body: bytes, secret: str, timestamp: int) -> str:
    digest = hmac.new(secret.encode(), f"{timestamp}.".encode() + body, hashlib.sha256).hexdigest()
    return f"t={timestamp},v1={digest}"


def verify(body: bytes, header: str, secret: str, *, tolerance: int = 300, now: float | None = None) -> bool:
    """What a receiver does (kept here so the documented recipe is tested)."""
    try:
        fields = dict(part.split("=", 1) for part in header.split(","))
        timestamp = int(fields["t"])
    except (ValueError, KeyError):
        return False
    now = time.time() if now is None else now
    if abs(now - timestamp) > tolerance:
        return False
    return hmac.compare_digest(signature(body, secret, timestamp), f"t={timestamp},v1={fields.get('v1', '')}")


def deliver(client: Sender, url: str, body: bytes, *, task_id: str) -> int:
    """POSTs one signed callback; the receiver's status, or `CallbackFailed` / `UnsafeCallback`.

    The connection goes to an address `checked_addresses` gave (the next one if it cannot connect),
    never to whatever the name resolves to a moment later (DNS rebinding); the request still
    carries the URL's own Host header and, for https, its name as TLS server name (SNI), so the
    certificate is verified against the name.
    """
    secret = signing_keys.current(signing_keys.CALLBACK)
    if not secret:
        raise CallbackFailed("GATEWAY_CALLBACK_SECRET is not set: callbacks are never sent unsigned")
    addresses = checked_addresses(url)
    target = httpx.URL(url)
    headers = {"Content-Type": "application/json", "User-Agent": "unified-ai-gateway-callback/1",
               SIGNATURE_HEADER: signature(body, secret, int(time.time())), "X-Gateway-Task-Id": task_id,
               # The URL names an address now; the Host header keeps the name (and a non-default port).
               "Host": target.netloc.decode("ascii").rpartition("@")[2],
               # A connection made for one name is not kept for the next request to the same address.
               "Connection": "close"}
    answer = None
    for index, address in enumerate(addresses):
        # A built request: the shared client never follows redirects (a redirect could point anywhere).
        request = httpx.Request("POST", target.copy_with(host=address.split("%", 1)[0]), content=body,
                                headers=headers,
                                extensions={"timeout": TIMEOUT.as_dict(), "sni_hostname": target.host})
        try:
            answer = client.send(request)
            break
        except httpx.ConnectError as exc:
            if index == len(addresses) - 1:
                raise CallbackFailed(f"callback to {url} failed: {type(exc).__name__}: {exc}") from None
        except httpx.HTTPError as exc:
            raise CallbackFailed(f"callback to {url} failed: {type(exc).__name__}: {exc}") from None
    assert answer is not None
    if not answer.is_success:
        raise CallbackFailed(f"callback to {url} answered {answer.status_code}")
    return answer.status_code
