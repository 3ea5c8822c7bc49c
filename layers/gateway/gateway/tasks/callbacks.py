"""Completion callbacks: where they may go, how they are signed, how one is delivered.

A callback goes only to an http(s) URL whose host resolves to public addresses: never to a
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
from urllib.parse import urlsplit

import httpx

from gateway.settings import get_settings
from gateway.tasks.adapter import Sender

SIGNATURE_HEADER = "X-Gateway-Signature"
TIMEOUT = httpx.Timeout(10.0, connect=3.0)


class UnsafeCallback(ValueError):
    """The URL may never be called: retrying cannot help."""


class CallbackFailed(Exception):
    """The receiver did not take the callback (connection error, timeout, non-2xx): retry later."""


def _forbidden(address: str) -> bool:
    ip = ipaddress.ip_address(address.split("%", 1)[0])  # drop an IPv6 zone id
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return not ip.is_global or ip.is_multicast


def check_url(url: str, *, resolve: bool = True) -> None:
    """Raises `UnsafeCallback` unless `url` may be called. `resolve=False` checks the scheme and
    a literal address only (what a submit can afford); delivery resolves the name too."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise UnsafeCallback("callback_url must be an http or https URL")
    if get_settings().callback_allow_private:
        return
    host = parts.hostname
    if host == "localhost" or host.endswith(".localhost"):
        raise UnsafeCallback("callback_url must not point at a loopback address")
    try:
        literal = ipaddress.ip_address(host.split("%", 1)[0])
    except ValueError:
        literal = None
    if literal is not None:
        if _forbidden(host):
            raise UnsafeCallback("callback_url must not point at a private, loopback, link-local or reserved address")
        return
    if not resolve:
        return
    try:
        port = parts.port or (443 if parts.scheme == "https" else 80)
        addresses = {info[4][0] for info in socket.getaddrinfo(host, port, proto=socket.IPPROTO_TCP)}
    except (OSError, ValueError) as exc:
        raise CallbackFailed(f"cannot resolve the callback host {host!r}: {exc}") from None
    if not addresses or any(_forbidden(address) for address in addresses):
        raise UnsafeCallback(f"callback_url host {host!r} resolves to a private, loopback, link-local or "
                             "reserved address")


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
    """POSTs one signed callback; the receiver's status, or `CallbackFailed` / `UnsafeCallback`."""
    secret = get_settings().callback_signing_secret
    if not secret:
        raise CallbackFailed("GATEWAY_CALLBACK_SECRET is not set: callbacks are never sent unsigned")
    check_url(url)
    headers = {"Content-Type": "application/json", "User-Agent": "unified-ai-gateway-callback/1",
               SIGNATURE_HEADER: signature(body, secret, int(time.time())), "X-Gateway-Task-Id": task_id}
    try:
        # A built request: the shared client never follows redirects (a redirect could point anywhere).
        answer = client.send(httpx.Request("POST", url, content=body, headers=headers,
                                           extensions={"timeout": TIMEOUT.as_dict()}))
    except httpx.HTTPError as exc:
        raise CallbackFailed(f"callback to {url} failed: {type(exc).__name__}: {exc}") from None
    if not answer.is_success:
        raise CallbackFailed(f"callback to {url} answered {answer.status_code}")
    return answer.status_code
