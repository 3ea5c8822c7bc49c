"""Passwords: each stored as a salted scrypt hash whose parameters travel with it, so a hash made
at older parameters still verifies (the console's sign-in, sign-up, a reset, the admin command
line's `set-password`)."""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets

# scrypt at n=2**14, r=8, p=1 (16 MiB, tens of milliseconds): the parameters travel with each hash.
_SCRYPT_N, _SCRYPT_R, _SCRYPT_P, _SCRYPT_LEN = 2**14, 8, 1, 32


def hash_password(password: str) -> str:
    """A new salt each time: two hashes of one password differ."""
    salt = secrets.token_bytes(16)
    digest = _scrypt(password, salt, _SCRYPT_N, _SCRYPT_R, _SCRYPT_P)
    return f"scrypt${_SCRYPT_N}${_SCRYPT_R}${_SCRYPT_P}${_b64(salt)}${_b64(digest)}"


def verify_password(password: str, stored: str | None) -> bool:
    """Whether `password` matches the stored hash; with no hash, the same work is done (a user
    without a password takes as long to refuse as a wrong password) and False is answered."""
    try:
        scheme, n, r, p, salt, digest = (stored or "").split("$")
        if scheme != "scrypt":
            raise ValueError(scheme)
        expected, salt_bytes, params = _unb64(digest), _unb64(salt), (int(n), int(r), int(p))
    except ValueError:
        _scrypt(password, b"\0" * 16, _SCRYPT_N, _SCRYPT_R, _SCRYPT_P)
        return False
    return hmac.compare_digest(_scrypt(password, salt_bytes, *params), expected)


def _scrypt(password: str, salt: bytes, n: int, r: int, p: int) -> bytes:
    return hashlib.scrypt(password.encode("utf-8", "surrogatepass"), salt=salt, n=n, r=r, p=p,
                          dklen=_SCRYPT_LEN, maxmem=64 * 1024 * 1024)


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode().rstrip("=")


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
