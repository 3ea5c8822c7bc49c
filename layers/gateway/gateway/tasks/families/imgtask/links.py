"""Signed, expiring links to a task's image on this gateway (`imageUrl` of the task record).

`<base>/imgtask/image/<task id>?expires=<unix seconds>&signature=<hex HMAC-SHA256>` serves the
image without a key until `expires`. The key is derived from the callback signing secret
(`GATEWAY_CALLBACK_SECRET`) for this one use, so a link's signature can never pass for a
callback's. Each read of the record signs a fresh link, valid `LINK_SECONDS`.
"""

from __future__ import annotations

import hashlib
import hmac
import time
from urllib.parse import urlencode

from gateway.settings import get_settings

LINK_SECONDS = 2 * 3600
_PURPOSE = b"imgtask-image-link/v1"


def _key() -> bytes | None:
    secret = get_settings().callback_signing_secret
    return hmac.new(secret.encode(), _PURPOSE, hashlib.sha256).digest() if secret else None


def _signature(key: bytes, task_id: str, expires: int) -> str:
    return hmac.new(key, f"{task_id}.{expires}".encode(), hashlib.sha256).hexdigest()


def image_link(base_url: str, task_id: str, *, now: float | None = None) -> str:
    """The signed link, or "" when the gateway has no signing secret (it never hands out an unsigned one)."""
    key = _key()
    if key is None or not base_url:
        return ""
    expires = int((time.time() if now is None else now) + LINK_SECONDS)
    query = urlencode({"expires": expires, "signature": _signature(key, task_id, expires)})
    return f"{base_url.rstrip('/')}/imgtask/image/{task_id}?{query}"


def link_valid(task_id: str, expires: str | None, signature: str | None, *, now: float | None = None) -> bool:
    key = _key()
    if key is None or not expires or not signature or not expires.isdigit():
        return False
    if int(expires) < (time.time() if now is None else now):
        return False
    return hmac.compare_digest(_signature(key, task_id, int(expires)), signature)
