"""Channel health: cooldowns, Retry-After, refused credentials, probes, manual control, and two
instances sharing one store. A fake clock; the store in memory, with the same contract as DynamoDB's."""

from __future__ import annotations

import pytest

from gateway.errors import Unavailable
from gateway.routing import health
from gateway.routing.catalog import Catalog
from gateway.routing.failover import first_success
from gateway.routing.health import COOLING, DISABLED, HEALTHY, Failure, HealthBook, Policy
from gateway.upstreams.errors import UpstreamError
from tests.unit.health_support import Clock, MemoryHealthStore

DOC = {"channels": [
    {"name": "main", "protocol": "chat", "base_url": "http://127.0.0.1:9", "api_key": "k", "models": ["m"],
     "priority": 1},
    {"name": "spare", "protocol": "chat", "base_url": "http://127.0.0.1:9", "api_key": "k", "models": ["m"]},
]}


@pytest.fixture
def clock():
    return Clock()


@pytest.fixture
def book(health_store, clock, monkeypatch):
    """The process's book on a fake clock, with no cache (each test moves the clock itself)."""
    book = HealthBook(health_store, clock=clock, cache_seconds=0, policy=Policy())
    monkeypatch.setattr(health, "_book", book)
    return book


def walk(catalog: Catalog, failing: set[str], tried: list[str], retry_after: float | None = None) -> str:
    """One request: the candidates for model m, tried in order; `failing` channels answer 500."""
    def attempt(channel):
        tried.append(channel.name)
        if channel.name in failing:
            raise UpstreamError(500, "upstream down", retry_after=retry_after)
        return channel.name

    return first_success(catalog.candidates("m", ["chat"]), attempt)[0]


def test_attempts_per_channel_before_during_and_after_a_cooldown(book, clock, health_store):
    # Given two channels for one model, the preferred one failing with 500
    catalog = Catalog.from_document(DOC)
    tried: list[str] = []
    # When ten requests come one after another
    answers = [walk(catalog, {"main"}, tried) for _ in range(10)]
    # Then every one is answered by the other, and the failing one is tried only three times
    assert answers == ["spare"] * 10 and tried.count("main") == 3
    assert book.of("main").state == COOLING and book.of("main").cooling_until == clock.now + 30
    # And while it cools down nobody tries it, even after its period until a probe says it works
    clock.advance(31)
    tried.clear()
    assert walk(catalog, set(), tried) == "spare" and tried == ["spare"]
    book.probed("main", None)
    tried.clear()
    assert walk(catalog, set(), tried) == "main" and tried == ["main"]


def test_failures_count_only_within_the_window(book, clock):
    for _ in range(2):
        book.failed("main", Failure(500, "down"))
        clock.advance(40)
    # two failures, then one more 80 s after the first: a new window (counted from it), not a cooldown
    book.failed("main", Failure(500, "down"))
    assert book.of("main").state == HEALTHY and book.of("main").failures == 1
    book.failed("main", Failure(500, "down"))
    book.failed("main", Failure(500, "down"))
    assert book.of("main").state == COOLING


def test_a_success_on_a_healthy_channel_writes_nothing_and_reads_are_cached(health_store, clock, monkeypatch):
    # Given an instance with the default 5 s cache, serving 10 requests a second for 10 s
    monkeypatch.setattr(health, "_book", HealthBook(health_store, clock=clock, policy=Policy()))
    catalog = Catalog.from_document(DOC)
    for _ in range(100):
        walk(catalog, set(), [])
        clock.advance(0.1)
    # Then nothing was written, and the state was read once per cache period
    assert health_store.writes == 0 and health_store.reads <= 3


def test_retry_after_sets_the_cooldown_at_once(book, clock):
    catalog = Catalog.from_document(DOC)
    tried: list[str] = []
    # Given the preferred upstream saying "come back in 7 seconds"
    walk(catalog, {"main"}, tried, retry_after=7)
    # Then it is out for exactly that long, after one attempt
    assert book.of("main").cooling_until == clock.now + 7
    walk(catalog, {"main"}, tried, retry_after=7)
    assert tried.count("main") == 1


def test_refused_credentials_fail_over_and_cool_the_channel_for_the_maximum(book, clock):
    catalog = Catalog.from_document(DOC)
    tried: list[str] = []

    def attempt(channel):
        tried.append(channel.name)
        if channel.name == "main":
            raise UpstreamError(401, "invalid api key")
        return channel.name

    answers = [first_success(catalog.candidates("m", ["chat"]), attempt)[0] for _ in range(5)]
    assert answers == ["spare"] * 5 and tried.count("main") == 1
    state = book.of("main")
    assert state.cooling_until == clock.now + 600 and state.last_status == 401 and state.last_error == "invalid api key"


