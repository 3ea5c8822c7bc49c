"""Who is calling: the API key from wherever the client's SDK puts it, checked against the store.

A warm function reuses a key lookup for `GATEWAY_KEY_CACHE_SECONDS` (never the quota: billing
conditions on the live value, and on the key still being active); a key that was not found is
never remembered (`_load_key`).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from gateway import groups, keys, observability
from gateway.errors import AuthenticationFailed, NotFound, PermissionDenied, shown
from gateway.limit_values import Limits
from gateway.settings import get_settings
from gateway.store.aws import store_call_ahead
from gateway.store.keys import KeysRepository
from gateway.store.users import UsersRepository

_LAST_USED_EVERY = 60  # seconds between last-used stamps of one key from one warm function


@dataclass(frozen=True)
class Principal:
    user_id: int
    key_hash: str
    key_id: str
    key_name: str
    unlimited: bool
    allowed_models: tuple[str, ...] | None
    expires_at: int
    limits: Limits = Limits()  # the key's own (its user's are the admission step's to read)
    # The request's group (the key's, else its user's) and that group's price ratio, fixed here
    # for the whole request: its hold and its settlement use this ratio (`gateway.groups`).
    group: str = "default"
    group_ratio: Decimal = Decimal(1)

    @property
    def fingerprint(self) -> str:
        return "key:" + self.key_id

    def may_use(self, model: str) -> bool:
        return self.allowed_models is None or model in self.allowed_models

    def require_model(self, model: str) -> None:
        """A model outside the key's allowlist is answered as if it did not exist."""
        if not self.may_use(model):
            raise NotFound(f"model '{shown(model)}' does not exist or this key may not use it",
                           param="model", code="model_not_found")


def _lower(headers: Mapping[str, Any] | None) -> dict[str, str]:
    return {str(k).lower(): str(v) for k, v in (headers or {}).items() if v is not None}


def extract_key(headers: Mapping[str, Any] | None, query: Mapping[str, Any] | None = None) -> str | None:
    """The key from `Authorization: Bearer`, `x-api-key`, `x-goog-api-key`, `x-key` (where the
    beta upstream's clients send it) or `?key=`."""
    lowered = _lower(headers)
    authorization = lowered.get("authorization", "").strip()
    if authorization[:7].lower() == "bearer ":
        token = authorization[7:].strip()
        if token:
            return token
    for header in ("x-api-key", "x-goog-api-key", "x-key"):
        if lowered.get(header, "").strip():
            return lowered[header].strip()
    if query and str(query.get("key") or "").strip():
        return str(query["key"]).strip()
    return None


CREDENTIAL_HEADERS = ("authorization", "x-api-key", "x-goog-api-key", "x-key")


def single_credential(header_pairs: Iterable[tuple[str, str]], query_keys: Iterable[str] = ()) -> None:
    """The one rule for credentials on every route: a request may carry its credential in several
    places (two SDK conventions at once), but all of them must be the same; two different ones
    (two `Authorization` headers, a header and `?key=`) are a 401, whichever one a route reads.
    Linear in the number of headers."""
    seen: set[str] = set()
    for name, value in header_pairs:
        name = name.lower()
        if name not in CREDENTIAL_HEADERS:
            continue
        value = value.strip()
        if name == "authorization" and value[:7].lower() == "bearer ":
            value = value[7:].strip()
        if value:
            seen.add(value)
    seen.update(k.strip() for k in query_keys if k and k.strip())
    if len(seen) > 1:
        raise AuthenticationFailed("the request carries two different credentials; send one key (or one access "
                                   "token) in one place", code="conflicting_credentials")


def first_values(pairs: Iterable[tuple[str, str]]) -> dict[str, str]:
    """Headers as a dict of lower-case names, the first value of each, in one pass (a request with
    thousands of headers costs linear time)."""
    found: dict[str, str] = {}
    for name, value in pairs:
        found.setdefault(name.lower(), value)
    return found


class _KeyCache:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._entries: dict[str, tuple[float, dict[str, Any] | None]] = {}
        self._stamped: dict[str, float] = {}

    def get(self, key_hash: str, ttl: float) -> tuple[bool, dict[str, Any] | None]:
        with self._lock:
            found = self._entries.get(key_hash)
        if found and time.monotonic() - found[0] < ttl:
            return True, found[1]
        return False, None

    def put(self, key_hash: str, record: dict[str, Any] | None) -> None:
        with self._lock:
            if len(self._entries) > 10_000:
                self._entries.clear()
            self._entries[key_hash] = (time.monotonic(), record)

    def due_for_stamp(self, key_hash: str) -> bool:
        now = time.monotonic()
        with self._lock:
            if now - self._stamped.get(key_hash, -_LAST_USED_EVERY) < _LAST_USED_EVERY:
                return False
            store_call_ahead()  # the stamp is a write: under no_wait it is left for the thread's turn
            self._stamped[key_hash] = now
            return True

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
            self._stamped.clear()


_cache = _KeyCache()
_users = _KeyCache()  # user id (as text) -> the profile's group fields, for the same seconds


def clear_cache() -> None:
    _cache.clear()
    _users.clear()


def _load_user_groups(user_id: int) -> dict[str, Any]:
    """The user's `group` and `can_use_self_group`, read at most once per key cache period."""
    ttl = get_settings().key_cache_seconds
    if ttl > 0:
        hit, found = _users.get(str(user_id), ttl)
        if hit and found is not None:
            return found
    profile = UsersRepository().raw_user(user_id) or {}
    found = {"group": str(profile.get("group") or groups.DEFAULT_GROUP),
             "can_use_self_group": bool(profile.get("can_use_self_group"))}
    if ttl > 0:
        _users.put(str(user_id), found)
    return found


