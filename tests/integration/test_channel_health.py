"""Channel health end to end inside one process: the text function over real HTTP with the openai
SDK, fake upstreams that fail on command, the health items in the emulator's accounts table, the
sweeper's probes, the admin commands. The health book runs on a fake clock; nothing else is faked."""

from __future__ import annotations

import json
from collections.abc import Iterator

import openai
import pytest

from gateway import admin
from gateway.routing import health
from gateway.routing.health import COOLING, HEALTHY, DynamoHealthStore, Failure, HealthBook, Policy
from tests.channel_health_support import FakeUpstreams, channels_document
from tests.conftest import EVENTS, load_function, use_environment
from tests.unit.health_support import Clock


@pytest.fixture
def upstreams(fakes, store, tmp_path, monkeypatch) -> Iterator[FakeUpstreams]:
    """Two channels for m-small, both answering; the health book on a fake clock."""
    upstreams, url = fakes
    for name in ("main", "spare"):
        upstreams.answer(name)
    upstreams.attempts.clear()
    upstreams.probes.clear()
    path = tmp_path / "channels.yaml"
    path.write_text(channels_document(url))
    saved = use_environment(GATEWAY_CHANNELS_FILE=str(path), GATEWAY_SIMULATOR_URL=None,
                            GATEWAY_CHANNELS_PARAMETER=None)
    monkeypatch.setattr(health.book(), "clock", Clock())
    yield upstreams
    use_environment(**saved)


@pytest.fixture
def clock() -> Clock:
    return health.book().clock  # type: ignore[return-value]


@pytest.fixture(scope="module")
def sweeper(aws):
    function = load_function("task_sweeper")
    event = json.loads((EVENTS / "task_sweeper.json").read_text())

    def sweep() -> dict:
        from tests.conftest import LambdaContext

        return function.lambda_handler(event, LambdaContext())["channels"]

    return sweep


def ask(gateway_url: str, key: str, count: int) -> list[str]:
    client = openai.OpenAI(base_url=f"{gateway_url}/v1", api_key=key, max_retries=0)
    return [client.chat.completions.create(model="m-small", messages=[{"role": "user", "content": f"hi {n}"}])
            .choices[0].message.content for n in range(count)]


def stored(name: str) -> health.ChannelHealth:
    return DynamoHealthStore().get(name)


def test_a_revoked_upstream_key_is_failed_over_and_shown_to_the_operator(upstreams, demo, gateway_url, clock):
    # Given the preferred channel's upstream key refused
    upstreams.answer("main", 401)
    # When five requests come
    answers = ask(gateway_url, demo["key"], 5)
    # Then every one is answered by the other channel, the refused one tried once
    assert answers == ["served by spare"] * 5 and upstreams.attempts["main"] == 1
    # And the operator sees it cooling for the maximum, with the upstream's words
    row = next(r for r in admin.run(["channels"])["channels"] if r["name"] == "main")
    assert row["state"] == COOLING and row["last_status"] == 401 and "401" in row["last_error"]
    assert stored("main").cooling_until == clock.now + 600 and row["cooldown_seconds"] == 600


def test_of_ten_requests_a_failing_channel_gets_three_then_a_probe_brings_it_back(
        upstreams, demo, gateway_url, clock, sweeper):
    # Given the preferred channel failing with 500
    upstreams.answer("main", 500)
    # When ten requests come one after another: all answered, the failing one tried three times
    assert ask(gateway_url, demo["key"], 10) == ["served by spare"] * 10
    assert upstreams.attempts["main"] == 3 and stored("main").cooling_until == clock.now + 30
    # And a sweep within the cooldown probes nothing
    upstreams.answer("main")
    clock.advance(29)
    assert sweeper() == {"probed": 0, "recovered": 0} and upstreams.probes["main"] == 0
    # When the upstream is back and the cooldown has ended, the next sweep's probe brings it back
    assert ask(gateway_url, demo["key"], 1) == ["served by spare"]  # not a user's request as the probe
    clock.advance(2)
    assert sweeper() == {"probed": 1, "recovered": 1} and upstreams.probes["main"] == 1
    assert ask(gateway_url, demo["key"], 2) == ["served by main"] * 2 and stored("main").state == HEALTHY


def test_a_failed_probe_doubles_the_cooldown(upstreams, demo, gateway_url, clock, sweeper):
    upstreams.answer("main", 503)
    ask(gateway_url, demo["key"], 3)
    clock.advance(30)
    assert sweeper() == {"probed": 1, "recovered": 0}
    after = stored("main")
    assert after.cooling_until == clock.now + 60 and after.last_probe.startswith("upstream answered 503")


