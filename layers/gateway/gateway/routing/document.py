"""Where the channels document comes from, and its catalog, read once (a remote one re-read every minute).

The document comes from `GATEWAY_CHANNELS_FILE` locally, or from the SSM parameter
`GATEWAY_CHANNELS_PARAMETER` / the secret `GATEWAY_CHANNELS_SECRET` deployed. A channel's
`api_key_env: NAME` is read from the environment, else from the JSON object of the secret
`GATEWAY_CHANNEL_KEYS_SECRET` (deployed, nothing sets a function's environment to a key), so the
document itself need hold no key. A configured source that cannot be read (missing, access
denied, a KMS key the function may not use) is a `ChannelsConfigError` naming it and the cause,
at cold start: never a silent empty catalog. With none of them and `GATEWAY_SIMULATOR_URL` set
(the local runner), every model routes to the built-in simulator of each protocol.
"""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from typing import Any

from gateway.prices import PriceTable
from gateway.routing.catalog import Catalog
from gateway.routing.channel import ChannelsConfigError
from gateway.settings import get_settings

_REMOTE_TTL = 60.0  # seconds a document read from SSM or Secrets Manager is reused


def _parse_text(text: str, source: str) -> dict[str, Any]:
    import yaml

    try:
        document = json.loads(text) if text.lstrip().startswith("{") else yaml.safe_load(text)
    except (ValueError, yaml.YAMLError) as exc:
        raise ChannelsConfigError(f"{source}: not valid YAML or JSON: {exc}") from None
    if document is not None and not isinstance(document, dict):
        raise ChannelsConfigError(f"{source}: the document must be a mapping with 'channels' and 'prices'")
    return document or {}


_HINTS = {"ParameterNotFound": " (create it: docs/deploying.md)",
          "ResourceNotFoundException": " (create it: docs/deploying.md)",
          "AccessDeniedException": " (the function's role may not read it, or not use its KMS key: "
                                   "the template's ChannelsKmsKeyArn)",
          "AccessDenied": " (the function's role may not read it)"}


def _unreadable(source: str, exc: Exception) -> ChannelsConfigError:
    code = getattr(exc, "response", {}).get("Error", {}).get("Code") or type(exc).__name__
    return ChannelsConfigError(f"{source} cannot be read: {code}{_HINTS.get(code, '')}: {exc}")


def _secrets(*secret_ids: str) -> dict[str, str]:
    """The text of every secret one refresh needs (the channels document's, the channel keys'),
    by the id it was asked by: one BatchGetSecretValue call, not one GetSecretValue each."""
    wanted = list(dict.fromkeys(s for s in secret_ids if s))
    if not wanted:
        return {}
    from gateway.store.aws import client

    try:
        answer = client("secretsmanager").batch_get_secret_value(SecretIdList=wanted)
    except Exception as exc:
        raise _unreadable("secret " + ", ".join(wanted), exc) from None
    for error in answer.get("Errors") or []:
        code = error.get("ErrorCode", "")
        raise ChannelsConfigError(f"secret {error.get('SecretId')} cannot be read: {code}{_HINTS.get(code, '')}: "
                                  f"{error.get('Message', '')}")
    found: dict[str, str] = {}
    for value in answer.get("SecretValues") or []:
        for secret_id in wanted:
            if secret_id in (value.get("ARN"), value.get("Name")):
                found[secret_id] = value.get("SecretString", "")
    missing = [s for s in wanted if s not in found]
    if missing:
        raise ChannelsConfigError(f"secret {missing[0]} cannot be read: it was not returned")
    return found


def _channel_keys(secret_id: str, text: str) -> dict[str, str]:
    """The `api_key_env` names of the channel keys secret (a JSON object of strings)."""
    try:
        keys = json.loads(text)
    except ValueError:
        keys = None
    if not isinstance(keys, dict) or not all(isinstance(v, str) for v in keys.values()):
        raise ChannelsConfigError(f"secret {secret_id}: must be a JSON object of names to keys, "
                                  '{"MAIN_CHAT_KEY": "sk-..."}')
    return keys


def _read_document() -> tuple[dict[str, Any], str, bool, dict[str, str]] | None:
    """(document, where it came from, whether it may change while we run, the channel keys), or None."""
    settings = get_settings()
    keys_secret = settings.channel_keys_secret if settings.channel_keys_needed else ""
    if settings.channels_file:
        path = Path(settings.channels_file)
        try:
            text = path.read_text()
        except OSError as exc:
            raise ChannelsConfigError(f"GATEWAY_CHANNELS_FILE: cannot read {path}: {exc}") from None
        secrets = _secrets(keys_secret)
        return _parse_text(text, str(path)), str(path), False, _keys_of(keys_secret, secrets)
    if settings.channels_secret:
        secrets = _secrets(settings.channels_secret, keys_secret)
        document = _parse_text(secrets[settings.channels_secret], f"secret {settings.channels_secret}")
        return document, "secret", True, _keys_of(keys_secret, secrets)
    if settings.channels_parameter:
        from gateway.store.aws import client

        try:
            text = client("ssm").get_parameter(Name=settings.channels_parameter,
                                               WithDecryption=True)["Parameter"]["Value"]
        except Exception as exc:
            raise _unreadable(f"parameter {settings.channels_parameter}", exc) from None
        secrets = _secrets(keys_secret)
        return (_parse_text(text, f"parameter {settings.channels_parameter}"), "parameter", True,
                _keys_of(keys_secret, secrets))
    return None


def _keys_of(secret_id: str, secrets: dict[str, str]) -> dict[str, str]:
    return _channel_keys(secret_id, secrets[secret_id]) if secret_id else {}


_lock = threading.Lock()  # one refresh at a time
_cached: tuple[float, Catalog] | None = None


def _fresh(cached: tuple[float, Catalog] | None) -> bool:
    return cached is not None and (cached[0] == float("inf") or time.monotonic() < cached[0])


def document_catalog() -> Catalog:
    """The document's catalog, read once (a remote document is re-read every minute). While one
    thread re-reads it, the others go on with the catalog they had rather than wait on the lock;
    a re-read that fails keeps the catalog in force (logged) until the next minute."""
    global _cached
    cached = _cached
    if _fresh(cached):
        return cached[1]  # type: ignore[index]
    if not _lock.acquire(blocking=cached is None):
        return cached[1]  # type: ignore[index]
    try:
        if _fresh(_cached):
            return _cached[1]  # type: ignore[index]
        try:
            catalog, remote = _load()
        except ChannelsConfigError as exc:
            if _cached is None:
                raise  # the cold start: fail, naming the source and the cause
            from gateway.observability import logger

            logger.warning("channels document re-read failed; keeping the one in force", extra={"error": str(exc)})
            catalog, remote = _cached[1], True
        _cached = (time.monotonic() + _REMOTE_TTL if remote else float("inf"), catalog)
        return catalog
    finally:
        _lock.release()


def _load() -> tuple[Catalog, bool]:
    found = _read_document()
    if found is not None:
        document, source, remote, keys = found
        return Catalog.from_document(document, source, keys), remote
    if get_settings().simulator_url:
        return Catalog.simulated(get_settings().simulator_url), False
    return Catalog([], PriceTable()), True


def forget() -> None:
    """Reads the document again at the next request (tests, and the local runner after a change)."""
    global _cached
    with _lock:
        _cached = None
