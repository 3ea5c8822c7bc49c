"""Limits and budgets as an admission step of the lease path (and of tasks' durable reservations):
never more than the limit however many callers and instances at once, exactly the limit for one
caller at a time, no quota moved by a refusal, budgets that reset at the turn of their UTC period."""

from __future__ import annotations

import threading
import uuid
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime

import pytest

from gateway import admin
from gateway.admission import balances, billing, leases, limits, steps
from gateway.auth import authenticate
from gateway.errors import InsufficientQuota, RateLimited
from gateway.limit_values import Limits

USD = 500_000


@pytest.fixture
def frozen(monkeypatch):
    """The limits' clock, set by the test."""
    moment = {"now": datetime(2026, 11, 24, 12, 0, 5, tzinfo=UTC)}
    monkeypatch.setattr(limits, "clock", lambda: moment["now"])
    return moment


@pytest.fixture
def user(accounts):
    """User 7 with 100 USD and an unlimited key."""
    accounts.users.create_user(username="limited", user_id=7, quota=100 * USD)
    key, record = accounts.keys.create_key(7, name="k")
    return {"key": key, "key_id": record["key_id"]}


def limit(*args: str, accounts) -> dict:
    """set-limits, and an instance that sees them (a key cache period later)."""
    from gateway import auth

    shown = admin.run(["set-limits", *args])
    auth.clear_cache()
    limits.step().reset()
    return shown


def principal(user):
    return authenticate({"Authorization": f"Bearer {user['key']}"})


def attempt(principal, units: int = 1000, *, parallel: bool = True, pool: leases.LeasePool | None = None):
    """One hold: a synchronous request's on a lease (`parallel`), else a task's durable reservation;
    the reservation or the refusal."""
    try:
        if parallel:
            return billing.reserve_request(principal, units, model="m-small", route="test",
                                           request_id=uuid.uuid4().hex, pool=pool)
        return billing.reserve(principal, units, model="m-small", route="test", reservation_id=uuid.uuid4().hex)
    except (RateLimited, InsufficientQuota) as refusal:
        return refusal


def quota_left(accounts) -> int:
    """The user's quota as users see it (open leases included), once this instance's closes are written."""
    leases.pool().fold_idle(force=True)
    return int(balances.get_user(7)["quota"])


def test_rpm_lets_exactly_the_limit_through_one_at_a_time_and_refusals_move_no_quota(user, accounts, frozen):
    limit("--user", "7", "--rpm", "3", accounts=accounts)
    results = []
    for _ in range(5):
        result = attempt(principal(user))
        results.append(result)
        if isinstance(result, billing.Reservation):
            billing.settle(result, 10)
    assert [isinstance(r, billing.Reservation) for r in results] == [True, True, True, False, False]
    refusal = results[3]
    assert refusal.status == 429 and refusal.headers["Retry-After"] == "55" and "rpm" in refusal.message
    assert quota_left(accounts) == 100 * USD - 30  # three settled at 10, nothing else
    frozen["now"] = datetime(2026, 11, 24, 12, 1, 0, tzinfo=UTC)  # the next minute
    assert isinstance(attempt(principal(user)), billing.Reservation)


@pytest.mark.parametrize("target", ["user", "key"])
def test_never_more_than_the_rpm_under_50_parallel_requests_from_two_instances(user, accounts, frozen, target):
    limit(*(["--user", "7"] if target == "user" else ["--key", user["key_id"]]), "--rpm", "20", accounts=accounts)
    instances = [leases.LeasePool("instance-a"), leases.LeasePool("instance-b")]
    start = threading.Barrier(50)

    def one(n: int):
        start.wait()
        return attempt(principal(user), pool=instances[n % 2]), instances[n % 2]

    with ThreadPoolExecutor(50) as pool:
        results = list(pool.map(one, range(50)))
    admitted = [(r, p) for r, p in results if isinstance(r, billing.Reservation)]
    refused = [r for r, _ in results if isinstance(r, RateLimited)]
    assert len(admitted) == 20 and len(refused) == 30, [type(r).__name__ for r, _ in results]
    for held, instance in admitted:
        assert billing.refund(held, pool=instance)
    for instance in instances:
        instance.release_all()
    assert quota_left(accounts) == 100 * USD  # refusals held nothing, the holds came back