def test_an_upstream_retry_after_sets_the_cooldown(upstreams, demo, gateway_url, clock, sweeper):
    # Given the preferred channel rate limited for 20 s
    upstreams.answer("main", 429, retry_after="20")
    assert ask(gateway_url, demo["key"], 4) == ["served by spare"] * 4
    # Then it was asked once, and is out for exactly 20 s
    assert upstreams.attempts["main"] == 1 and stored("main").cooling_until == clock.now + 20
    upstreams.answer("main")
    clock.advance(19)
    assert sweeper()["probed"] == 0
    clock.advance(1)
    assert sweeper() == {"probed": 1, "recovered": 1}


def test_a_manual_disable_is_kept_until_the_operator_enables_the_channel(upstreams, demo, gateway_url, clock, sweeper):
    # Given the operator disabling a working channel
    assert admin.run(["channel-disable", "main"])["state"] == "disabled"
    # Then no request and no probe reaches it, however long
    assert ask(gateway_url, demo["key"], 3) == ["served by spare"] * 3
    clock.advance(3600)
    assert sweeper()["probed"] == 0 and upstreams.attempts["main"] == 0 and upstreams.probes["main"] == 0
    # And it serves again once enabled
    assert admin.run(["channel-enable", "main"])["state"] == HEALTHY
    assert ask(gateway_url, demo["key"], 1) == ["served by main"]
    with pytest.raises(ValueError, match="no channel named 'nope'"):
        admin.run(["channel-disable", "nope"])


def test_two_instances_share_the_state_through_the_table(store):
    # Given two instances, each with its own cache over the one table
    clock = Clock()
    first, second = (HealthBook(DynamoHealthStore(), clock=clock, cache_seconds=5, policy=Policy()) for _ in "ab")
    assert second.of("main").state == HEALTHY
    # When their failures together reach the threshold
    for book in (first, second, first):
        book.failed("main", Failure(502, "bad gateway"))
    # Then both see the cooldown: the writer at once, the other within its cache period
    assert first.of("main").state == COOLING
    clock.advance(5)
    assert second.of("main").state == COOLING and second.of("main").cooling_until == clock.now - 5 + 30


def test_every_task_channel_is_probed_by_its_own_protocol_and_comes_back(tasks_env, monkeypatch):
    # Given every task protocol's simulator channel cooling, its period over
    from gateway.routing.channels import get_catalog
    from gateway.tasks import probes

    clock = Clock()
    monkeypatch.setattr(health.book(), "clock", clock)
    tasks = [c for c in get_catalog().channels if c.protocol not in ("chat", "messages", "content")]
    for channel in tasks:
        health.book().failed(channel.name, Failure(503, "down", retry_after=10))
    clock.advance(10)
    # When the sweeper probes them (a poll of a task that does not exist: never billed, never a task)
    assert probes.sweep() == {"probed": len(tasks), "recovered": len(tasks)}
    # Then each is back, its probe recorded
    assert all(stored(c.name).state == HEALTHY and stored(c.name).last_probe == "ok" for c in tasks)


def test_a_task_channel_refusing_the_key_keeps_its_tasks_and_is_probed_by_a_poll(
        tasks_env, fakes, functions, demo, lambda_context, monkeypatch):
    # Given a delta task submitted, then its channel's upstream key refused
    from dataclasses import replace

    from gateway.routing.catalog import Catalog
    from gateway.routing.channels import get_catalog
    from gateway.tasks import engine, probes
    from tests.integration.test_video import DELTA, submit

    status, answer = submit(functions, lambda_context, DELTA, demo["key"])
    assert status == 200, answer
    task_id = answer.get("task_id") or answer["taskId"]
    upstreams, url = fakes
    upstreams.answer("delta", 401)
    moved = Catalog([replace(c, base_url=f"{url}/delta") if c.protocol == "delta" else c
                     for c in get_catalog().channels], get_catalog().prices)
    monkeypatch.setattr(engine, "get_catalog", lambda: moved)
    # When it is polled: the task waits (its key may be fixed), the channel cools down for the maximum
    assert engine.poll_once(task_id) == "running"
    assert stored("simulator-delta").state == COOLING and stored("simulator-delta").last_status == 401
    # And a probe of that channel meets the same refusal, counted against it
    delta = moved.named("simulator-delta")
    assert delta is not None
    failure = probes.probe(delta)
    assert failure is not None and failure.account and failure.status == 401
    upstreams.answer("delta")
    assert probes.probe(delta) is None  # an unknown task's 404: the upstream answers with this key
