"""A principal's limits enforced: requests and tokens per minute, concurrent requests, and a budget
that resets each UTC day, week or month. A user has one set, each of its keys another (the plain
value `limit_values.Limits`, kept on the profile or key record); a request must pass both. The
live counters sit in items of their own, never on the profile or the key item (see "enforcement"
below), moved by the admission step (`LimitStep`) when a request enters and when it closes.

- `rpm` counts the requests admitted in the current UTC minute (a fixed window: a client sending
  one request at a time gets exactly `rpm` a minute; across the turn of a minute up to twice
  that may pass within 60 s).
- `max_parallel` counts synchronous requests between their reservation and their settlement; a
  request whose function died is counted until the sweeper refunds its hold.
- a budget counts the holds and then the charges of the current day, ISO week or month; a price
  above its hold is charged to the quota (as far as it goes) but not beyond the budget's hold.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

from gateway.errors import InsufficientQuota, RateLimited
from gateway.limit_values import PERIODS, Limits
from gateway.prices import UNITS_PER_USD


def period_bounds(period: str, now: datetime) -> tuple[datetime, datetime]:
    """The budget period containing `now`, calendar-aligned in UTC: [start, end). A week starts
    on Monday."""
    now = now.astimezone(UTC)
    day = datetime(now.year, now.month, now.day, tzinfo=UTC)
    match period:
        case "daily":
            return day, day + timedelta(days=1)
        case "weekly":
            start = day - timedelta(days=day.weekday())
            return start, start + timedelta(days=7)
        case "monthly":
            start = day.replace(day=1)
            end = start.replace(year=start.year + 1, month=1) if start.month == 12 else start.replace(
                month=start.month + 1)
            return start, end
    raise ValueError(f"unknown budget period {period!r}")


def shown(record: dict[str, Any] | None, scope: str, now: datetime) -> dict[str, Any]:
    """A profile's or a key's limits as the account routes show them (`scope`: `limit_scope`), with
    what is left of the budget in its current period (read from its window item) and when that
    period ends (epoch seconds)."""
    limits = Limits.of(record)
    view = limits.view()
    if limits.budget_units:
        spent = _counter(scope, "BUDGET#" + window_ids(now)[limits.budget_period], "spent")
        view["budget_left_usd"] = float(Decimal(max(limits.budget_units - spent, 0)) / UNITS_PER_USD)
        view["budget_resets_at"] = int(period_bounds(limits.budget_period, now)[1].timestamp())
    return view


def window_ids(now: datetime) -> dict[str, str]:
    """The id of the current window of each kind: the minute of `rpm`, and each budget period's,
    prefixed by its kind so that one stored id names its own kind."""
    now = now.astimezone(UTC)
    ids = {"minute": now.strftime("m%Y%m%d%H%M")}
    for period in PERIODS:
        start, _ = period_bounds(period, now)
        ids[period] = period[0].upper() + start.strftime("%Y-%m-%d")
    return ids




# --- enforcement: an admission step (`gateway.admission.steps`) -----------------------------------
#
# State lives in items of its own, one partition per limited principal (`LIMIT#U#<user id>`,
# `LIMIT#K#<key id>`), never on the profile or the key item:
#   `RPM#<minute>`  `taken`: requests admitted in that UTC minute, taken by instances in slices;
#   `PAR`           `inflight`, `touched_at`: synchronous requests running;
#   `BUDGET#<id>`   `spent`: holds and then charges of that day, week or month (`window_ids`).

# At this rpm or more an instance takes a slice of the minute's allowance per write; below it, one
# request per write (the write is the request's only extra round trip).
SLICE_FROM_RPM = 100
SLICES_PER_MINUTE = 20
# An instance gives back what it holds of a minute's allowance once it has not used it this long
# (checked on its next request of any principal); the rest ends with the minute.
IDLE_SLICE_SECONDS = 2.0
# How long an instance reuses a user's limits (a key's come with the key cache).
USER_LIMITS_SECONDS = 5.0
_MINUTE_TTL_SECONDS = 180
_BUDGET_TTL_SECONDS = 40 * 86400


def clock() -> datetime:
    """The limits' clock (tests freeze it)."""
    return datetime.now(UTC)


def limit_scope(*, user_id: int | None = None, key_id: str | None = None) -> str:
    """The partition of a user's or a key's limit counters."""
    return f"LIMIT#U#{user_id}" if user_id is not None else f"LIMIT#K#{key_id}"