def request_group(record: Mapping[str, Any]) -> tuple[str, Decimal]:
    """The group a key's requests are priced and routed by, and its ratio: the key's own group if
    it has one its user may still use, else the user's. A group with no ratio (the operator
    removed it from GroupRatio) is refused rather than served at a guessed price."""
    user = _load_user_groups(int(record["user_id"]))
    group = str(record.get("group") or "") or user["group"]
    if record.get("group") and group not in groups.usable(user):
        raise PermissionDenied(f"this key's group '{shown(group, 40)}' is not one its user may use",
                                   code="group_not_allowed")
    ratio = groups.ratio_of(group)
    if ratio is None:
        raise PermissionDenied(f"group '{shown(group, 40)}' has no price ratio (GroupRatio); ask the operator",
                                   code="group_not_priced")
    return group, ratio


def _load_key(key_hash: str) -> dict[str, Any] | None:
    """The key's record, from this instance's cache or the store. Only a record is remembered,
    never "no such key": a key made after a lookup missed it (the demo key `make run` seeds while
    its serving processes may already look keys up, a key a user has just created and tries at
    once) must work at its next request, not after the cache's time. A miss of the cheap,
    eventually consistent read is read again consistently before the key is refused: DynamoDB
    may not show a key written a moment ago to an eventually consistent read."""
    ttl = get_settings().key_cache_seconds
    if ttl > 0:
        hit, record = _cache.get(key_hash, ttl)
        if hit:
            return record
    repository = KeysRepository()
    record = repository.raw_key(key_hash)
    if record is None:
        record = repository.raw_key(key_hash, consistent=True)
    # A disabled key comes back when its user is enabled: never remembered, so enabling takes
    # effect at once (a revoked or deleted key stays that way and is remembered).
    if ttl > 0 and record is not None and record.get("status") != "disabled":
        _cache.put(key_hash, record)
    return record


def key_served(secret: str) -> bool:
    """Whether a request with this key would get past the key check in this process now: its
    record found the way a request finds it (this process's cache, else the store) and active.
    Nothing is written (no last-used stamp): the local runner asks it of its demo key in each
    serving process before that process takes requests."""
    record = _load_key(keys.hash_secret(secret))
    return record is not None and record.get("status") == "active"


# Why a key that exists is refused, by its status (`active` is served).
_REFUSALS = {"revoked": "the API key has been revoked", "deleted": "the API key has been deleted",
             "disabled": "the API key's user is disabled"}
USER_DISABLED = _REFUSALS["disabled"]


def key_refusal(record: Mapping[str, Any] | None) -> str:
    """What a refusal of this key record says: its real cause."""
    if record is None:
        return "the API key is not valid"
    return _REFUSALS.get(str(record.get("status")), "the API key is not active")


def unknown_key_message(secret: str) -> str:
    """The refusal of a key the store does not have. Under `make run` (`demo_key_hint` set) it
    also says which key the runner printed, by its last four characters beside the sent key's:
    every fresh start makes a new demo key, and a `KEY` exported for another start (another clone,
    a wiped state) is the likeliest reason a "printed" key is refused (issue 33). If the sent key
    is the printed one, it says so: then this serving process did not find a key the runner
    stored, which must not happen, and the message asks for a report. Deployed: no hint."""
    hint = get_settings().demo_key_hint
    if not hint:
        return key_refusal(None)
    if secret.endswith(hint):
        return (f"the API key is not valid, yet it ends like the demo key `make run` printed (...{hint}): this serving "
                "process did not find the key the runner stored; please report it with the runner's output")
    return (f"the API key is not valid: the demo key `make run` printed ends in ...{hint}, this one in "
            f"...{shown(secret[-4:], 4)} (each fresh start makes a new demo key: export KEY from this start's banner)")


def authenticate(headers: Mapping[str, Any] | None, query: Mapping[str, Any] | None = None) -> Principal:
    """The caller's principal, or `AuthenticationFailed` for a missing, unknown, expired or revoked key."""
    secret = extract_key(headers, query)
    if not secret:
        raise AuthenticationFailed("no API key was given: send 'Authorization: Bearer <key>'",
                                   code="missing_api_key")
    key_hash = keys.hash_secret(secret)
    record = _load_key(key_hash)
    if record is None:
        raise AuthenticationFailed(unknown_key_message(secret))
    if record.get("status") != "active":
        raise AuthenticationFailed(key_refusal(record))
    now = int(time.time())
    expires_at = int(record.get("expires_at") or 0)
    if expires_at and expires_at <= now:
        raise AuthenticationFailed("the API key has expired", code="expired_api_key")
    if _cache.due_for_stamp(key_hash):
        try:
            KeysRepository().touch_key(key_hash, now)
        except Exception:  # a last-used stamp is never worth failing a request for
            pass
    allowed = record.get("allowed_models")
    group, ratio = request_group(record)
    observability.log_keys(key="key:" + record["key_id"], user_id=int(record["user_id"]))
    return Principal(user_id=int(record["user_id"]), key_hash=key_hash, key_id=record["key_id"],
                     key_name=record.get("name", ""), unlimited=bool(record.get("unlimited")),
                     allowed_models=tuple(allowed) if allowed else None, expires_at=expires_at,
                     limits=Limits.of(record), group=group, group_ratio=ratio)
