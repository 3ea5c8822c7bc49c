"""Channel health: a failing upstream is cooled down, skipped, probed and brought back.

**States.** A channel is `healthy`, `cooling` (out of the rotation until a probe or a served
request says it works again) or `disabled` (by an operator: never picked, never lifted by a probe).

**Cooldown** (`after_failure`, one rule for every family):

- a failure worth retrying elsewhere (408, 409, 429, 5xx, no answer, a connect or first-byte
  timeout) counts; `GATEWAY_CHANNEL_FAILURES` of them (3) within
  `GATEWAY_CHANNEL_FAILURE_WINDOW_SECONDS` (60, counted from the first failure of the window)
  cool the channel down for `GATEWAY_CHANNEL_COOLDOWN_SECONDS` (30);
- an upstream `Retry-After` cools it down at once, for that long (the upstream said when);
- a refusal of the channel's own credentials or account (fault `account`: 401, 402, 403, 407,
  and whatever a provider's error table says is its account, such as Gemini's 400
  `API_KEY_INVALID` or DashScope's 400 `Arrearage`) cools it down at once for
  `GATEWAY_CHANNEL_COOLDOWN_MAX_SECONDS` (600) and is logged as an operator problem;
- every cooldown is capped at the maximum. A client's own mistake (400, 404, 413, 422) never counts.

**Recovery** (`after_probe`, `after_success`): once its period has ended, the sweeper probes
the channel (`routing/probes.py`, never billed): success makes it healthy; failure cools it down
again for twice the last period (or the upstream's `Retry-After`, or the maximum for refused
credentials). A request a cooling channel served (tried because nothing else was left) also
brings it back.

**Shared, cached, written rarely.** The state of every channel is one item per channel in the
accounts table (`pk` `CHANNEL_HEALTH`, `sk` the channel name), read with one query and cached by
each instance for `GATEWAY_CHANNEL_HEALTH_CACHE_SECONDS` (5). Only a failure, a recovery, a probe
of a cooling channel and an operator's command write, each as a read and a put conditioned on the
item's `version` (retried when another instance wrote first), so instances never lose each other's
failures. A success on a healthy channel writes nothing. The store failing never fails a request:
the last state read stays in force and the error is logged.
"""

from __future__ import annotations

import dataclasses
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Protocol

from gateway.observability import channel_account_refused, channel_state, logger
from gateway.settings import get_settings
from gateway.store.aws import store_call_ahead
from gateway.upstreams.errors import ACCOUNT, default_fault

HEALTHY, COOLING, DISABLED = "healthy", "cooling", "disabled"
#: The gauge's value per state (`ChannelState` metric).
GAUGE = {HEALTHY: 0, COOLING: 1, DISABLED: 2}
PARTITION = "CHANNEL_HEALTH"
_WRITE_ATTEMPTS = 5
_ERROR_CHARS = 300


@dataclass(frozen=True)
class Policy:
    """The cooldown rule's numbers (settings)."""

    failures: int = 3
    window: float = 60.0
    cooldown: float = 30.0
    cooldown_max: float = 600.0

    @classmethod
    def from_settings(cls) -> Policy:
        s = get_settings()
        return cls(failures=max(1, s.channel_failures), window=s.channel_failure_window_seconds,
                   cooldown=s.channel_cooldown_seconds,
                   cooldown_max=max(s.channel_cooldown_max_seconds, s.channel_cooldown_seconds))

    def clamp(self, seconds: float) -> float:
        return min(self.cooldown_max, max(1.0, seconds))


@dataclass(frozen=True)
class Failure:
    """What went wrong on one attempt or probe, as health needs it."""

    status: int | None
    message: str
    retry_after: float | None = None
    #: Whose fault (`upstreams/errors.py`); by default from the status.
    fault: str = ""

    @property
    def account(self) -> bool:
        return (self.fault or default_fault(self.status)) == ACCOUNT

    @classmethod
    def of(cls, exc: Any) -> Failure:
        status = getattr(exc, "status", None)
        return cls(status, str(getattr(exc, "message", exc))[:_ERROR_CHARS],
                   getattr(exc, "retry_after", None), getattr(exc, "fault", None) or default_fault(status))