def _table() -> str:
    from gateway.settings import get_settings

    return get_settings().accounts_table


def _db() -> Any:
    from gateway.store.aws import client

    return client("dynamodb")


def _item(scope: str, sk: str) -> dict[str, Any]:
    """A counter item as it is now (a strongly consistent read: it decides admissions), or {}."""
    from gateway.store.aws import from_item, to_item

    return from_item(_db().get_item(TableName=_table(), Key=to_item({"pk": scope, "sk": sk}),
                                    ConsistentRead=True).get("Item")) or {}


def _counter(scope: str, sk: str, name: str) -> int:
    return int(_item(scope, sk).get(name) or 0)


def _add(scope: str, sk: str, name: str, amount: int, *, at_most: int | None = None,
         expires: int | None = None, extra: dict[str, Any] | None = None, read: bool = False) -> int | None:
    """Adds `amount` to a counter item's `name`; with `at_most`, only while the result stays at or
    below it. Returns None when the condition refused it; else, with `read`, the counter right
    after it (read again: another instance's write may be in it), without, `amount`.

    One write, exactly once: an `ADD` is not idempotent, and when DynamoDB applied it but the
    answer was lost, botocore sends it again (a second count, or a refusal by the counter's own
    first count). So it goes as a one-item `TransactWriteItems`, which DynamoDB applies once per
    `ClientRequestToken` (botocore fills one in per call and keeps it for its retries)."""
    from gateway.store.aws import to_item, to_values

    sets = [f"{k} = :{k}" for k in (extra or {})] + (["expires_ttl = :ttl"] if expires else [])
    values: dict[str, Any] = {":n": amount, **{f":{k}": v for k, v in (extra or {}).items()}}
    if expires:
        values[":ttl"] = expires
    update: dict[str, Any] = {
        "TableName": _table(), "Key": to_item({"pk": scope, "sk": sk}),
        "UpdateExpression": ("SET " + ", ".join(sets) + " " if sets else "") + f"ADD {name} :n"}
    if at_most is not None:
        update["ConditionExpression"] = f"attribute_not_exists({name}) OR {name} <= :cap"
        values[":cap"] = at_most - amount
    update["ExpressionAttributeValues"] = to_values(values)
    if not _write_once(update):
        return None
    return _counter(scope, sk, name) if read else amount


def _write_once(update: dict[str, Any]) -> bool:
    """One conditional update applied exactly once (see `_add`; a cancellation for a conflict or
    for throughput asked again, `store.aws.transact`); False when its condition refused it."""
    from gateway.aws_failures import cancellation_reasons
    from gateway.store.aws import transact

    try:
        transact(_db(), [{"Update": update}])
    except Exception as exc:
        if cancellation_reasons(exc)[:1] == ["ConditionalCheckFailed"]:
            return False
        raise
    return True


@dataclass
class _Slice:
    left: int
    used_at: float
    full_until: float = 0.0  # the minute was found spent: refused locally until then
    seen: int = 0  # the minute's `taken` as this instance last wrote it


def _rpm_refusal(whose: str, rpm: int, now: datetime) -> RateLimited:
    wait = 60 - now.astimezone(UTC).second
    return RateLimited(f"{whose} rpm limit of {rpm} requests per minute is reached; retry in {wait} s",
                       headers={"Retry-After": str(wait), **openai_headers(
                           (("requests", rpm, 0, _minute_end(now)),))})


def _minute_end(now: datetime) -> int:
    return int(now.timestamp()) // 60 * 60 + 60


RateState = tuple[tuple[str, int, int, int], ...]  # (requests|tokens, limit, remaining, resets at epoch s)


def openai_headers(state: RateState, now: float | None = None) -> dict[str, str]:
    """`x-ratelimit-{limit,remaining,reset}-{requests,tokens}` (the reset as openai writes it: `12s`)."""
    now = time.time() if now is None else now
    headers = {}
    for kind, limit, remaining, resets in state:
        headers[f"x-ratelimit-limit-{kind}"] = str(limit)
        headers[f"x-ratelimit-remaining-{kind}"] = str(max(remaining, 0))
        headers[f"x-ratelimit-reset-{kind}"] = f"{max(int(resets - now), 0)}s"
    return headers


