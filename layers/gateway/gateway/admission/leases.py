"""Quota leases: an instance takes a slice of an account's quota in one transaction and holds its
requests against it in memory, so the common request makes no DynamoDB call before its upstream
call and none on the account's own items at all.

The units of an account are always in exactly one of these places (the **conservation
invariant**, checked by tests/integration/test_money_model.py after every step):

    profile.quota + Σ open leases (granted − spent) + profile.used_quota + Σ open leases spent
        = everything ever added to the account

and the same for a limited key (`remain_quota`, its leases, `used_quota`).

- **Grant** (`LeasePool._grant`, one transaction): the profile's `quota` and a limited key's
  `remain_quota` give `granted` units, each conditioned on having them, the user being enabled and
  the key active; the lease item is created open, indexed for the sweeper by its `hold_until`.
  A lease takes new holds for `WINDOW_SECONDS` only, so a revoked key, a disabled user or an
  operator's new quota is seen by the next grant, within the key cache's 5 s.
- **Hold** (in memory): a request's worst case comes out of the lease's free units
  (`granted − spent − held`); it never exceeds them, so no request can spend what the lease was
  not granted. No DynamoDB call.
- **Close** (settle or refund, `LeasePool.close`): a group commit per lease, two writes per batch
  of closes, the lease item then the ledger entries (`admission.lease_closes`). A price above the
  hold takes at most the lease's free units (the rest is the entry's `shortfall`): the quota never
  goes negative through a request.
- **Fold** (one transaction, once, `admission.lease_folds`): the lease closes, what it did not
  spend goes back to the quotas, what it spent to the used counters and the day totals. The holder
  folds a lease once its window is over and its last hold closed (`fold_idle`); the sweeper folds
  one still open after its `hold_until` (its holder died or froze).

Readers add the open leases (`admission.balances`): `used_quota`, usage and the subscription
include every request the moment its close is written.
"""

from __future__ import annotations

import threading
import time
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from gateway import observability
from gateway.admission import steps
from gateway.admission.lease_closes import Close, Lease, commit
from gateway.admission.lease_folds import fold
from gateway.admission.ledger import LOG_CONSUME, REQUEST_HOLD_SECONDS, SETTLED, Reservation, entry
from gateway.admission.transactions import transact
from gateway.auth import USER_DISABLED, Principal, key_refusal
from gateway.aws_failures import cancellation_reasons
from gateway.errors import AuthenticationFailed, Conflict, InsufficientQuota
from gateway.observability import logger
from gateway.prices import usd_text
from gateway.settings import get_settings
from gateway.store.aws import (
    client,
    from_item,
    is_condition_failure,
    store_call_ahead,
    to_item,
    to_values,
)
from gateway.store.holds import OPEN, hold_index_keys, lease_key, quota_debit
from gateway.store.table import PROFILE, key_pk, user_pk

# New holds go on a lease for this long after its grant; then it drains and is folded.
WINDOW_SECONDS = 5.0
# How long after its window a lease may still have a request running on it.
DRAIN_SECONDS = REQUEST_HOLD_SECONDS
# A lease is granted this many times the hold that asked for it, or as many as this instance held
# for the account in its last window if that was more (less when the account has less).
SLICE_HOLDS = 64
# A new lease is asked for in the background when the current one is this close to the end of its
# window or has this share of its units left, so that requests find one in hand.
RENEW_SECONDS, RENEW_SHARE = 1.0, 0.25


def _table() -> str:
    return get_settings().accounts_table


def _db():
    return client("dynamodb")


@dataclass
class _Open:
    lease: Lease
    request: steps.AdmissionRequest
    entered: tuple[steps.AdmissionStep, ...]


