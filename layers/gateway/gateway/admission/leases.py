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
- **Close** (settle or refund; a group commit per lease, `_commit`): one batch of closes at a
  time per lease (a batch waits up to `LINGER_SECONDS` for the closes of the lease's other open
  holds in this instance), two writes per batch, in this order:
  1. the lease item: `ADD spent, requests` and the day counters, `SET last_batch, last_entries`
     (the batch's ledger entries without their index keys, which `carried_entries` rebuilds: the
     lease item is billed by its size on every batch), conditioned on the lease being open, on
     `spent` staying within `granted`, and on `last_batch` not being this batch (a retry after an
     answer lost on the way is recognised, never counted twice);
  2. the ledger entries (`BatchWriteItem`; writing one again is the same entry).
  Because one lease's batches are written one after another, only its `last_entries` can be
  missing when its holder dies between the two writes; whoever folds the lease writes them
  first. A first write still failing after botocore's retries may have been applied all the
  same: the lease is read to see whether it counts the batch, and it is asked again if not
  (`_BATCH_ATTEMPTS`). Entries whose write failed are written before the next batch replaces
  them (`Lease.unwritten`). A price above the hold takes at most the lease's free units (the
  rest is the entry's `shortfall`): the quota never goes negative through a request.
- **Fold** (`fold`, one transaction, once): the lease closes (conditioned on being open and on
  `spent` being what was read), the profile gets `granted − spent` back into `quota` and `spent`
  into `used_quota` and `request_count`, the key likewise, the day totals get the lease's day
  counters. The holder folds a lease once its window is over and its last hold closed; the
  sweeper (`sweep`) folds one still open after its `hold_until` (its holder died or froze).