@dataclass(frozen=True)
class ChannelHealth:
    """One channel's health item. Times are epoch seconds; 0 means never."""

    name: str
    failures: int = 0  # failures counted in the current window
    window_start: float = 0.0
    cooling_until: float = 0.0  # 0: not cooling
    period: float = 0.0  # the current cooldown's length (doubled by a failed probe)
    last_error: str = ""
    last_status: int | None = None
    last_fault: str = ""  # whose fault the last failure was (client, account, capacity, upstream)
    last_failure_at: float = 0.0
    last_probe_at: float = 0.0
    last_probe: str = ""  # "ok", or what the probe met
    last_probe_ms: int = 0  # the last probe's response time when it was timed (an operator's test); 0: unknown
    disabled: bool = False
    changed_at: float = 0.0
    version: int = 0

    @property
    def state(self) -> str:
        if self.disabled:
            return DISABLED
        return COOLING if self.cooling_until else HEALTHY

    def probe_due(self, now: float) -> bool:
        return self.state == COOLING and self.cooling_until <= now

    def view(self) -> dict[str, Any]:
        """What an operator reads (`make admin ARGS=channels`)."""
        return {"state": self.state, "cooling_until": _iso(self.cooling_until) if self.state == COOLING else None,
                "cooldown_seconds": self.period if self.state == COOLING else None,
                "failures": self.failures, "last_error": self.last_error or None, "last_status": self.last_status,
                "last_fault": self.last_fault or None, "last_failure_at": _iso(self.last_failure_at),
                "last_probe_at": _iso(self.last_probe_at),
                "last_probe": self.last_probe or None, "last_probe_ms": self.last_probe_ms or None,
                "changed_at": _iso(self.changed_at)}


def _iso(moment: float) -> str | None:
    return datetime.fromtimestamp(moment, UTC).isoformat(timespec="seconds") if moment else None


# ---- the rule: pure transitions (health, now, what happened) -> (new health, event or None) ----

Change = tuple[ChannelHealth, str | None]


def _cool(health: ChannelHealth, now: float, period: float) -> ChannelHealth:
    return dataclasses.replace(health, failures=0, window_start=0.0, cooling_until=now + period, period=period,
                               changed_at=now)


def after_failure(health: ChannelHealth, failure: Failure, policy: Policy, now: float) -> Change:
    """A failed attempt that counts against the channel."""
    noted = dataclasses.replace(health, last_error=failure.message, last_status=failure.status,
                                last_fault=failure.fault, last_failure_at=now)
    if health.disabled:
        return noted, None
    if failure.account:
        period = policy.cooldown_max
    elif failure.retry_after is not None:
        period = policy.clamp(failure.retry_after)
    else:
        period = 0.0
    if health.cooling_until:  # tried as the last one left: only a longer wait is news
        if period and now + period > health.cooling_until:
            return _cool(noted, now, period), "channel_cooldown"
        return health, None
    if period:
        return _cool(noted, now, period), "channel_cooldown"
    counting = health.failures > 0 and now - health.window_start < policy.window
    failures, start = (health.failures + 1, health.window_start) if counting else (1, now)
    if failures >= policy.failures:
        return _cool(noted, now, policy.clamp(policy.cooldown)), "channel_cooldown"
    return dataclasses.replace(noted, failures=failures, window_start=start), None


def after_success(health: ChannelHealth, now: float) -> Change:
    """A served request: brings a cooling channel back; nothing else changes."""
    if health.state != COOLING:
        return health, None
    return dataclasses.replace(health, cooling_until=0.0, period=0.0, failures=0, window_start=0.0,
                               changed_at=now), "channel_recovered"


def after_probe(health: ChannelHealth, failure: Failure | None, policy: Policy, now: float,
                latency_ms: int = 0) -> Change:
    """The sweeper's probe: success brings the channel back, failure cools it down again, longer."""
    probed = dataclasses.replace(health, last_probe_at=now, last_probe_ms=latency_ms,
                                 last_probe="ok" if failure is None else failure.message)
    if health.state != COOLING:
        return probed, None
    if failure is None:
        back, event = after_success(probed, now)
        return back, event
    probed = dataclasses.replace(probed, last_error=failure.message, last_status=failure.status,
                                 last_fault=failure.fault, last_failure_at=now)
    if failure.account:
        period = policy.cooldown_max
    elif failure.retry_after is not None:
        period = policy.clamp(failure.retry_after)
    else:
        period = policy.clamp(max(health.period, policy.cooldown) * 2)
    return _cool(probed, now, period), "channel_cooldown_extended"


def after_command(health: ChannelHealth, enable: bool, now: float) -> Change:
    """An operator's `channel-enable` (healthy at once: disabled and cooldown lifted) or `channel-disable`."""
    if enable:
        return dataclasses.replace(health, disabled=False, cooling_until=0.0, period=0.0, failures=0,
                                   window_start=0.0, changed_at=now), "channel_enabled"
    return dataclasses.replace(health, disabled=True, changed_at=now), "channel_disabled"