def test_a_failed_probe_doubles_the_cooldown_up_to_the_cap_and_a_good_one_ends_it(book, clock):
    for _ in range(3):
        book.failed("main", Failure(503, "down"))
    periods = []
    for _ in range(7):
        clock.advance(book.of("main").period)
        periods.append(book.probed("main", Failure(503, "still down")).period)
    assert periods == [60, 120, 240, 480, 600, 600, 600]
    assert book.probed("main", None).state == HEALTHY and book.of("main").last_probe == "ok"


def test_when_every_channel_cools_the_one_back_soonest_is_tried(book, clock):
    catalog = Catalog.from_document(DOC)
    book.failed("main", Failure(429, "slow", retry_after=50))
    book.failed("spare", Failure(429, "slow", retry_after=20))
    assert [c.name for c in catalog.candidates("m", ["chat"])] == ["spare"]
    # and a success there brings it back
    tried: list[str] = []
    assert walk(catalog, set(), tried) == "spare" and book.of("spare").state == HEALTHY


def test_a_manual_disable_is_never_lifted_by_a_probe_nor_picked(book, clock):
    catalog = Catalog.from_document(DOC)
    book.command("main", enable=False)
    assert book.probed("main", None).state == DISABLED
    book.failed("spare", Failure(403, "forbidden"))
    # the cooling channel is tried rather than the disabled one
    assert [c.name for c in catalog.candidates("m", ["chat"])] == ["spare"]
    book.command("spare", enable=False)
    with pytest.raises(Unavailable, match="disabled by the operator"):
        catalog.candidates("m", ["chat"])
    assert book.command("main", enable=True).state == HEALTHY


def test_two_instances_share_their_failures_and_agree(clock):
    # Given two instances (each its own cache of 5 s) over one store
    store = MemoryHealthStore()
    first, second = (HealthBook(store, clock=clock, cache_seconds=5, policy=Policy()) for _ in range(2))
    assert second.of("main").state == HEALTHY  # read (and cached) before anything failed
    # When each sees failures of the same channel: together they reach the threshold
    first.failed("main", Failure(500, "down"))
    second.failed("main", Failure(500, "down"))
    first.failed("main", Failure(500, "down"))
    # Then the one that did not write the cooldown sees it within its cache period
    assert first.of("main").state == COOLING
    clock.advance(5)
    assert second.of("main").state == COOLING
    # And a recovery one of them records reaches the other as well
    clock.advance(30)
    second.probed("main", None)
    clock.advance(5)
    assert first.of("main").state == HEALTHY


def test_a_store_that_cannot_be_read_leaves_the_last_state_in_force(clock):
    class Broken(MemoryHealthStore):
        fail = False

        def all(self):
            if self.fail:
                raise ConnectionError("no store")
            return super().all()

    store = Broken()
    book = HealthBook(store, clock=clock, cache_seconds=0, policy=Policy(failures=1))
    book.failed("main", Failure(500, "down"))
    store.fail = True
    assert book.of("main").state == COOLING


def test_a_change_of_state_is_a_log_event_and_a_gauge_point(book, capsys, monkeypatch):
    import io
    import json

    from gateway import observability

    written = io.StringIO()
    monkeypatch.setattr(observability.logger.registered_handler, "stream", written)
    monkeypatch.delenv("POWERTOOLS_METRICS_DISABLED", raising=False)
    observability.begin("/v1/chat/completions")
    # When refused credentials cool a channel down, then an operator disables another
    book.failed("main", Failure(401, "invalid api key"))
    book.command("spare", enable=False)
    health.report_gauges(["main", "spare", "third"], book)
    observability.flush()
    # Then the log says what happened, as events naming the channel
    events = [json.loads(line) for line in written.getvalue().splitlines()]
    refused = next(e for e in events if e.get("event") == "channel_credentials_refused")
    assert (refused["level"], refused["channel"], refused["last_status"]) == ("ERROR", "main", 401)
    assert any(e.get("event") == "channel_disabled" and e["channel"] == "spare" for e in events)
    # And the ChannelState gauge has a point per channel, dimension channel alone
    points = [json.loads(line) for line in capsys.readouterr().out.splitlines() if '"ChannelState"' in line]
    last = {p["channel"]: p["ChannelState"][-1] for p in points}
    assert last == {"main": 1, "spare": 2, "third": 0}
    assert all(p["_aws"]["CloudWatchMetrics"][0]["Dimensions"] == [["channel", "service"]] for p in points)


def test_a_follow_up_task_goes_to_its_cooling_channel_but_never_to_a_disabled_one(book, monkeypatch):
    from gateway.tasks import engine

    catalog = Catalog.simulated("http://127.0.0.1:9")
    monkeypatch.setattr(engine, "get_catalog", lambda: catalog)
    new = engine.NewTask(family="imgtask", model="imgtask-1", upstream_request={}, route="/imgtask/x",
                         channel="simulator-imgtask")
    book.failed("simulator-imgtask", Failure(503, "down", retry_after=30))
    assert [c.name for c in engine._pinned([], new)] == ["simulator-imgtask"]
    book.command("simulator-imgtask", enable=False)
    with pytest.raises(Unavailable, match="disabled by the operator"):
        engine._pinned([], new)