def anthropic_headers(state: RateState) -> dict[str, str]:
    """`anthropic-ratelimit-{requests,tokens}-{limit,remaining,reset}` (the reset in RFC 3339)."""
    headers = {}
    for kind, limit, remaining, resets in state:
        headers[f"anthropic-ratelimit-{kind}-limit"] = str(limit)
        headers[f"anthropic-ratelimit-{kind}-remaining"] = str(max(remaining, 0))
        headers[f"anthropic-ratelimit-{kind}-reset"] = datetime.fromtimestamp(resets, UTC).strftime(
            "%Y-%m-%dT%H:%M:%SZ")
    return headers


@dataclass
class _Held:
    """What one admitted request took: the counters `leave` gives back."""
    parallel: list[str] = field(default_factory=list)  # scopes
    tokens: list[tuple[str, str]] = field(default_factory=list)  # (scope, minute sk) of the tpm hold
    budgets: list[tuple[str, str]] = field(default_factory=list)  # (scope, window sk)


class LimitStep:
    """rpm, max_parallel and budgets of the request's key and user, as an admission step.

    - rpm: an instance takes a slice of the current minute's allowance in one conditional write
      (`taken` never passes the limit, so however many instances, never more than `rpm` a
      minute) and admits requests from it in memory; 1 per write below `SLICE_FROM_RPM`, else
      rpm/`SLICES_PER_MINUTE`. When the slice a write asks for no longer fits, the instance takes
      what is left. Unused capacity returns when the holder has not used it for
      `IDLE_SLICE_SECONDS` (at its next request) and in any case at the turn of the minute.
    - max_parallel: one conditional write in (`inflight` below the limit) and one out. A count
      left by a function that died is dropped once no request has entered or left for longer than
      a request can run (`REQUEST_HOLD_SECONDS`).
    - budget: the hold is added to the period's `spent` in one conditional write (never past the
      budget, so concurrency never overspends it); the close gives back the unused part to the
      window it was taken from; a charge above the hold is added only as far as the budget goes.
    """

    name = "limits"

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._slices: dict[tuple[str, str], _Slice] = {}
        self._taking: dict[str, threading.Lock] = {}
        self._users: dict[int, tuple[float, Limits]] = {}
        self._held: dict[str, _Held] = {}

    def reset(self) -> None:
        with self._lock:
            self._slices.clear()
            self._users.clear()
            self._held.clear()

    # --- the principal's limits ---

    def user_limits(self, user_id: int) -> Limits:
        """The user's limits, read from its profile at most once per `USER_LIMITS_SECONDS` per
        instance (a change takes effect within them, as a key's does within the key cache's)."""
        from gateway.store.table import PROFILE, user_pk

        now = time.monotonic()
        with self._lock:
            cached = self._users.get(user_id)
        if cached is not None and now - cached[0] < USER_LIMITS_SECONDS:
            return cached[1]
        from gateway.store.aws import from_item, to_item

        profile = from_item(_db().get_item(TableName=_table(), Key=to_item(
            {"pk": user_pk(user_id), "sk": PROFILE})).get("Item"))
        found = Limits.of(profile)
        with self._lock:
            self._users[user_id] = (now, found)
        return found

    def scopes(self, principal: Any) -> list[tuple[str, str, Limits]]:
        """(scope, whose, limits) of the request's key and user, the limited ones."""
        found = []
        key_limits = getattr(principal, "limits", None) or Limits()
        if key_limits.any:
            found.append((limit_scope(key_id=principal.key_id), "this key's", key_limits))
        user_limits = self.user_limits(principal.user_id)
        if user_limits.any:
            found.append((limit_scope(user_id=principal.user_id), "the account's", user_limits))
        return found

    # --- the step ---

    def enter(self, request: Any) -> None:
        now = clock()
        held = _Held()
        seen: dict[str, tuple[int, int]] = {}  # kind -> the tightest (limit, remaining) of key and user

        def see(kind: str, limit: int, remaining: int) -> None:
            if kind not in seen or remaining < seen[kind][1]:
                seen[kind] = (limit, remaining)

        try:
            for scope, whose, limits in self.scopes(request.principal):
                if limits.rpm:
                    see("requests", limits.rpm, self._admit_rpm(scope, whose, limits.rpm, now))
                if limits.tpm:
                    see("tokens", limits.tpm, self._hold_tokens(scope, whose, limits.tpm, request.tokens, now, held)
                        if request.tokens else limits.tpm)
                if limits.budget_units:
                    self._hold_budget(scope, whose, limits, request.units, now, held)
                if limits.max_parallel and request.parallel:
                    self._enter_parallel(scope, whose, limits.max_parallel, held)
        except BaseException:
            self._release(held, request.units, None, request.tokens, None)
            raise
        request.notes["limits"] = held
        request.notes["ratelimit"] = tuple((kind, limit, remaining, _minute_end(now))
                                           for kind, (limit, remaining) in sorted(seen.items()))
        with self._lock:
            self._held[request.request_id] = held

    def leave(self, request: Any, units: int | None) -> None:
        with self._lock:
            held = self._held.pop(request.request_id, None)
        if held is None:
            held = request.notes.get("limits")
        if held is not None:
            self._release(held, request.units, units, request.tokens, request.notes.get("tokens_used"))

    def _release(self, held: _Held, hold: int, units: int | None, tokens: int, tokens_used: int | None) -> None:
        charged = units or 0
        for scope, minute in held.tokens:  # the tokens billed replace the hold (none when refused or refunded)
            used = tokens_used if tokens_used is not None and units else 0
            # (a stream may end minutes after its minute, its counter gone by TTL: the write makes
            # it again, so it carries a TTL too)
            _add(scope, minute, "tokens", used - tokens, expires=int(clock().timestamp()) + _MINUTE_TTL_SECONDS)
        above = charged - hold  # what the charge passes its hold by (below it: what goes back)
        for scope, window in held.budgets:
            if above <= 0:
                _add(scope, window, "spent", above)
            else:  # above the hold: as far as the budget goes
                limit = self._budget_of(scope)
                if limit and _add(scope, window, "spent", above, at_most=limit) is None:
                    spent = _counter(scope, window, "spent")
                    if limit > spent:
                        _add(scope, window, "spent", min(limit - spent, above), at_most=limit)
        for scope in held.parallel:
            _add(scope, "PAR", "inflight", -1, extra={"touched_at": int(clock().timestamp())})

    def _budget_of(self, scope: str) -> int:
        from gateway.store.keys import KeysRepository
        from gateway.store.users import UsersRepository

        kind, _, ident = scope.removeprefix("LIMIT#").partition("#")
        if kind == "U":
            return Limits.of(UsersRepository().raw_user(int(ident), consistent=True)).budget_units
        repo = KeysRepository()
        return Limits.of(repo.raw_key(repo.key_hash_for_id(ident))).budget_units

    def _admit_rpm(self, scope: str, whose: str, rpm: int, now: datetime) -> int:
        """Admits one request under `rpm`; what is left of the minute as this instance sees it."""
        minute = window_ids(now)["minute"]
        with self._lock:
            self._return_idle(time.monotonic(), minute)
            if (left := self._take_local(scope, minute, now, whose, rpm)) is not None:
                return left
            taking = self._taking.setdefault(scope, threading.Lock())
        with taking:  # one write per principal at a time: the others wait for its slice
            with self._lock:
                if (left := self._take_local(scope, minute, now, whose, rpm)) is not None:
                    return left
            want = 1 if rpm < SLICE_FROM_RPM else max(rpm // SLICES_PER_MINUTE, 1)
            expires = int(now.timestamp()) + _MINUTE_TTL_SECONDS
            sk = "RPM#" + minute
            while (taken := _add(scope, sk, "taken", want, at_most=rpm, expires=expires, read=True)) is None:
                left = rpm - _counter(scope, sk, "taken")
                if left < 1:
                    with self._lock:  # refused here without a write for a second, then asked again
                        self._slices[(scope, minute)] = _Slice(0, time.monotonic(), full_until=time.monotonic() + 1)
                    raise _rpm_refusal(whose, rpm, now)
                want = min(want, left)
            with self._lock:
                mine = self._slices.get((scope, minute))
                if mine is None or mine.full_until:
                    mine = self._slices[(scope, minute)] = _Slice(0, time.monotonic())
                mine.left += want - 1
                mine.used_at = time.monotonic()
                mine.seen = taken
                return max(rpm - taken, 0) + mine.left

    def _take_local(self, scope: str, minute: str, now: datetime, whose: str, rpm: int) -> int | None:
        """Under the lock: what is left of the minute when this instance's slice admits the
        request, else None; raises while the minute is known to be spent."""
        mine = self._slices.get((scope, minute))
        if mine is None:
            return None
        if mine.left:  # never below 0: it grows by a grant less the request it admits, and drops one at a time
            mine.left -= 1
            mine.used_at = time.monotonic()
            return max(rpm - mine.seen, 0) + mine.left
        if mine.full_until and time.monotonic() < mine.full_until:
            raise _rpm_refusal(whose, rpm, now)
        return None

    def _hold_tokens(self, scope: str, whose: str, tpm: int, tokens: int, now: datetime, held: _Held) -> int:
        """A request's worst case in tokens is held on the minute's `TPM#` counter (never past the
        limit); its close replaces the hold with the tokens billed."""
        minute = "TPM#" + window_ids(now)["minute"]
        used = _add(scope, minute, "tokens", tokens, at_most=tpm, expires=int(now.timestamp()) + _MINUTE_TTL_SECONDS,
                    read=True) \
            if tokens <= tpm else None
        if used is None:
            wait = 60 - now.astimezone(UTC).second
            raise RateLimited(f"{whose} tpm limit of {tpm} tokens per minute is reached (this request may use up to "
                              f"{tokens}); retry in {wait} s", headers={"Retry-After": str(wait), **openai_headers(
                                  (("tokens", tpm, 0, _minute_end(now)),))})
        held.tokens.append((scope, minute))
        return tpm - used

    def _return_idle(self, mono: float, minute: str) -> None:
        """Under the lock: drops slices of past minutes and gives back idle ones of this minute."""
        for (scope, window), mine in list(self._slices.items()):
            if window != minute:
                del self._slices[(scope, window)]
            elif mine.left and mono - mine.used_at >= IDLE_SLICE_SECONDS:
                _add(scope, "RPM#" + window, "taken", -mine.left)
                del self._slices[(scope, window)]

    def _hold_budget(self, scope: str, whose: str, limits: Limits, units: int, now: datetime,
                     held: _Held) -> None:
        period = limits.budget_period
        window = "BUDGET#" + window_ids(now)[period]
        _, resets = period_bounds(period, now)
        if units > limits.budget_units or _add(
                scope, window, "spent", units, at_most=limits.budget_units,
                expires=int(resets.timestamp()) + _BUDGET_TTL_SECONDS) is None:
            raise InsufficientQuota(
                f"{whose} {period} budget of {limits.budget_usd} USD is spent (this request needs up to "
                f"{Decimal(units) / UNITS_PER_USD} USD); it resets at {resets.strftime('%Y-%m-%dT%H:%M:%SZ')}",
                code="budget_exceeded", headers={"X-Budget-Resets-At": str(int(resets.timestamp()))})
        held.budgets.append((scope, window))

    def _enter_parallel(self, scope: str, whose: str, limit: int, held: _Held) -> None:
        from gateway.admission.ledger import REQUEST_HOLD_SECONDS
        from gateway.store.aws import to_item, to_values

        now = int(clock().timestamp())
        if _add(scope, "PAR", "inflight", 1, at_most=limit, extra={"touched_at": now}) is None:
            stale = int(_item(scope, "PAR").get("touched_at") or 0)
            if now - stale <= REQUEST_HOLD_SECONDS:
                raise RateLimited(f"{whose} max_parallel of {limit} concurrent requests is reached; "
                                  "retry when one of them has finished", headers={"Retry-After": "1"})
            # every counted request is long dead: start the count afresh with this one
            if not _write_once({"TableName": _table(), "Key": to_item({"pk": scope, "sk": "PAR"}),
                                "UpdateExpression": "SET inflight = :one, touched_at = :now",
                                "ConditionExpression": "touched_at = :stale",
                                "ExpressionAttributeValues": to_values({":one": 1, ":now": now, ":stale": stale})}):
                raise RateLimited(f"{whose} max_parallel of {limit} concurrent requests is reached; "
                                  "retry when one of them has finished", headers={"Retry-After": "1"})
        held.parallel.append(scope)


_step = LimitStep()


def step() -> LimitStep:
    return _step


def durable_notes(request: Any) -> list[list[str]]:
    """What a task's durable reservation keeps of its admission (the budget windows it holds on),
    so that whichever function closes it gives back to those windows."""
    held = request.notes.get("limits")
    return [list(pair) for pair in held.budgets] if held is not None else []


def durable_request(request: Any, budgets: list[list[str]] | None) -> Any:
    """The request as `leave` needs it when a durable reservation closes in another process."""
    request.notes["limits"] = _Held(budgets=[(str(s), str(w)) for s, w in (budgets or [])])
    return request
