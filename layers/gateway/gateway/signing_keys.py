"""The gateway's own secrets (the callback signing key, the result-link key), where secrets live.

Deployed, a function names a Secrets Manager secret (`GATEWAY_CALLBACK_SECRET_ID`,
`GATEWAY_RESULT_LINK_SECRET_ID`): its value is read at cold start (`load_at_start`, so an
unreadable secret fails the start naming it), kept for `CACHE_SECONDS`, then read again, so a
rotation reaches every warm function within minutes and no redeploy. The value before the last
rotation (`AWSPREVIOUS`) is kept beside it: a link signed just before a rotation still verifies.
Nothing of it is in an environment variable, where `GetFunctionConfiguration` would show it.

Locally (the local runner, tests) the value may be given as such (`GATEWAY_CALLBACK_SECRET`,
`GATEWAY_RESULT_LINK_SECRET`); a literal value wins over a secret id.
"""

from __future__ import annotations

import threading
import time

from gateway.settings import get_settings

CACHE_SECONDS = 300.0
CALLBACK, RESULT_LINK, STRIPE = "callback", "result_link", "stripe"
# name -> (literal setting, secret id setting, their environment variables for messages)
_SOURCES = {
    CALLBACK: ("callback_signing_secret", "callback_secret_id", "GATEWAY_CALLBACK_SECRET(_ID)"),
    RESULT_LINK: ("result_link_secret", "result_link_secret_id", "GATEWAY_RESULT_LINK_SECRET(_ID)"),
    # The Stripe keys as one JSON secret (`commerce.payments`; locally two literal settings instead).
    STRIPE: ("", "stripe_secret_id", "GATEWAY_STRIPE_SECRET_ID"),
}

_lock = threading.Lock()
_cache: dict[str, tuple[float, tuple[str, ...]]] = {}


class SecretUnavailable(RuntimeError):
    pass


def configured(name: str) -> bool:
    literal, secret_id, _ = _SOURCES[name]
    settings = get_settings()
    return bool((literal and getattr(settings, literal)) or getattr(settings, secret_id))


def versions(name: str, *, now: float | None = None) -> tuple[str, ...]:
    """The secret's values, the one to sign with first, then the one before the last rotation if
    any; empty when the secret is not configured."""
    literal_setting, id_setting, _ = _SOURCES[name]
    settings = get_settings()
    literal = getattr(settings, literal_setting) if literal_setting else ""
    secret_id = getattr(settings, id_setting)
    if literal:
        return (literal,)
    if not secret_id:
        return ()
    now = time.monotonic() if now is None else now
    with _lock:
        cached = _cache.get(name)
        if cached is not None and now < cached[0]:
            return cached[1]
        values = _read(secret_id)
        _cache[name] = (now + CACHE_SECONDS, values)
        return values


def current(name: str) -> str:
    """The value to sign with, or '' when the secret is not configured."""
    found = versions(name)
    return found[0] if found else ""


def _read(secret_id: str) -> tuple[str, ...]:
    from gateway.store.aws import client

    secretsmanager = client("secretsmanager")
    try:
        values = [secretsmanager.get_secret_value(SecretId=secret_id)["SecretString"]]
    except Exception as exc:
        code = getattr(exc, "response", {}).get("Error", {}).get("Code") or type(exc).__name__
        raise SecretUnavailable(f"secret {secret_id} cannot be read: {code}: {exc}") from None
    try:
        values.append(secretsmanager.get_secret_value(SecretId=secret_id, VersionStage="AWSPREVIOUS")["SecretString"])
    except Exception as exc:  # never rotated: there is no previous value
        if getattr(exc, "response", {}).get("Error", {}).get("Code") != "ResourceNotFoundException":
            raise SecretUnavailable(f"secret {secret_id} (AWSPREVIOUS) cannot be read: {exc}") from None
    return tuple(v for v in values if v)


def load_at_start(*names: str) -> None:
    """Reads each configured secret when a function starts: one that cannot be read fails the
    cold start, naming the secret and the reason, instead of every request failing later."""
    for name in names:
        if configured(name):
            versions(name)


def forget() -> None:
    """Drop the cached values (tests; the local runner after a change)."""
    with _lock:
        _cache.clear()