class LeasePool:
    """An instance's leases, per account (user and key). Thread-safe; one per process."""

    def __init__(self, holder: str = ""):
        self.holder = holder or f"instance-{uuid.uuid4().hex[:12]}"
        self._lock = threading.Lock()
        self._leases: dict[tuple[int, str], list[Lease]] = {}
        self._open: dict[str, _Open] = {}  # reservation id -> its hold
        self._rate: dict[tuple[int, str], tuple[float, int, int]] = {}  # account -> (window start, holds, last)
        self._grants: dict[tuple[int, str], threading.Event] = {}  # account -> its grant in flight
        self._renewals: list[threading.Thread] = []

    # --- hold -----------------------------------------------------------------------------------

    def hold(self, principal: Principal, units: int, *, model: str, route: str, request_id: str,
             tokens: int = 0) -> Reservation:
        """Holds `units` for one request; a DynamoDB transaction only when no lease of this
        instance has the units free (then a new lease is granted). Raises `InsufficientQuota`,
        `AuthenticationFailed` (a key revoked since the cache read it) or a step's refusal."""
        if units < 0:
            raise ValueError("a hold cannot be negative")
        request = steps.AdmissionRequest(principal, units, model, route, request_id, tokens=tokens)
        entered = steps.enter(request)
        self._count_hold(principal)
        try:
            lease = self._take(principal, units)
            while lease is None:
                self._grant_once_for(principal, units)
                lease = self._take(principal, units)
            self._renew_if_due(principal, lease, units)
        except BaseException:
            steps.leave(request, entered, None)
            raise
        now = int(time.time())
        reservation = Reservation(reservation_id=request_id, user_id=principal.user_id, key_hash=principal.key_hash,
                                  key_id=principal.key_id, limited_key=not principal.unlimited, units=units,
                                  model=model, route=route, created_at=now, hold_until=lease.hold_until,
                                  lease_id=lease.lease_id, ratelimit=request.notes.get("ratelimit", ()))
        with self._lock:
            if request_id in self._open:
                self._give_back(lease, units)
                steps.leave(request, entered, None)
                raise Conflict(f"request id {request_id} has already been used; a request is billed once under "
                               "its own id", code="duplicate_request")
            self._open[request_id] = _Open(lease, request, entered)
        return reservation

    def _grant_once_for(self, principal: Principal, units: int) -> None:
        """A new lease for the account, asked for by one thread at a time (the others wait for it
        instead of asking too: a grant writes the account's own items)."""
        store_call_ahead()  # a grant, or waiting for another thread's
        account = (principal.user_id, principal.key_hash)
        with self._lock:
            flight = self._grants.get(account)
            mine = flight is None
            if mine:
                flight = self._grants[account] = threading.Event()
        assert flight is not None
        if not mine:
            flight.wait(30)
            return
        try:
            granted = self._grant(principal, units)
            with self._lock:
                self._leases.setdefault(account, []).append(granted)
        finally:
            with self._lock:
                del self._grants[account]
            flight.set()

    def _renew_if_due(self, principal: Principal, lease: Lease, units: int) -> None:
        """Asks for the next lease in the background while this one still serves."""
        account = (principal.user_id, principal.key_hash)
        with self._lock:
            due = (lease.window_until - time.monotonic() < RENEW_SECONDS or lease.free < lease.granted * RENEW_SHARE)
            newer = any(other.window_until > lease.window_until for other in self._leases.get(account, []))
            if not due or newer or account in self._grants:
                return

        def renew() -> None:
            try:
                self._grant_once_for(principal, units)
            except Exception:  # the next request that finds no lease asks for itself
                logger.warning("renewing a lease failed", exc_info=True)

        renewal = threading.Thread(target=renew, name="lease-renewal", daemon=True)
        with self._lock:
            self._renewals = [thread for thread in self._renewals if thread.is_alive()] + [renewal]
        renewal.start()

    def wait_renewals(self, timeout: float = 30) -> None:
        """Returns once the leases asked for in the background are granted (or refused)."""
        with self._lock:
            renewals = list(self._renewals)
        for thread in renewals:
            thread.join(timeout)

    def _count_hold(self, principal: Principal) -> None:
        account, now = (principal.user_id, principal.key_hash), time.monotonic()
        with self._lock:
            started, holds, last = self._rate.get(account, (now, 0, 0))
            if now - started >= WINDOW_SECONDS:
                started, holds, last = now, 0, holds if now - started < 2 * WINDOW_SECONDS else 0
            self._rate[account] = (started, holds + 1, last)

    def _slice_holds(self, principal: Principal) -> int:
        with self._lock:
            _, holds, last = self._rate.get((principal.user_id, principal.key_hash), (0.0, 0, 0))
        return max(SLICE_HOLDS, holds, last)

    def _take(self, principal: Principal, units: int) -> Lease | None:
        now = time.monotonic()
        with self._lock:
            usable = [lease for lease in self._leases.get((principal.user_id, principal.key_hash), [])
                      if not lease.folded and lease.window_until > now and lease.free >= units]
            if not usable:
                return None
            return self._take_on(max(usable, key=lambda lease: lease.window_until), units)

    @staticmethod
    def _take_on(lease: Lease, units: int) -> Lease:
        lease.held += units
        lease.holds += 1
        return lease

    @staticmethod
    def _give_back(lease: Lease, units: int) -> None:
        lease.held -= units
        lease.holds -= 1

    def _grant(self, principal: Principal, units: int) -> Lease:
        """A new lease of about `SLICE_HOLDS` holds like this one, or what the account has left
        if that is less (but at least `units`)."""
        want = max(units * self._slice_holds(principal), units, 1)
        for _ in range(3):
            try:
                return self._grant_once(principal, want)
            except _Short as short:
                if short.left < units or short.left <= 0:
                    if short.refusal:
                        raise AuthenticationFailed(short.refusal) from None
                    if short.key_left is not None and short.key_left < units:
                        raise InsufficientQuota(f"this key's remaining quota is {usd_text(short.key_left)}; "
                                                f"the request needs up to {usd_text(units)}") from None
                    raise InsufficientQuota(f"the account's remaining quota is too low; the request needs up to "
                                            f"{usd_text(units)}") from None
                # Take half of what is left (other instances may need some), at least this hold.
                want = max(units, min(want, short.left // 2))
        raise InsufficientQuota(f"the account's remaining quota is too low; the request needs up to {usd_text(units)}")

    def _grant_once(self, principal: Principal, units: int) -> Lease:
        lease_id = uuid.uuid4().hex
        now = int(time.time())
        hold_until = now + int(WINDOW_SECONDS) + 1 + DRAIN_SECONDS
        record = {
            **lease_key(principal.user_id, lease_id), "lease_id": lease_id, "user_id": principal.user_id,
            "key_hash": principal.key_hash, "key_id": principal.key_id, "limited_key": not principal.unlimited,
            "granted": units, "spent": 0, "requests": 0, "status": OPEN, "holder": self.holder,
            "created_at": now, "hold_until": hold_until, "last_batch": "-",
            **hold_index_keys(lease_id, hold_until),
        }
        key_update: dict[str, Any] = {
            "TableName": _table(), "Key": to_item({"pk": key_pk(principal.key_hash), "sk": "KEY"}),
            "ExpressionAttributeNames": {"#s": "status"},
        }
        if principal.unlimited:
            key_update.update(ConditionExpression="#s = :active",
                              ExpressionAttributeValues=to_values({":active": "active"}))
            key_update["UpdateExpression"] = "SET last_leased_at = :now"
            key_update["ExpressionAttributeValues"].update(to_values({":now": now}))
        else:
            key_update.update(UpdateExpression="ADD remain_quota :neg",
                              ConditionExpression="#s = :active AND remain_quota >= :u",
                              ExpressionAttributeValues=to_values({":active": "active", ":u": units, ":neg": -units}))
        started = time.monotonic()
        try:
            transact([
                {"Put": {"TableName": _table(), "Item": to_item(record),
                         "ConditionExpression": "attribute_not_exists(pk)"}},
                quota_debit(_table(), principal.user_id, units),
                {"Update": key_update},
            ])
        except Exception as exc:
            if not is_condition_failure(exc):
                raise
            reasons = cancellation_reasons(exc)
            # The lease id is this call's own: a lease item already there was put by an earlier
            # attempt of this grant whose answer was lost (`transact` asks again after a
            # cancellation, with a new client token): it is granted.
            if reasons[:1] != ["ConditionalCheckFailed"]:
                raise _short(principal) from None
        return Lease(lease_id=lease_id, user_id=principal.user_id, key_hash=principal.key_hash,
                     key_id=principal.key_id, limited_key=not principal.unlimited, granted=units,
                     window_until=started + WINDOW_SECONDS, hold_until=hold_until)

    # --- close ----------------------------------------------------------------------------------

    def close(self, reservation: Reservation, outcome: str, units: int, detail: dict[str, Any] | None, *,
              wanted: int, log_type: int = LOG_CONSUME, base_units: int | None = None) -> bool:
        """Settles (`units` charged) or refunds (0) a hold of this pool; True if this call closed it."""
        with self._lock:
            held = self._open.pop(reservation.reservation_id, None)
            if held is None:
                return False  # closed already (or never held here)
            lease = held.lease
            charge = units
            if units > reservation.units:  # above the hold: what the lease has free, no more
                charge = reservation.units + min(units - reservation.units, max(lease.free, 0))
            lease.held -= reservation.units
            lease.spent += charge  # no other hold can take it while it is being written
        item = entry(reservation, outcome, charge, detail, datetime.now(UTC), shortfall=max(wanted - charge, 0),
                     log_type=log_type, base_units=base_units)
        try:
            commit(lease, Close(reservation, item, outcome, charge))
        finally:
            with self._lock:
                lease.holds -= 1  # only now may the lease be folded
            if detail:  # the tokens billed, for tpm
                held.request.notes["tokens_used"] = int(detail.get("input_tokens") or 0) + int(
                    detail.get("output_tokens") or 0)
            steps.leave(held.request, held.entered, charge)
        if outcome == SETTLED:
            observability.units_billed(charge, route=reservation.route, model=reservation.model)
        self.fold_idle()
        return True

    # --- fold -----------------------------------------------------------------------------------

    def fold_idle(self, *, force: bool = False) -> int:
        """Folds this pool's leases whose window is over (any, with `force`) and that hold nothing."""
        now = time.monotonic()
        with self._lock:
            due = [lease for leases in self._leases.values() for lease in leases
                   if not lease.folded and not lease.holds and (force or lease.window_until <= now)]
            for lease in due:
                lease.folded = True
            for account, leases in list(self._leases.items()):
                kept = [lease for lease in leases if not lease.folded]
                if kept:
                    self._leases[account] = kept
                else:
                    del self._leases[account]
        for lease in due:
            try:
                fold(lease.user_id, lease.lease_id, reason="drained")
            except Exception:  # the sweeper folds it after its hold_until
                logger.exception("folding a lease failed", extra={"lease_id": lease.lease_id})
        return len(due)

    def release_all(self) -> int:
        """Folds every lease that holds nothing (an instance going idle or shutting down)."""
        return self.fold_idle(force=True)


class _Short(Exception):
    def __init__(self, left: int, key_left: int | None, refusal: str = ""):
        self.left, self.key_left, self.refusal = left, key_left, refusal


def _short(principal: Principal) -> _Short:
    """Why a grant was refused: what the account (and a limited key) have left, or the refusal
    that names the real cause (a key revoked, deleted or disabled since the key cache read it; a
    user disabled meanwhile)."""
    def read(pk: str, sk: str) -> dict[str, Any]:
        return from_item(_db().get_item(TableName=_table(), Key=to_item({"pk": pk, "sk": sk}),
                                        ConsistentRead=True).get("Item")) or {}

    key = read(key_pk(principal.key_hash), "KEY")
    if key.get("status") != "active":
        return _Short(-1, None, key_refusal(key or None))
    user = read(user_pk(principal.user_id), PROFILE)
    if int(user.get("status", 0)) != 1:
        return _Short(-1, None, USER_DISABLED)
    left = int(user.get("quota", 0))
    key_left = None if principal.unlimited else int(key.get("remain_quota", 0))
    return _Short(min(left, key_left) if key_left is not None else left, key_left)


_pool: LeasePool | None = None
_pool_lock = threading.Lock()


def pool() -> LeasePool:
    """This process's lease pool (one per warm function instance)."""
    global _pool
    with _pool_lock:
        if _pool is None:
            _pool = LeasePool()
        return _pool


def reset_pool(*, fold_first: bool = True) -> None:
    """Forgets this process's pool (tests: a fresh instance), folding what it can first."""
    global _pool
    from gateway.admission import limits

    with _pool_lock:
        current, _pool = _pool, None
    limits.step().reset()  # and what the instance held of rate limits
    if current is not None and fold_first:
        try:
            current.release_all()
        except Exception:
            logger.exception("releasing the lease pool failed")


__all__ = ["LeasePool", "pool", "reset_pool"]