Readers add the open leases (`open_leases`, `account_view`, `open_day_counters`): `used_quota`,
usage and the subscription include every request the moment its close is written.
"""

from __future__ import annotations

import random
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, date, datetime
from typing import Any

from gateway import observability
from gateway.admission import steps
from gateway.admission.ledger import LOG_CONSUME, REFUNDED, REQUEST_HOLD_SECONDS, SETTLED, Reservation, entry
from gateway.admission.transactions import transact
from gateway.auth import USER_DISABLED, Principal, key_refusal
from gateway.errors import AuthenticationFailed, Conflict, InsufficientQuota
from gateway.observability import logger
from gateway.settings import get_settings
from gateway.store.accounts import (
    PROFILE,
    closed_request_counters,
    day_total_additions,
    hold_index_keys,
    key_pk,
    lease_key,
    lease_pks,
    ledger_index,
    quota_debit,
    user_pk,
)
from gateway.store.aws import (
    cancellation_reasons,
    client,
    from_item,
    is_condition_failure,
    passing_failure,
    store_call_ahead,
    to_item,
    to_values,
)

# New holds go on a lease for this long after its grant; then it drains and is folded.
WINDOW_SECONDS = 5.0
# How long after its window a lease may still have a request running on it.
DRAIN_SECONDS = REQUEST_HOLD_SECONDS
# A lease is granted this many times the hold that asked for it, or as many as this instance held
# for the account in its last window if that was more (less when the account has less).
SLICE_HOLDS = 64
# A fold is not a client's request: it waits out conflicts on the account's items longer.
_FOLD_ATTEMPTS = 12
# Closes written in one batch at most (the lease item carries them all until they are written).
MAX_BATCH = 50
# A batch's count on the lease is asked this many times (each with botocore's own retries) while
# DynamoDB throttles or fails it: the answer is already out, the bill must follow it.
_BATCH_ATTEMPTS = 6
# How long a batch of closes waits for the closes of the lease's other open holds to join it:
# two writes saved for each that does, against this much more time to the last byte.
LINGER_SECONDS = 0.008
# A new lease is asked for in the background when the current one is this close to the end of its
# window or has this share of its units left, so that requests find one in hand.
RENEW_SECONDS, RENEW_SHARE = 1.0, 0.25
OPEN, CLOSED = "open", "closed"
_COUNTER_PREFIX = "c|"  # a lease's day counter: c|<yyyy-mm-dd>|<counter as day_counters names it>


def _table() -> str:
    return get_settings().accounts_table


def _db():
    return client("dynamodb")


@dataclass
class Lease:
    """One lease as its holder sees it."""

    lease_id: str
    user_id: int
    key_hash: str
    key_id: str
    limited_key: bool
    granted: int
    window_until: float  # time.monotonic() after which it takes no new hold
    hold_until: int  # epoch seconds after which the sweeper folds it
    spent: int = 0
    held: int = 0
    holds: int = 0
    folded: bool = False
    # Closes waiting to be written, and whether a writer is at it (one batch at a time per lease).
    queue: list[_Close] = field(default_factory=list)
    flushing: bool = False
    turn: threading.Condition = field(default_factory=threading.Condition)
    # The entries of the last batch when their write failed after the lease counted them.
    unwritten: list[dict[str, Any]] = field(default_factory=list)

    @property
    def free(self) -> int:
        return self.granted - self.spent - self.held


@dataclass
class _Close:
    reservation: Reservation
    item: dict[str, Any]
    outcome: str
    charge: int
    done: bool = False
    error: BaseException | None = None


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
                        raise InsufficientQuota(f"this key's remaining quota is {short.key_left} units; "
                                                f"the request needs up to {units}") from None
                    raise InsufficientQuota(f"the account's remaining quota is too low; the request needs up to "
                                            f"{units} units") from None
                # Take half of what is left (other instances may need some), at least this hold.
                want = max(units, min(want, short.left // 2))
        raise InsufficientQuota(f"the account's remaining quota is too low; the request needs up to {units} units")

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
            _commit(lease, _Close(reservation, item, outcome, charge))
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


def _counters(reservation: Reservation, units: int, day: date, detail: dict[str, Any] | None = None) -> dict[str, int]:
    return {f"{_COUNTER_PREFIX}{day.isoformat()}|{name}": amount for name, amount in
            closed_request_counters(key_id=reservation.key_id, model=reservation.model, units=units,
                                    detail=detail).items()}


def _commit(lease: Lease, close: _Close) -> None:
    """Writes a close with whatever other closes of the lease are waiting (a group commit): one
    thread writes a batch while the next batch gathers. While other holds of the lease are open
    in this instance, a batch waits up to `LINGER_SECONDS` for their closes to join it (never
    with the lease's only hold: one request per instance, as deployed, never waits). Returns
    once this close is written."""
    with lease.turn:
        lease.queue.append(close)
        lingered = False
        while not close.done:
            if lease.flushing:
                lease.turn.wait()
                continue
            if not lingered and len(lease.queue) < min(lease.holds, MAX_BATCH):
                lingered = True
                lease.turn.wait_for(lambda: close.done or lease.flushing
                                    or len(lease.queue) >= min(lease.holds, MAX_BATCH), timeout=LINGER_SECONDS)
                continue
            batch, lease.queue = lease.queue[:MAX_BATCH], lease.queue[MAX_BATCH:]
            lease.flushing = True
            lease.turn.release()
            error: BaseException | None = None
            try:
                _write_batch(lease, batch)
            except BaseException as exc:  # every close of the batch hears it
                error = exc
            finally:
                lease.turn.acquire()
                for written in batch:
                    written.done, written.error = True, error
                lease.flushing = False
                lease.turn.notify_all()
    if close.error is not None:
        raise close.error


def _write_batch(lease: Lease, batch: list[_Close]) -> None:
    """The two writes of a batch of closes (see the module's docstring), each safe to repeat:
    the lease counts them all and carries their entries, then the entries are written."""
    counters: dict[str, int] = {}
    for close in batch:
        at = datetime.fromtimestamp(int(close.item["at"]) / 1000, UTC)
        for name, amount in _counters(close.reservation, close.charge, at.date(), close.item.get("detail")).items():
            counters[name] = counters.get(name, 0) + amount
    charge = sum(close.charge for close in batch)
    batch_id = batch[0].reservation.reservation_id
    items = [to_item(close.item) for close in batch]
    names = {"#s": "status", **{f"#c{n}": name for n, name in enumerate(counters)}}
    values: dict[str, Any] = {":u": charge, ":r": sum(1 for close in batch if close.outcome == SETTLED),
                              ":open": OPEN, ":batch": batch_id, ":entries": [_carried(close.item) for close in batch],
                              ":max": lease.granted - charge,
                              **{f":c{n}": amount for n, amount in enumerate(counters.values())}}
    additions = ", ".join(["spent :u", "requests :r", *(f"#c{n} :c{n}" for n in range(len(counters)))])
    pk_sk = lease_key(lease.user_id, lease.lease_id)
    if lease.unwritten:  # an earlier batch's entries, counted but not written: before this batch replaces them
        _put_entries(lease.unwritten)
        lease.unwritten = []
    for attempt in range(_BATCH_ATTEMPTS):
        try:
            _db().update_item(
                TableName=_table(), Key=to_item(pk_sk),
                UpdateExpression=f"SET last_batch = :batch, last_entries = :entries ADD {additions}",
                ConditionExpression="#s = :open AND last_batch <> :batch AND spent <= :max",
                ExpressionAttributeNames=names, ExpressionAttributeValues=to_values(values))
            break
        except Exception as exc:
            refused = is_condition_failure(exc)
            if not refused and (not passing_failure(exc) or attempt == _BATCH_ATTEMPTS - 1):
                raise
            # Refused, or still failing after botocore's retries, the write may have been applied
            # all the same (its answer lost on the way): the lease says whether it counts this batch.
            found = from_item(_db().get_item(TableName=_table(), Key=to_item(pk_sk),
                                             ConsistentRead=True).get("Item")) or {}
            if found.get("last_batch") == batch_id:
                break
            if refused:
                raise RuntimeError(f"lease {lease.lease_id} refused a batch of {len(batch)} closes: status "
                                   f"{found.get('status')}, spent {found.get('spent')} of {found.get('granted')}"
                                   ) from None
            time.sleep(random.uniform(0, 0.01 * 2 ** attempt))
    try:
        _put_entries(items)
    except BaseException:
        lease.unwritten = items  # the lease carries them: the next batch or the fold writes them
        raise


# What a lease carries of each entry of its last batch leaves out the index keys (rebuilt from
# the entry's own fields): the lease item is written on every batch, and DynamoDB bills it by size.
_INDEX_KEYS = ("gsi1pk", "gsi1sk", "gsi2pk", "gsi2sk")


def _carried(entry: dict[str, Any]) -> dict[str, Any]:
    return {name: value for name, value in entry.items() if name not in _INDEX_KEYS and value is not None}


def carried_entries(lease: dict[str, Any]) -> list[dict[str, Any]]:
    """The ledger entries a lease record carries (its last batch's), whole, as DynamoDB items."""
    carried = lease.get("last_entries")
    if not carried:
        return []
    user_id = int(lease["user_id"])
    return [to_item({**entry, **ledger_index(user_id, entry["key_id"], entry["model"], entry["sk"])})
            for entry in carried]


def _put_entries(items: list[dict[str, Any]]) -> None:
    """Writes ledger entries, given as DynamoDB items (again, if need be: the same item twice is
    one entry)."""
    for start in range(0, len(items), 25):
        puts = [{"PutRequest": {"Item": item}} for item in items[start:start + 25]]
        requests: dict[str, Any] = {_table(): puts}
        for attempt in range(10):
            answer = _db().batch_write_item(RequestItems=requests)
            requests = answer.get("UnprocessedItems") or {}
            if not requests:
                break
            time.sleep(0.005 * 2 ** attempt)
        else:
            raise RuntimeError("DynamoDB left ledger entries unwritten after 10 attempts")


def fold(user_id: int, lease_id: str, *, reason: str) -> bool:
    """Closes an open lease: what it did not spend goes back to the quotas, what it spent to the
    used counters and day totals, in one transaction conditioned on it being open with the spend
    read. True if this call folded it (exactly once, whoever calls: holder or sweeper)."""
    pk_sk = lease_key(user_id, lease_id)
    for _ in range(5):
        lease = from_item(_db().get_item(TableName=_table(), Key=to_item(pk_sk), ConsistentRead=True).get("Item"))
        if not lease or lease.get("status") != OPEN:
            return False
        if lease.get("last_entries"):
            _put_entries(carried_entries(lease))  # closes whose holder died between their two writes
        granted, spent, requests = int(lease["granted"]), int(lease["spent"]), int(lease["requests"])
        back = granted - spent
        writes: list[dict[str, Any]] = [
            {"Update": {"TableName": _table(), "Key": to_item(pk_sk),
                        "UpdateExpression": "SET #s = :closed, closed_at = :now, fold_reason = :why "
                                            "REMOVE gsi1pk, gsi1sk, last_entries",
                        "ConditionExpression": "#s = :open AND spent = :spent",
                        "ExpressionAttributeNames": {"#s": "status"},
                        "ExpressionAttributeValues": to_values({":closed": CLOSED, ":open": OPEN, ":spent": spent,
                                                                ":now": int(time.time()), ":why": reason})}},
            {"Update": {"TableName": _table(), "Key": to_item({"pk": user_pk(user_id), "sk": PROFILE}),
                        "UpdateExpression": "ADD quota :back, used_quota :spent, request_count :n",
                        "ExpressionAttributeValues": to_values({":back": back, ":spent": spent, ":n": requests})}},
        ]
        key_values = {":spent": spent, **({":back": back} if lease["limited_key"] else {})}
        writes.append({"Update": {
            "TableName": _table(), "Key": to_item({"pk": key_pk(lease["key_hash"]), "sk": "KEY"}),
            "UpdateExpression": "ADD used_quota :spent" + (", remain_quota :back" if lease["limited_key"] else ""),
            # The key may have been deleted since: its used counters go with it.
            "ConditionExpression": "attribute_exists(pk)",
            "ExpressionAttributeValues": to_values(key_values)}})
        for day, counters in sorted(day_counters_of(lease).items()):
            writes.append(day_total_additions(_table(), user_id=user_id, day=day, counters=counters))
        try:
            transact(writes, attempts=_FOLD_ATTEMPTS)
        except Exception as exc:
            if not is_condition_failure(exc):
                raise
            reasons = cancellation_reasons(exc)
            if len(reasons) > 2 and reasons[2] == "ConditionalCheckFailed" and reasons[0] != "ConditionalCheckFailed":
                _drop_key_write(writes)
                transact(writes, attempts=_FOLD_ATTEMPTS)
                return True
            continue  # closed meanwhile, or a close landed after the read: read again
        return True
    return False


def _drop_key_write(writes: list[dict[str, Any]]) -> None:
    del writes[2]


def day_counters_of(lease: dict[str, Any]) -> dict[date, dict[str, int]]:
    """A lease record's day counters, per day, named as `day_counters` names them."""
    days: dict[date, dict[str, int]] = {}
    for name, value in lease.items():
        if isinstance(name, str) and name.startswith(_COUNTER_PREFIX):
            _, day, counter = name.split("|", 2)
            days.setdefault(date.fromisoformat(day), {})[counter] = int(value)
    return days


# --- readers -------------------------------------------------------------------------------------

def open_leases(user_id: int) -> list[dict[str, Any]]:
    """The user's open leases, read consistently from each lease shard."""
    found: list[dict[str, Any]] = []
    for partition in lease_pks(user_id):
        params: dict[str, Any] = {
            "TableName": _table(), "KeyConditionExpression": "pk = :pk", "ConsistentRead": True,
            "FilterExpression": "#s = :open", "ExpressionAttributeNames": {"#s": "status"},
            "ExpressionAttributeValues": to_values({":pk": partition, ":open": OPEN}),
        }
        while True:
            answer = _db().query(**params)
            found.extend(from_item(item) for item in answer.get("Items", []))
            if "LastEvaluatedKey" not in answer:
                break
            params["ExclusiveStartKey"] = answer["LastEvaluatedKey"]
    return found


def with_open_leases(user_id: int, read: Any, attempts: int = 5) -> tuple[Any, list[dict[str, Any]]]:
    """`read()` (the profile, a key, day totals) and the user's open leases as of one moment: the
    leases are read before and after, and again while a lease was granted or folded in between
    (a fold moves a lease's units into the profile in one transaction)."""
    before = open_leases(user_id)
    result = read()
    for _ in range(attempts):
        after = open_leases(user_id)
        if {lease["lease_id"] for lease in after} == {lease["lease_id"] for lease in before}:
            return result, after
        before, result = after, read()
    return result, before


def account_view(profile: dict[str, Any], leases: list[dict[str, Any]]) -> dict[str, Any]:
    """The profile as users see it: the units on open leases are still the account's (`quota`)
    until spent, and what they spent is used (`used_quota`, `request_count`)."""
    spent = sum(int(lease["spent"]) for lease in leases)
    unspent = sum(int(lease["granted"]) - int(lease["spent"]) for lease in leases)
    return {**profile, "quota": int(profile.get("quota", 0)) + unspent,
            "used_quota": int(profile.get("used_quota", 0)) + spent,
            "request_count": int(profile.get("request_count", 0)) + sum(int(lease["requests"]) for lease in leases)}


def key_view(key: dict[str, Any], leases: list[dict[str, Any]]) -> dict[str, Any]:
    """A key as users see it, its open leases included (as `account_view`)."""
    mine = [lease for lease in leases if lease.get("key_hash") == key.get("pk", "").removeprefix("KEY#")
            or lease.get("key_id") == key.get("key_id")]
    spent = sum(int(lease["spent"]) for lease in mine)
    view = {**key, "used_quota": int(key.get("used_quota", 0)) + spent}
    if not key.get("unlimited"):
        view["remain_quota"] = int(key.get("remain_quota", 0)) + sum(
            int(lease["granted"]) - int(lease["spent"]) for lease in mine)
    return view


def open_day_counters(leases: list[dict[str, Any]]) -> dict[date, dict[str, int]]:
    """The open leases' day counters, added up per day."""
    days: dict[date, dict[str, int]] = {}
    for lease in leases:
        for day, counters in day_counters_of(lease).items():
            into = days.setdefault(day, {})
            for name, value in counters.items():
                into[name] = into.get(name, 0) + value
    return days


# --- the sweeper's part ------------------------------------------------------------------------------

def is_lease(record: dict[str, Any]) -> bool:
    return str(record.get("sk", "")).startswith("LEASE#")


def sweep(records: Iterator[dict[str, Any]]) -> dict[str, int]:
    """Folds the overdue open leases among `records` (the hold index's overdue items)."""
    counts = {"leases_folded": 0, "leases_already_closed": 0}
    for record in records:
        try:
            folded = fold(int(record["user_id"]), record["lease_id"], reason="swept: its holder stopped")
        except Exception:
            logger.exception("sweeping a lease failed", extra={"lease_id": record.get("lease_id")})
            continue
        counts["leases_folded" if folded else "leases_already_closed"] += 1
        if folded:
            logger.warning("stale lease folded", extra={"lease_id": record["lease_id"]})
    return counts


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


__all__ = ["LeasePool", "Lease", "fold", "sweep", "pool", "reset_pool", "open_leases", "account_view", "key_view",
           "open_day_counters", "with_open_leases", "REFUNDED", "SETTLED"]
