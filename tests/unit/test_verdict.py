"""One rule for failed upstream attempts, whichever family's client failed."""

import pytest

from gateway.errors import InvalidRequest, NotFound, PayloadTooLarge, RateLimited, UpstreamFailed, UpstreamTimeout
from gateway.routing.failover import record_failure
from gateway.upstreams.errors import UpstreamError
from gateway.upstreams.verdict import exhausted_error, relayed_error


class _Channel:
    name = "ch-test"


@pytest.mark.parametrize("failure, kind, status", [
    (UpstreamError(400, "bad prompt"), InvalidRequest, 400),
    (UpstreamError(404, "no such model"), NotFound, 404),
    # a task submit that was sent but never answered may exist upstream: a timeout, not a retry
    (UpstreamError(504, "upstream timed out", retryable=False), UpstreamTimeout, 504),
    (UpstreamError(502, "accepted without an id", retryable=False), UpstreamFailed, 502),
    (UpstreamError(422, "unprocessable", retryable=False), InvalidRequest, 422),
    # the edges of the ranges: a 499 is the upstream's verdict on the request, a 500 its own failure,
    # a status below 400 on a failure an answer of the wrong shape
    (UpstreamError(499, "client closed", retryable=False), InvalidRequest, 499),
    (UpstreamError(500, "broke", retryable=False), UpstreamFailed, 502),
    (UpstreamError(399, "odd", retryable=False), UpstreamFailed, 502),
    (UpstreamError(400, "bad", retryable=False), InvalidRequest, 400),
    # (a status about the channel's own account, 401/402/403/407, fails over instead: the test below)
    (UpstreamError(413, "too large"), PayloadTooLarge, 413),
    (UpstreamError(414, "uri too long"), InvalidRequest, 414),
])
def test_a_final_upstream_answer_becomes_the_gateway_error_of_its_kind(failure, kind, status):
    # Given a failure that asking again would not cure
    # When it is recorded
    with pytest.raises(kind) as raised:
        record_failure(_Channel(), failure, [])
    # Then the client gets that kind, with that status
    assert raised.value.status == status


def test_a_channel_account_problem_is_never_told_as_the_clients_key():
    error = relayed_error(UpstreamError(403, "forbidden"))
    assert "not a problem with your key" in error.message


@pytest.mark.parametrize("status", [401, 402, 403, 407])
def test_refused_upstream_credentials_fail_over_and_are_told_as_the_gateways_problem(status):
    # Given the upstream refusing the channel's own key
    failures: list = []
    # When it is recorded, the walk goes on to the next channel (nothing was done upstream)
    record_failure(_Channel(), UpstreamError(status, "invalid api key"), failures)
    # Then, once every channel refused, the client hears a 502 that is not about its own key
    error = exhausted_error(failures)
    assert isinstance(error, UpstreamFailed) and error.status == 502 and "not a problem with your key" in error.message


def test_retryable_task_submit_failures_are_collected_then_summed_up():
    # Given two channels that were both rate limited, and one that timed out
    failures: list = []
    record_failure(_Channel(), UpstreamError(429, "slow down"), failures)
    record_failure(_Channel(), UpstreamError(429, "slow down"), failures)
    # Then every channel limited is a 429 for the client
    assert isinstance(exhausted_error(failures), RateLimited)
    # And a last attempt that timed out makes the whole a 504
    record_failure(_Channel(), UpstreamError(504, "timed out", retryable=True), failures)
    assert isinstance(exhausted_error(failures), UpstreamTimeout)


def test_the_summary_counts_the_attempts_in_words_that_agree():
    # Given one channel that failed, then a second one
    failures: list = []
    record_failure(_Channel(), UpstreamError(500, "boom"), failures)
    # Then the client reads "1 upstream attempt failed", in the singular
    assert exhausted_error(failures).message.startswith("1 upstream attempt failed; last: boom")
    # And after a second failure, "2 upstream attempts failed"
    record_failure(_Channel(), UpstreamError(502, "bad gateway"), failures)
    assert exhausted_error(failures).message.startswith("2 upstream attempts failed; last: bad gateway")
