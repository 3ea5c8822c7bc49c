"""API keys: `sk-` plus 48 random characters, shown once, stored only as a SHA-256 hash."""

from __future__ import annotations

import hashlib
import secrets
import string

PREFIX = "sk-"
_ALPHABET = string.ascii_letters + string.digits
_RANDOM_LENGTH = 48


def new_key() -> str:
    return PREFIX + "".join(secrets.choice(_ALPHABET) for _ in range(_RANDOM_LENGTH))


def new_secret(length: int = 40) -> str:
    """A system access token or any other bearer secret that is not an API key."""
    return "".join(secrets.choice(_ALPHABET) for _ in range(length))


def hash_secret(secret: str) -> str:
    return hashlib.sha256(secret.encode("utf-8")).hexdigest()


def key_id_of(key_hash: str) -> str:
    """A stable public id for a key: enough of its hash to name it, never enough to use it."""
    return key_hash[:12]


def fingerprint(secret: str) -> str:
    """How a key may appear in a log: its id, never the key."""
    return "key:" + key_id_of(hash_secret(secret))


def looks_like_key(value: str) -> bool:
    return value.startswith(PREFIX) and len(value) >= len(PREFIX) + 32


def hint(secret: str) -> str:
    """What a key list shows of a key: its prefix and last four characters, never enough to use it."""
    return f"{secret[:5]}...{secret[-4:]}"