@pytest.mark.parametrize("rpm", [100, 400])
def test_at_high_rpm_two_instances_taking_slices_never_pass_the_limit_and_mostly_skip_the_round_trip(
        user, accounts, frozen, rpm, monkeypatch):
    """Two instances (two steps, each with its own slices) under 2 x 50 parallel callers: exactly
    `rpm` admitted in the minute, and far fewer writes than requests."""
    limit("--key", user["key_id"], "--rpm", str(rpm), accounts=accounts)
    principal = authenticate({"Authorization": f"Bearer {user['key']}"})
    instances = [limits.LimitStep(), limits.LimitStep()]
    writes = []
    real_add = limits._add
    monkeypatch.setattr(limits, "_add", lambda *a, **k: writes.append(a) or real_add(*a, **k))
    start = threading.Barrier(100)

    def one(n: int):
        start.wait()
        admitted = 0
        for _ in range(rpm // 50 + 2):
            try:
                instances[n % 2].enter(steps.AdmissionRequest(principal, 1, "m-small", "test", uuid.uuid4().hex))
                admitted += 1
            except RateLimited:
                pass
        return admitted

    with ThreadPoolExecutor(100) as pool:
        assert sum(pool.map(one, range(100))) == rpm
    assert len(writes) <= rpm // 2  # a slice per write, not a write per request


def test_max_parallel_refuses_the_second_of_two_concurrent_requests_until_the_first_closes(user, accounts):
    limit("--key", user["key_id"], "--max-parallel", "1", accounts=accounts)
    first = attempt(principal(user))
    second = attempt(principal(user))
    assert isinstance(first, billing.Reservation)
    assert isinstance(second, RateLimited) and "max_parallel" in second.message
    assert second.headers["Retry-After"] == "1"
    billing.refund(first)
    third = attempt(principal(user))
    assert isinstance(third, billing.Reservation)
    # A task's long hold is not a concurrent request.
    assert isinstance(attempt(principal(user), parallel=False), billing.Reservation)


def test_a_daily_budget_is_never_overspent_under_parallel_load_and_resets_at_utc_midnight(user, accounts, frozen):
    limit("--user", "7", "--budget-usd", "1", "--budget-period", "daily", accounts=accounts)  # 500000 units
    frozen["now"] = datetime(2026, 11, 24, 23, 59, 50, tzinfo=UTC)

    def one(_: int):
        result = attempt(principal(user), 30_000)
        if isinstance(result, billing.Reservation):
            billing.settle(result, 20_000)  # a third of each hold comes back to the budget
        return result

    with ThreadPoolExecutor(20) as pool:
        results = list(pool.map(one, range(40)))
    spent = 100 * USD - quota_left(accounts)
    assert spent <= USD  # never beyond the budget
    assert sum(isinstance(r, billing.Reservation) for r in results) * 20_000 == spent
    refusals = [r for r in results if isinstance(r, InsufficientQuota)]
    assert refusals and "daily budget of 1 USD" in refusals[0].message
    assert "2026-11-25T00:00:00Z" in refusals[0].message
    while isinstance(one(0), billing.Reservation):  # spend what is left of the day, one at a time
        pass
    assert USD - (100 * USD - quota_left(accounts)) < 30_000
    frozen["now"] = datetime(2026, 11, 25, 0, 0, 0, tzinfo=UTC)  # UTC midnight
    assert isinstance(one(0), billing.Reservation)


def test_a_hold_taken_before_midnight_gives_nothing_back_to_the_new_days_budget(user, accounts, frozen):
    limit("--user", "7", "--budget-usd", "1", "--budget-period", "daily", accounts=accounts)
    frozen["now"] = datetime(2026, 11, 24, 23, 59, 59, tzinfo=UTC)
    held = attempt(principal(user), 400_000)
    frozen["now"] = datetime(2026, 11, 25, 0, 0, 1, tzinfo=UTC)
    fresh = attempt(principal(user), 400_000)  # a new day: the whole budget
    assert isinstance(held, billing.Reservation) and isinstance(fresh, billing.Reservation)
    assert billing.refund(held)  # its 400000 belong to yesterday's budget
    today = limits.shown(accounts.users.raw_user(7), limits.limit_scope(user_id=7), frozen["now"])
    assert today["budget_left_usd"] == 0.2


def test_weekly_and_monthly_budgets_turn_on_monday_and_on_the_first(user, accounts, frozen):
    from gateway.admission.limits import period_bounds

    sunday = datetime(2026, 11, 29, 23, 0, tzinfo=UTC)
    assert period_bounds("weekly", sunday) == (datetime(2026, 11, 23, tzinfo=UTC), datetime(2026, 11, 30, tzinfo=UTC))
    assert period_bounds("monthly", datetime(2026, 12, 31, 23, 59, tzinfo=UTC)) == (
        datetime(2026, 12, 1, tzinfo=UTC), datetime(2027, 1, 1, tzinfo=UTC))
    limit("--key", user["key_id"], "--budget-usd", "0.002", "--budget-period", "weekly", accounts=accounts)
    frozen["now"] = sunday
    assert isinstance(attempt(principal(user), 1000), billing.Reservation)
    refused = attempt(principal(user), 1000)
    assert isinstance(refused, InsufficientQuota) and "this key's weekly budget" in refused.message
    frozen["now"] = datetime(2026, 11, 30, 0, 0, tzinfo=UTC)
    assert isinstance(attempt(principal(user), 1000), billing.Reservation)


def test_admin_sets_shows_and_clears_limits(user, accounts):
    shown = limit("--user", "7", "--rpm", "10", "--max-parallel", "2", "--budget-usd", "5", "--budget-period",
                  "monthly", accounts=accounts)
    assert shown["limits"] == {"rpm": 10, "tpm": 0, "max_parallel": 2, "budget_usd": 5.0, "budget_period": "monthly"}
    listed = next(u for u in admin.run(["list-users"])["users"] if u["id"] == 7)
    assert listed["limits"]["rpm"] == 10
    cleared = limit("--user", "7", "--rpm", "0", "--budget-usd", "0", accounts=accounts)
    assert cleared["limits"] == {"rpm": 0, "tpm": 0, "max_parallel": 2, "budget_usd": 0, "budget_period": ""}
    issued = admin.run(["issue-key", "--user", "7", "--name", "x", "--rpm", "5", "--budget-usd", "1",
                        "--budget-period", "daily"])
    assert issued["limits"] == {"rpm": 5, "tpm": 0, "max_parallel": 0, "budget_usd": 1.0, "budget_period": "daily"}
    keys = admin.run(["list-keys", "--user", "7"])["keys"]
    assert {k["key_id"]: k["limits"]["rpm"] for k in keys}[issued["key_id"]] == 5
    with pytest.raises(ValueError, match="budget_period"):
        limit("--user", "7", "--budget-usd", "3", accounts=accounts)
    with pytest.raises(SystemExit):
        limit("--user", "7", "--rpm", "-1", accounts=accounts)


def test_the_account_routes_show_the_limits_and_what_is_left_of_the_budget(user, accounts, demo, lambda_context):
    import json

    from tests.conftest import api_event, load_function

    account_fn = load_function("account")
    accounts.users.set_access_token(7, "limited-access-token")
    limit("--user", "7", "--rpm", "9", "--budget-usd", "2", "--budget-period", "daily", accounts=accounts)
    limit("--key", user["key_id"], "--budget-usd", "1", "--budget-period", "monthly", accounts=accounts)
    billing.settle(attempt(principal(user), 250_000), 250_000)  # 0.5 USD
    me = json.loads(account_fn.lambda_handler(api_event("GET", "/api/user/self", headers={
        "Authorization": "limited-access-token", "X-Api-User": "7"}), lambda_context)["body"])["data"]
    assert (me["rpm"], me["budget_usd"], me["budget_period"], me["budget_left_usd"]) == (9, 2.0, "daily", 1.5)
    assert me["budget_resets_at"] % 86400 == 0
    sub = json.loads(account_fn.lambda_handler(api_event("GET", "/v1/dashboard/billing/subscription", headers={
        "Authorization": f"Bearer {user['key']}"}), lambda_context)["body"])
    assert (sub["limits"]["budget_usd"], sub["limits"]["budget_left_usd"], sub["limits"]["budget_period"]) == (
        1.0, 0.5, "monthly")


def test_tpm_holds_the_worst_case_then_counts_the_tokens_billed_and_turns_with_the_minute(user, accounts, frozen):
    limit("--key", user["key_id"], "--tpm", "1000", accounts=accounts)

    def hold(tokens: int):
        try:
            return billing.reserve_request(principal(user), 100, model="m-small", route="test",
                                           request_id=uuid.uuid4().hex, tokens=tokens)
        except RateLimited as refusal:
            return refusal

    first = hold(600)
    assert isinstance(first, billing.Reservation)
    second = hold(600)  # the running request counts at its hold: 1200 > 1000
    assert isinstance(second, RateLimited) and "tpm limit of 1000" in second.message
    assert second.headers["Retry-After"] == "55"
    # OpenAI's headers on the refusal: none of the minute's tokens are left to this request
    assert (second.headers["x-ratelimit-limit-tokens"], second.headers["x-ratelimit-remaining-tokens"]) == (
        "1000", "0")
    billing.settle(first, 50, detail={"input_tokens": 100, "output_tokens": 50})  # 150 billed, not 600
    assert isinstance(hold(800), billing.Reservation)  # 150 + 800
    assert isinstance(hold(100), RateLimited)  # 950 + 100
    assert isinstance(hold(2000), RateLimited)  # never fits in a minute
    frozen["now"] = datetime(2026, 11, 24, 12, 1, 0, tzinfo=UTC)
    assert isinstance(hold(900), billing.Reservation)


def test_a_tasks_durable_reservation_holds_on_the_budget_and_its_close_gives_back(user, accounts, frozen):
    limit("--user", "7", "--budget-usd", "1", "--budget-period", "daily", accounts=accounts)
    task = attempt(principal(user), 400_000, parallel=False)
    assert isinstance(task, billing.Reservation) and task.limit_budgets
    assert isinstance(attempt(principal(user), 200_000, parallel=False), InsufficientQuota)
    assert billing.settle(billing.get_reservation(task.reservation_id), 100_000)  # as the poller would, from the record
    assert isinstance(attempt(principal(user), 200_000, parallel=False), billing.Reservation)
    left = limits.shown(accounts.users.raw_user(7), limits.limit_scope(user_id=7), frozen["now"])["budget_left_usd"]
    assert left == 0.4


def test_a_rate_limited_hold_names_the_end_of_its_utc_minute_as_the_reset(user, accounts, frozen):
    limit("--key", user["key_id"], "--rpm", "10", accounts=accounts)
    held = attempt(principal(user), 100)
    end = int(datetime(2026, 11, 24, 12, 1, 0, tzinfo=UTC).timestamp())
    assert isinstance(held, billing.Reservation) and held.ratelimit == (("requests", 10, 9, end),)


def test_a_slice_idle_for_two_seconds_goes_back_to_the_minute_and_not_before(user, accounts, frozen):
    limit("--key", user["key_id"], "--rpm", "200", accounts=accounts)  # slices of 10
    step = limits.LimitStep()
    step.enter(steps.AdmissionRequest(principal(user), 1, "m-small", "test", uuid.uuid4().hex))
    minute = limits.window_ids(frozen["now"])["minute"]
    (scope, _), mine = next(iter(step._slices.items()))
    taken = lambda: limits._counter(scope, "RPM#" + minute, "taken")  # noqa: E731
    assert (mine.left, taken()) == (9, 10)
    with step._lock:
        step._return_idle(mine.used_at + 1.99, minute)
    assert taken() == 10
    with step._lock:
        step._return_idle(mine.used_at + 2.0, minute)
    assert taken() == 1 and not step._slices


def test_a_tpm_hold_settled_without_a_token_count_gives_its_whole_hold_back(user, accounts, frozen):
    limit("--key", user["key_id"], "--tpm", "1000", accounts=accounts)
    first = billing.reserve_request(principal(user), 100, model="m-small", route="test",
                                    request_id=uuid.uuid4().hex, tokens=900)
    billing.settle(first, 50)  # an answer with no token count (nothing to count against tpm)
    again = billing.reserve_request(principal(user), 100, model="m-small", route="test",
                                    request_id=uuid.uuid4().hex, tokens=1000)
    assert isinstance(again, billing.Reservation)


def test_a_counter_write_cancelled_for_throughput_is_asked_again(user, accounts, frozen, store):
    from gateway_local.faults import Faults

    limit("--user", "7", "--budget-usd", "1", "--budget-period", "daily", accounts=accounts)
    faults = Faults()
    store.use_faults(faults)
    try:
        faults.plan("TransactWriteItems", "throttle")  # the budget's hold, cancelled: ThrottlingError
        assert isinstance(attempt(principal(user), 30_000), billing.Reservation)
    finally:
        store.use_faults(None)
    assert faults.counts.throttled == 1


def test_what_is_left_is_never_shown_below_zero_in_either_dialects_headers():
    state = (("tokens", 1000, -5, 1_800_000_060),)
    assert limits.anthropic_headers(state)["anthropic-ratelimit-tokens-remaining"] == "0"
    assert limits.openai_headers(state, now=1_800_000_000)["x-ratelimit-remaining-tokens"] == "0"


def test_openai_headers_name_the_reset_in_whole_seconds_from_now_never_below_zero():
    state = (("requests", 60, 10, 1_800_000_060),)
    assert limits.openai_headers(state, now=1_800_000_005)["x-ratelimit-reset-requests"] == "55s"
    assert limits.openai_headers(state, now=1_800_000_061)["x-ratelimit-reset-requests"] == "0s"


def _request(user, units: int = 1) -> steps.AdmissionRequest:
    return steps.AdmissionRequest(principal(user), units, "m-small", "test", uuid.uuid4().hex)


def test_a_request_served_from_the_instances_slice_names_what_is_left_of_the_minute(user, accounts, frozen):
    limit("--key", user["key_id"], "--rpm", "200", accounts=accounts)  # slices of 10
    step = limits.LimitStep()
    first, second = _request(user), _request(user)
    step.enter(first)  # one write takes 10: 190 left to take, 9 in this instance's slice
    step.enter(second)  # from the slice, no write
    end = int(datetime(2026, 11, 24, 12, 1, 0, tzinfo=UTC).timestamp())
    assert first.notes["ratelimit"] == (("requests", 200, 199, end),)
    assert second.notes["ratelimit"] == (("requests", 200, 198, end),)


def test_a_users_limits_are_read_once_per_period_per_instance(user, accounts, frozen, monkeypatch):
    monkeypatch.setattr(limits, "USER_LIMITS_SECONDS", 3600.0)
    limit("--user", "7", "--rpm", "1", accounts=accounts)
    step = limits.LimitStep()
    step.enter(_request(user))
    admin.run(["set-limits", "--user", "7", "--rpm", "5"])
    # this instance read the user's limits a moment ago: the raise reaches it after the period
    with pytest.raises(RateLimited):
        step.enter(_request(user))
    limits.LimitStep().enter(_request(user))  # admitted: a fresh instance reads 5


def test_a_users_limits_read_at_a_moment_are_read_again_exactly_a_period_later(user, accounts, monkeypatch):
    ticks = {"now": 1_000.0}
    monkeypatch.setattr(limits.time, "monotonic", lambda: ticks["now"])
    limit("--user", "7", "--rpm", "1", accounts=accounts)
    step = limits.LimitStep()
    step.enter(_request(user))
    admin.run(["set-limits", "--user", "7", "--rpm", "0"])  # the operator clears the user's rpm
    ticks["now"] = 1_000.0 + limits.USER_LIMITS_SECONDS - 0.5  # within the period: the 1 read before holds
    with pytest.raises(RateLimited):
        step.enter(_request(user))
    ticks["now"] = 1_000.0 + limits.USER_LIMITS_SECONDS  # exactly a period after the read: read again
    step.enter(_request(user))


def test_the_last_request_of_a_minute_is_admitted_when_less_than_a_slice_is_left(user, accounts, frozen):
    limit("--key", user["key_id"], "--rpm", "100", accounts=accounts)  # slices of 5
    scope = limits.limit_scope(key_id=user["key_id"])
    minute = "RPM#" + limits.window_ids(frozen["now"])["minute"]
    limits._add(scope, minute, "taken", 99)  # other instances took 99
    request = _request(user)
    limits.LimitStep().enter(request)  # 5 do not fit: it takes the 1 left
    assert limits._counter(scope, minute, "taken") == 100 and request.notes["ratelimit"][0][2] == 0
    with pytest.raises(RateLimited):
        limits.LimitStep().enter(_request(user))


def test_a_minute_found_spent_leaves_nothing_to_give_back(user, accounts, frozen):
    limit("--key", user["key_id"], "--rpm", "1", accounts=accounts)
    step = limits.LimitStep()
    step.enter(_request(user))
    with pytest.raises(RateLimited):
        step.enter(_request(user))  # the minute is spent: remembered, refused locally for a second
    minute = limits.window_ids(frozen["now"])["minute"]
    (scope, _), mine = next(iter(step._slices.items()))
    with step._lock:
        step._return_idle(mine.used_at + 60, minute)  # long idle: what it holds goes back
    assert limits._counter(scope, "RPM#" + minute, "taken") == 1


def test_a_charge_above_its_hold_counts_once_on_the_budget_when_it_fits(user, accounts, frozen):
    limit("--user", "7", "--budget-usd", "1", "--budget-period", "daily", accounts=accounts)  # 500000 units
    held = attempt(principal(user), 100_000)
    assert billing.settle(held, 300_000)
    left = limits.shown(accounts.users.raw_user(7), limits.limit_scope(user_id=7), frozen["now"])["budget_left_usd"]
    assert left == 0.4


def test_a_charge_above_its_hold_past_the_budget_fills_it_to_the_limit_and_no_further(user, accounts, frozen):
    limit("--user", "7", "--budget-usd", "1", "--budget-period", "daily", accounts=accounts)  # 500000 units
    assert billing.settle(attempt(principal(user), 350_000), 350_000)
    held = attempt(principal(user), 100_000)  # 450000 spent or held
    assert billing.settle(held, 300_000)  # 200000 above its hold; 50000 of the budget left
    scope = limits.limit_scope(user_id=7)
    window = "BUDGET#" + limits.window_ids(frozen["now"])["daily"]
    assert limits._counter(scope, window, "spent") == 500_000


def test_a_tpm_hold_settled_after_its_minutes_counter_expired_leaves_a_counter_that_expires(user, accounts, frozen):
    from gateway.store.aws import client, from_item, to_item

    limit("--key", user["key_id"], "--tpm", "1000", accounts=accounts)
    held = billing.reserve_request(principal(user), 100, model="m-small", route="test",
                                   request_id=uuid.uuid4().hex, tokens=600)
    scope = limits.limit_scope(key_id=user["key_id"])
    key = to_item({"pk": scope, "sk": "TPM#" + limits.window_ids(frozen["now"])["minute"]})
    table = limits._table()
    client("dynamodb").delete_item(TableName=table, Key=key)  # as DynamoDB's TTL does, minutes later
    frozen["now"] = datetime(2026, 11, 24, 12, 14, 0, tzinfo=UTC)  # a long stream ends
    billing.settle(held, 50, detail={"input_tokens": 100, "output_tokens": 50})
    item = from_item(client("dynamodb").get_item(TableName=table, Key=key, ConsistentRead=True)["Item"])
    assert item["tokens"] == 150 - 600
    assert item["expires_ttl"] == int(frozen["now"].timestamp()) + 180


@pytest.fixture
def stale_limit_replica(monkeypatch):
    """From here on, an eventually consistent read of a limit counter finds nothing, as a replica
    that has not caught up with the writes; strongly consistent reads see the table."""
    real = limits._db()

    class Replica:
        def __getattr__(self, name):
            return getattr(real, name)

        def get_item(self, **params):
            if params["Key"]["pk"]["S"].startswith("LIMIT#") and not params.get("ConsistentRead"):
                return {}
            return real.get_item(**params)

    monkeypatch.setattr(limits, "_db", lambda: Replica())


def test_a_parallel_count_left_by_dead_requests_is_dropped_once_older_than_a_request_can_run(
        user, accounts, frozen, stale_limit_replica):
    from gateway.admission.ledger import REQUEST_HOLD_SECONDS

    limit("--key", user["key_id"], "--max-parallel", "1", accounts=accounts)
    # a moment 5 s before a power of two's boundary, so that the times on either side differ in
    # their high bits as well as by the seconds between them
    start = (int(datetime(2026, 11, 24, 12, 0, tzinfo=UTC).timestamp()) // 2048 + 1) * 2048 - 5
    frozen["now"] = datetime.fromtimestamp(start, UTC)
    step = limits.LimitStep()
    step.enter(_request(user))  # counted, then its function dies: never leaves
    scope = limits.limit_scope(key_id=user["key_id"])
    for later in (10, REQUEST_HOLD_SECONDS):  # it may still be running: the count stands
        frozen["now"] = datetime.fromtimestamp(start + later, UTC)
        with pytest.raises(RateLimited):
            step.enter(_request(user))
    frozen["now"] = datetime.fromtimestamp(start + REQUEST_HOLD_SECONDS + 1, UTC)
    step.enter(_request(user))  # no request runs that long: the count starts afresh with this one
    assert limits._item(scope, "PAR") | {"pk": None, "sk": None} == {
        "pk": None, "sk": None, "inflight": 1, "touched_at": start + REQUEST_HOLD_SECONDS + 1}


def test_a_minute_found_spent_is_asked_again_after_a_second(user, accounts, frozen, stale_limit_replica):
    limit("--key", user["key_id"], "--rpm", "100", accounts=accounts)
    scope = limits.limit_scope(key_id=user["key_id"])
    minute = "RPM#" + limits.window_ids(frozen["now"])["minute"]
    limits._add(scope, minute, "taken", 100)  # other instances took the minute
    step = limits.LimitStep()
    with pytest.raises(RateLimited):
        step.enter(_request(user))
    limits._add(scope, minute, "taken", -1)  # one of them gives back one request it did not use
    (_, mine), = step._slices.items()
    with pytest.raises(RateLimited):  # within the second: refused here, without a write
        step.enter(_request(user))
    mine.full_until -= 1.0  # the second has passed
    step.enter(_request(user))
    assert limits._counter(scope, minute, "taken") == 100


def test_a_charge_above_its_hold_never_lowers_a_budget_the_operator_lowered_below_its_spending(
        user, accounts, frozen):
    limit("--user", "7", "--budget-usd", "1", "--budget-period", "daily", accounts=accounts)  # 500000 units
    held = attempt(principal(user), 100_000)
    assert billing.settle(attempt(principal(user), 300_000), 300_000)  # 400000 spent or held
    limit("--user", "7", "--budget-usd", "0.5", "--budget-period", "daily", accounts=accounts)  # 250000
    assert billing.settle(held, 200_000)  # above its hold, and the budget is past its new limit
    window = "BUDGET#" + limits.window_ids(frozen["now"])["daily"]
    assert limits._counter(limits.limit_scope(user_id=7), window, "spent") == 400_000


@pytest.mark.parametrize("name", ["rpm", "tpm", "max_parallel"])
def test_an_owner_may_tighten_an_operators_limit_down_to_one_never_clear_or_raise_it(name):
    operator = Limits(**{name: 10})
    assert [Limits(**{name: n}).loosening(operator) for n in (1, 10)] == [[], []]
    for loosened in (0, 11):
        ((field, rule),) = Limits(**{name: loosened}).loosening(operator)
        assert field == name and "may be lowered, not raised or cleared" in rule


def test_a_key_issued_with_some_limits_marks_those_alone_as_the_operators(user, accounts):
    # An operator's issue-key with a budget only (half a USD, shown as such): the budget is the
    # operator's; the rest is left to the owner
    issued = admin.run(["issue-key", "--user", "7", "--name", "ops", "--budget-usd", "0.5", "--budget-period", "daily"])
    assert issued["operator_limits"] == {"budget_usd": 0.5, "budget_period": "daily"}
    assert issued["limits"] == {"rpm": 0, "tpm": 0, "max_parallel": 0, "budget_usd": 0.5, "budget_period": "daily"}


def test_a_keys_limits_may_be_under_or_at_its_users_own_never_over():
    users = Limits(rpm=10, tpm=1000, max_parallel=4, budget_units=500_000, budget_period="daily")
    for within in (Limits(rpm=1, tpm=1, max_parallel=1, budget_units=1, budget_period="daily"), users):
        assert within.excess_over(users) == []
    for name, over in (("rpm", 11), ("tpm", 1001), ("max_parallel", 5), ("budget_units", 500_001)):
        ((field, rule),) = users.replace(**{name: over}).excess_over(users)
        assert field == ("budget_usd" if name == "budget_units" else name) and "must not exceed" in rule


@pytest.mark.parametrize("name", ["rpm", "tpm", "max_parallel", "budget_units"])
def test_a_negative_limit_is_refused_naming_it(name):
    with pytest.raises(ValueError, match=f"^{name}: must not be negative"):
        Limits(**{name: -1}, **({"budget_period": "daily"} if name == "budget_units" else {}))


def test_an_owner_may_lower_an_operators_budget_never_clear_raise_or_move_it_to_another_period():
    operator = Limits(budget_units=500_000, budget_period="daily")
    assert [Limits(budget_units=n, budget_period="daily").loosening(operator) for n in (1, 500_000)] == [[], []]
    for loosened in (Limits(), Limits(budget_units=500_001, budget_period="daily"),
                     Limits(budget_units=1, budget_period="weekly")):
        ((field, rule),) = loosened.loosening(operator)
        assert field == "budget_usd" and "may be lowered, not raised, cleared or given another period" in rule


def test_a_tpm_hold_names_what_the_minute_has_left_after_every_hold_in_it_and_expires(user, accounts, frozen):
    from gateway.store.aws import client, from_item, to_item

    limit("--key", user["key_id"], "--tpm", "1000", accounts=accounts)
    first = billing.reserve_request(principal(user), 100, model="m-small", route="test",
                                    request_id=uuid.uuid4().hex, tokens=300)
    second = billing.reserve_request(principal(user), 100, model="m-small", route="test",
                                     request_id=uuid.uuid4().hex, tokens=200)
    end = int(datetime(2026, 11, 24, 12, 1, 0, tzinfo=UTC).timestamp())
    assert (first.ratelimit, second.ratelimit) == ((("tokens", 1000, 700, end),), (("tokens", 1000, 500, end),))
    key = to_item({"pk": limits.limit_scope(key_id=user["key_id"]),
                   "sk": "TPM#" + limits.window_ids(frozen["now"])["minute"]})
    item = from_item(client("dynamodb").get_item(TableName=limits._table(), Key=key, ConsistentRead=True)["Item"])
    assert item["expires_ttl"] == int(frozen["now"].timestamp()) + 180


def test_a_minutes_request_counter_and_a_budgets_counter_expire_after_their_window(user, accounts, frozen):
    """DynamoDB's TTL deletes an rpm minute's counter 180 s after the request that wrote it, and a
    budget's 40 days after its period ends (kept for the usage pages meanwhile)."""
    limit("--key", user["key_id"], "--rpm", "10", "--budget-usd", "1", "--budget-period", "daily",
          accounts=accounts)
    from gateway.store.aws import client, from_item, to_item

    assert isinstance(attempt(principal(user), 100), billing.Reservation)
    scope = limits.limit_scope(key_id=user["key_id"])
    ids = limits.window_ids(frozen["now"])
    table = limits._table()

    def ttl(sk: str) -> int:
        key = to_item({"pk": scope, "sk": sk})
        return from_item(client("dynamodb").get_item(TableName=table, Key=key, ConsistentRead=True)["Item"])[
            "expires_ttl"]

    assert ttl("RPM#" + ids["minute"]) == int(frozen["now"].timestamp()) + 180
    day_end = datetime(2026, 11, 25, tzinfo=UTC)
    assert ttl("BUDGET#" + ids["daily"]) == int(day_end.timestamp()) + 40 * 86_400


def test_a_tasks_budget_is_given_back_by_another_instance_than_the_one_that_held_it(user, accounts, frozen):
    """The task poller closes a task in another process: the hold's budget windows come from the
    reservation's record (`durable_request`), not from the instance that admitted it."""
    limit("--user", "7", "--budget-usd", "1", "--budget-period", "daily", accounts=accounts)
    task = attempt(principal(user), 400_000, parallel=False)
    assert isinstance(task, billing.Reservation) and task.limit_budgets
    limits.step().reset()  # another instance: it never saw the task's admission
    assert billing.settle(billing.get_reservation(task.reservation_id), 100_000)
    left = limits.shown(accounts.users.raw_user(7), limits.limit_scope(user_id=7), frozen["now"])["budget_left_usd"]
    assert left == 0.8
