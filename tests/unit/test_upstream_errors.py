"""One failure type for every upstream call: its retry rule, its Retry-After, and the one failover walk."""


import httpx
import pytest

from gateway.errors import InvalidRequest, RateLimited, UpstreamFailed
from gateway.routing.failover import first_success
from gateway.upstreams.errors import UpstreamError, parse_retry_after, retryable_status


class Channel:
    def __init__(self, name: str) -> None:
        self.name = name


@pytest.mark.parametrize("status,retryable", [(400, False), (401, False), (404, False), (408, True), (409, True),
                                              (413, False), (422, False), (429, True), (500, True), (504, True)])
def test_one_rule_says_which_statuses_another_channel_may_retry(status, retryable):
    assert retryable_status(status) is retryable
    assert UpstreamError(status, "x").retryable is retryable


def test_no_answer_at_all_is_retryable_and_a_504_counts_as_timed_out():
    assert UpstreamError(None, "connection refused").retryable
    assert UpstreamError(504, "gateway timeout").timed_out and not UpstreamError(502, "bad gateway").timed_out
    assert not UpstreamError(504, "said 504", timed_out=False).timed_out


def test_retry_after_reads_milliseconds_seconds_and_dates():
    assert parse_retry_after(httpx.Headers({"retry-after-ms": "250", "retry-after": "9"})) == 0.25
    assert parse_retry_after(httpx.Headers({"retry-after": "3"})) == 3.0
    assert parse_retry_after(httpx.Headers({"retry-after": "Wed, 21 Oct 2015 07:28:00 GMT"})) == 0.0
    assert parse_retry_after(httpx.Headers({"retry-after": "soon"})) is None


def test_failover_moves_past_retryable_failures_to_the_first_answer():
    tried = []

    def attempt(channel):
        tried.append(channel.name)
        if channel.name != "c":
            raise UpstreamError(503 if channel.name == "a" else None, "down")
        return "answer"

    answer, channel = first_success([Channel("a"), Channel("b"), Channel("c"), Channel("d")], attempt)
    assert (answer, channel.name, tried) == ("answer", "c", ["a", "b", "c"])


def test_failover_stops_at_the_upstreams_verdict_on_the_request():
    def attempt(channel):
        raise UpstreamError(422, "bad prompt")

    with pytest.raises(InvalidRequest, match="bad prompt"):
        first_success([Channel("a"), Channel("b")], attempt)


def test_failover_with_every_channel_failed_or_no_time_left_answers_once():
    def limited(channel):
        raise UpstreamError(429, "slow down", retry_after=2.5)

    with pytest.raises(RateLimited) as caught:
        first_success([Channel("a"), Channel("b")], limited)
    assert caught.value.headers == {"Retry-After": "3"}
    # A wait under a second is told as one second, never zero nor rounded up further
    with pytest.raises(RateLimited) as caught:
        first_success([Channel("a")], lambda channel: (_ for _ in ()).throw(
            UpstreamError(429, "slow down", retry_after=0.2)))
    assert caught.value.headers == {"Retry-After": "1"}
    with pytest.raises(RateLimited) as caught:  # "retry at once" is still told as one second
        first_success([Channel("a")], lambda channel: (_ for _ in ()).throw(
            UpstreamError(429, "slow down", retry_after=0.0)))
    assert caught.value.headers == {"Retry-After": "1"}
    with pytest.raises(UpstreamFailed, match="2 upstream attempts failed"):
        first_success([Channel("a"), Channel("b")], lambda channel: (_ for _ in ()).throw(UpstreamError(500, "x")))
    with pytest.raises(Exception, match="no time left"):
        first_success([Channel("a")], lambda channel: "never", can_try=lambda: False, no_attempt="no time left")


def test_the_summary_of_every_channel_failing_names_the_last_failure():
    messages = iter(["first down", "second down"])

    def attempt(channel):
        raise UpstreamError(500, next(messages))

    with pytest.raises(UpstreamFailed, match="2 upstream attempts failed; last: second down"):
        first_success([Channel("a"), Channel("b")], attempt)


def test_the_async_walk_tries_every_channel_unless_told_there_is_no_time():
    import asyncio

    from gateway.routing.failover import first_success_async

    async def attempt(channel):
        return channel.name

    assert asyncio.run(first_success_async([Channel("a")], attempt))[0] == "a"


def test_once_no_time_is_left_no_further_channel_is_tried():
    tried, time_left = [], iter([True, False, True])

    def attempt(channel):
        tried.append(channel.name)
        raise UpstreamError(503, "down")

    with pytest.raises(UpstreamFailed):
        first_success([Channel("a"), Channel("b"), Channel("c")], attempt, can_try=lambda: next(time_left))
    assert tried == ["a"]  # the walk ends at the first "no time left", whatever is asked after