# ---- where the items live ----------------------------------------------------------------------

class HealthStore(Protocol):
    def all(self) -> list[ChannelHealth]: ...

    def get(self, name: str) -> ChannelHealth: ...

    def put(self, health: ChannelHealth) -> bool:
        """Writes `health` (its `version` one above the stored one); False when another writer won."""
        ...


_FIELDS = [f.name for f in dataclasses.fields(ChannelHealth)]


class DynamoHealthStore:
    """The health items in the accounts table (`pk` CHANNEL_HEALTH, `sk` the channel name)."""

    def __init__(self, table: str | None = None):
        self.table = table or get_settings().accounts_table

    @staticmethod
    def _health(item: dict[str, Any]) -> ChannelHealth:
        values = {name: item[name] for name in _FIELDS if name in item and name != "name"}
        return ChannelHealth(name=str(item["sk"]), **values)

    def all(self) -> list[ChannelHealth]:
        from gateway.store.aws import client, from_item, to_values

        found, start = [], None
        while True:
            page = client("dynamodb").query(TableName=self.table, KeyConditionExpression="pk = :p",
                                            ExpressionAttributeValues=to_values({":p": PARTITION}),
                                            ConsistentRead=True, **({"ExclusiveStartKey": start} if start else {}))
            found += [self._health(from_item(item)) for item in page.get("Items", [])]
            start = page.get("LastEvaluatedKey")
            if not start:
                return found

    def get(self, name: str) -> ChannelHealth:
        from gateway.store.aws import client, from_item, to_item

        item = client("dynamodb").get_item(TableName=self.table, Key=to_item({"pk": PARTITION, "sk": name}),
                                           ConsistentRead=True).get("Item")
        return self._health(from_item(item)) if item else ChannelHealth(name)

    def put(self, health: ChannelHealth) -> bool:
        from gateway.store.aws import client, is_condition_failure, to_item, to_values

        values = dataclasses.asdict(health)
        item = {**{k: v for k, v in values.items() if k != "name"}, "pk": PARTITION, "sk": health.name}
        condition = ({"ConditionExpression": "attribute_not_exists(pk)"} if health.version == 1 else
                     {"ConditionExpression": "version = :v",
                      "ExpressionAttributeValues": to_values({":v": health.version - 1})})
        try:
            client("dynamodb").put_item(TableName=self.table, Item=to_item(item), **condition)
        except Exception as exc:
            if is_condition_failure(exc):
                return False
            raise
        return True


# ---- one instance's view: the cache, the writes, the events --------------------------------------

