"""Where the upstream keys of the channels operators add through `/api/channel/` live.

One Secrets Manager secret per channel, named `GATEWAY_CHANNEL_KEY_PREFIX` + the channel's id
(deployed `<stack>/channel-keys/<id>`; under `make run` the emulator's Secrets Manager, which
`local/gateway_local/state.py` keeps across restarts). One secret per channel, not one JSON
secret of every key: two operators adding channels at once never overwrite each other (Secrets
Manager has no conditional write), a deleted channel's key goes with its secret, and each
function's grant is one ARN pattern. Ids are never reused, so a deleted secret still in its
recovery window never blocks a new channel's name.

The key is written here and read back only by the channels in force (`routing/channels`), always at the
version the channel's record names (its `key_version`, the secret's VersionId): a change whose
record write lost a race leaves a version nobody reads, never a key the record does not name. No
answer of the API ever carries a key (`last_four` is what people see). Everything else talks to
`KeyStore`.
"""

from __future__ import annotations

import threading
from typing import Protocol

from gateway.settings import get_settings

#: Days a deleted channel's secret can still be restored (`aws secretsmanager restore-secret`).
RECOVERY_DAYS = 7
#: The fewest characters a key must have for its last four to be shown.
SHOWN_FROM = 8


def last_four(key: str) -> str:
    """What an operator sees of a key: its last four characters, nothing for a short one."""
    return key[-4:] if len(key) >= SHOWN_FROM else ""


class KeyStore(Protocol):
    def put(self, channel_id: int, key: str, *, new: bool) -> tuple[str, str]:
        """Stores `key` for the channel; answers the reference and the version to read it by."""
        ...

    def read(self, ref: str, version: str) -> str: ...

    def delete(self, ref: str) -> None: ...


class SecretsManagerKeys:
    """One secret per channel (`CreateSecret`, `PutSecretValue`, `GetSecretValue`, `DeleteSecret`)."""

    def name_of(self, channel_id: int) -> str:
        return f"{get_settings().channel_key_prefix}{int(channel_id)}"

    def put(self, channel_id: int, key: str, *, new: bool) -> tuple[str, str]:
        from gateway.store.aws import client

        name = self.name_of(channel_id)
        secrets = client("secretsmanager")
        if new:
            answer = secrets.create_secret(Name=name, SecretString=key,
                                           Description="Upstream key of a gateway channel added through /api/channel/")
        else:
            answer = secrets.put_secret_value(SecretId=name, SecretString=key)
        return name, str(answer["VersionId"])

    def read(self, ref: str, version: str) -> str:
        from gateway.store.aws import client

        return str(client("secretsmanager").get_secret_value(SecretId=ref, VersionId=version)["SecretString"])

    def delete(self, ref: str) -> None:
        from gateway.store.aws import client

        try:
            client("secretsmanager").delete_secret(SecretId=ref, RecoveryWindowInDays=RECOVERY_DAYS)
        except Exception as exc:  # already gone: what a retried delete meets
            if getattr(exc, "response", {}).get("Error", {}).get("Code") != "ResourceNotFoundException":
                raise


_store: KeyStore = SecretsManagerKeys()
_lock = threading.Lock()
_read: dict[tuple[str, str], str] = {}


def store() -> KeyStore:
    return _store


def use_store(chosen: KeyStore | None) -> None:
    """Where keys live from now on (tests; None: Secrets Manager)."""
    global _store
    _store = chosen or SecretsManagerKeys()
    forget()


def key_of(ref: str, version: str) -> str:
    """The key `ref` holds at `version` (the channel record's `key_version`), read once per
    instance: a changed key has a new version, so it is read again, and only then."""
    found = _read.get((ref, version))
    if found is None:
        found = _store.read(ref, version)
        with _lock:
            for old in [k for k in _read if k[0] == ref]:
                del _read[old]
            _read[(ref, version)] = found
    return found


def forget() -> None:
    with _lock:
        _read.clear()
