"""Signed, expiring links to a task's result that the gateway serves itself (beta's
`result.sample`, imgtask's `imageUrl`).

A link is `<public base><path>?expires=<unix seconds>&signature=<hex>`, where `<hex>` is the
HMAC-SHA256, keyed with the result-link secret (`signing_keys`: Secrets Manager deployed), of
`<path>.<expires>`; a link signed with the value before the last rotation still verifies. Whoever holds the
link may fetch the result until it expires, with no key (an `<img src>`, a plain download), as
with the upstream's own signed links. The secret is the gateway's alone (never the callback
secret, which receivers hold and could forge links with).
"""

from __future__ import annotations

import hashlib
import hmac
import time
from urllib.parse import urlencode

from gateway import signing_keys
from gateway.errors import GatewayError, PermissionDenied

#: How long a link serves unless its family says otherwise; each query hands out a fresh one.
LINK_SECONDS = 3600


def configured() -> bool:
    """Whether links can be signed here (a gateway without the secret hands out none)."""
    return signing_keys.configured(signing_keys.RESULT_LINK)


def _secrets() -> tuple[str, ...]:
    found = signing_keys.versions(signing_keys.RESULT_LINK)
    if not found:
        raise GatewayError("result links are not configured (GATEWAY_RESULT_LINK_SECRET(_ID) is unset)")
    return found


def _signature(path: str, expires: int, secret: str | None = None) -> str:
    key = (secret if secret is not None else _secrets()[0]).encode()
    return hmac.new(key, f"{path}.{expires}".encode(), hashlib.sha256).hexdigest()


def sign(base_url: str, path: str, *, seconds: int = LINK_SECONDS, now: float | None = None) -> str:
    """A link to `path` (starting with `/`) under `base_url`, valid for `seconds`."""
    expires = int((time.time() if now is None else now) + seconds)
    return f"{base_url.rstrip('/')}{path}?{urlencode({'expires': expires, 'signature': _signature(path, expires)})}"


def valid(path: str, expires: str | None, signature: str | None, *, now: float | None = None) -> bool:
    """Whether the link to `path` was signed here and has not expired."""
    try:
        verify(path, expires, signature, now=now)
    except GatewayError:
        return False
    return True


def verify(path: str, expires: str | None, signature: str | None, *, now: float | None = None) -> None:
    """Raises `PermissionDenied` unless the link to `path` was signed here and has not expired."""
    if not expires or not signature or not expires.isdigit():
        raise PermissionDenied("this link needs its expires and signature parameters", code="link_invalid")
    if not any(hmac.compare_digest(_signature(path, int(expires), secret), signature) for secret in _secrets()):
        raise PermissionDenied("this link's signature is not valid", code="link_invalid")
    if int(expires) < (time.time() if now is None else now):
        raise PermissionDenied("this link has expired; ask for the result again for a fresh one",
                               code="link_expired")