class HealthBook:
    """The health every request of this instance reads, and the one place that changes it."""

    def __init__(self, store: HealthStore | None = None, *, clock: Callable[[], float] = time.time,
                 cache_seconds: float | None = None, policy: Policy | None = None):
        self._store = store
        self.clock = clock
        self._cache_seconds = cache_seconds
        self._policy = policy
        self._lock = threading.Lock()
        self._known: dict[str, ChannelHealth] = {}
        self._read_at: float | None = None

    @property
    def store(self) -> HealthStore:
        if self._store is None:
            self._store = DynamoHealthStore()
        return self._store

    @property
    def policy(self) -> Policy:
        return self._policy or Policy.from_settings()

    def _fresh(self) -> bool:
        ttl = get_settings().channel_health_cache_seconds if self._cache_seconds is None else self._cache_seconds
        return self._read_at is not None and self.clock() - self._read_at < ttl

    def snapshot(self) -> dict[str, ChannelHealth]:
        """Every channel's health as this instance knows it (read again once the cache is old)."""
        if not self._fresh():
            store_call_ahead()
            with self._lock:
                if not self._fresh():
                    self._read_at = self.clock()
                    try:
                        self._known = {h.name: h for h in self.store.all()}
                    except Exception as exc:  # noqa: BLE001 - the last state read stays in force
                        logger.warning("channel health not read; the last state stays in force",
                                       extra={"error": repr(exc)})
        return self._known

    def of(self, name: str) -> ChannelHealth:
        return self.snapshot().get(name) or ChannelHealth(name)

    def refresh(self) -> dict[str, ChannelHealth]:
        with self._lock:
            self._read_at = None
        return self.snapshot()

    def forget(self) -> None:
        with self._lock:
            self._known, self._read_at = {}, None

    # --- what happened ---------------------------------------------------------------------------

    def failed(self, name: str, failure: Failure) -> None:
        policy = self.policy
        self._change(name, lambda h, now: after_failure(h, failure, policy, now), quiet=True)

    def needs_success_write(self, name: str) -> bool:
        """Whether a success on `name` is news: it is cooling as far as this instance last read
        (the cache only, never the store: an event loop asks this after every answer)."""
        known = self._known.get(name)
        return known is not None and known.state == COOLING

    def succeeded(self, name: str) -> None:
        if self.needs_success_write(name):
            self._change(name, after_success, quiet=True)

    def probed(self, name: str, failure: Failure | None, latency_ms: int = 0) -> ChannelHealth:
        policy = self.policy
        return self._change(name, lambda h, now: after_probe(h, failure, policy, now, latency_ms))

    def command(self, name: str, *, enable: bool) -> ChannelHealth:
        return self._change(name, lambda h, now: after_command(h, enable, now))

    def _change(self, name: str, transition: Callable[[ChannelHealth, float], Change], *,
                quiet: bool = False) -> ChannelHealth:
        """Applies `transition` to the stored item (read, change, put conditioned on its version,
        again when another instance wrote first). `quiet`: a store error is logged, not raised
        (a request's bookkeeping never fails the request)."""
        try:
            for _ in range(_WRITE_ATTEMPTS):
                current = self.store.get(name)
                now = self.clock()
                changed, event = transition(current, now)
                if changed == current:
                    self._remember(current)
                    return current
                changed = dataclasses.replace(changed, version=current.version + 1)
                if self.store.put(changed):
                    self._remember(changed)
                    if event:
                        _announce(event, changed)
                    return changed
            logger.warning("channel health not written: other writers kept winning", extra={"channel": name})
        except Exception as exc:
            if not quiet:
                raise
            logger.warning("channel health not written", extra={"channel": name, "error": repr(exc)})
        return self.of(name)

    def _remember(self, health: ChannelHealth) -> None:
        with self._lock:
            self._known = {**self._known, health.name: health}


def _announce(event: str, health: ChannelHealth) -> None:
    """A change of state, as a log event and the channel's gauge."""
    extra = {"event": event, "channel": health.name, "state": health.state,
             "cooling_until": _iso(health.cooling_until), "cooldown_seconds": health.period or None,
             "last_status": health.last_status, "last_fault": health.last_fault or None,
             "last_error": health.last_error or None}
    account = (health.last_fault or default_fault(health.last_status)) == ACCOUNT
    if event in ("channel_cooldown", "channel_cooldown_extended") and account:
        logger.error("the upstream refused the channel's credentials or account: an operator must fix it",
                     extra={**extra, "event": "channel_credentials_refused"})
        channel_account_refused(health.name)
    elif event in ("channel_cooldown", "channel_cooldown_extended", "channel_disabled"):
        logger.warning(event.replace("_", " "), extra=extra)
    else:
        logger.info(event.replace("_", " "), extra=extra)
    channel_state(health.name, GAUGE[health.state])


def report_gauges(names: Iterable[str], book: HealthBook) -> None:
    """One `ChannelState` point per channel (the sweeper, on each run)."""
    known = book.snapshot()
    for name in names:
        channel_state(name, GAUGE[(known.get(name) or ChannelHealth(name)).state])


def channels_view(catalog: Any, store_items: Iterable[ChannelHealth]) -> list[dict[str, Any]]:
    """Every channel of the channels document (never its key) with its health, then any health
    item of a channel the document no longer names: what the operator's command line and the
    console's channels page show."""
    known = {h.name: h for h in store_items}
    rows = [{"name": c.name, "protocol": c.protocol, "base_url": c.base_url, "models": sorted(c.models),
             "priority": c.priority, "weight": c.weight, "groups": sorted(getattr(c, "groups", ())),
             **(known.get(c.name) or ChannelHealth(c.name)).view()}
            for c in catalog.channels]
    rows += [{"name": name, "configured": False, **known[name].view()}
             for name in sorted(known) if catalog.named(name) is None]
    return rows


_book = HealthBook()


def book() -> HealthBook:
    """This instance's health book."""
    return _book


def use_store(store: HealthStore | None) -> None:
    """Where health lives from now on (tests: an in-memory store; None: the accounts table)."""
    _book._store = store
    _book.forget()


def reset() -> None:
    """Forget what this instance knows (tests, and the local runner after a change)."""
    _book.forget()
