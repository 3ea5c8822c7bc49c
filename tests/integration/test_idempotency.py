"""`Idempotency-Key` on submit routes (admission/idempotency.py), against the emulator: a retry
replays the first answer, another body or a run still going is a 409, a refused run frees its key,
and a claim whose answer DynamoDB lost is still this request's own (gateway_local/faults.py)."""

from __future__ import annotations

import pytest

from gateway.admission import idempotency
from gateway.auth import authenticate
from gateway.errors import Conflict, GatewayError, InvalidRequest, RateLimited

T0 = 1_800_000_000


@pytest.fixture
def principal(demo):
    return authenticate({"Authorization": f"Bearer {demo['key']}"})


class Runs:
    def __init__(self, answer=(200, {"id": "task-1"})):
        self.count, self.answer = 0, answer

    def __call__(self):
        self.count += 1
        return self.answer


def run(principal, runs, *, body=b'{"a":1}', key="k-1", now=T0):
    return idempotency.run_once(principal, "/v1/video/generations", key, body, runs, now=now)


def test_a_retry_with_the_same_key_and_body_replays_the_first_answer_without_running_again(principal):
    runs = Runs()
    assert run(principal, runs) == (200, {"id": "task-1"}, False)
    assert run(principal, runs, now=T0 + 60) == (200, {"id": "task-1"}, True)
    assert runs.count == 1


def test_no_key_runs_every_time_and_keeps_nothing(principal):
    runs = Runs()
    assert run(principal, runs, key=None) == (200, {"id": "task-1"}, False)
    assert run(principal, runs, key=None) == (200, {"id": "task-1"}, False)
    assert runs.count == 2


def test_the_same_key_with_another_body_is_a_409_naming_the_header(principal):
    run(principal, Runs())
    with pytest.raises(Conflict) as refused:
        run(principal, Runs(), body=b'{"a":2}')
    assert refused.value.code == "idempotency_key_reused" and refused.value.param == "Idempotency-Key"


def test_a_claim_whose_answer_dynamodb_lost_runs_once_and_answers_its_own_result(principal, faults):
    # Given DynamoDB applies the claim's put but its answer is lost (botocore sends it again and
    # the retry meets the claim itself)
    faults.plan("PutItem", "lost_answer")
    runs = Runs()
    # When the request runs, Then it is served (not a 409 "still being processed"), once
    assert run(principal, runs) == (200, {"id": "task-1"}, False)
    assert runs.count == 1 and faults.counts.lost_answers == 1
    # and a retry replays it
    assert run(principal, Runs(), now=T0 + 1) == (200, {"id": "task-1"}, True)


def test_a_refused_run_frees_its_key_so_a_retry_runs_again(principal):
    def refused():
        raise RateLimited("busy")

    with pytest.raises(RateLimited):
        run(principal, refused)
    runs = Runs()
    assert run(principal, runs, now=T0 + 1) == (200, {"id": "task-1"}, False) and runs.count == 1


def test_a_refused_run_whose_delete_answer_was_lost_still_frees_its_key(principal, faults):
    def refused():
        raise GatewayError("failed", status=502)

    faults.plan("DeleteItem", "lost_answer")
    with pytest.raises(GatewayError):
        run(principal, refused)
    runs = Runs()
    assert run(principal, runs, now=T0 + 1)[2] is False and runs.count == 1


def test_a_run_that_died_keeps_its_key_pending_for_fifteen_minutes_then_frees_it(principal):
    def died():
        raise RuntimeError("killed")

    with pytest.raises(RuntimeError):
        run(principal, died)
    with pytest.raises(Conflict) as pending:
        run(principal, Runs(), now=T0 + 900)  # claimed_at < now - 900 is not yet true
    assert pending.value.code == "idempotency_key_in_progress" and pending.value.headers == {"Retry-After": "1"}
    runs = Runs()
    assert run(principal, runs, now=T0 + 901) == (200, {"id": "task-1"}, False) and runs.count == 1


def test_a_record_answers_for_24_hours_then_the_key_is_free_again(principal):
    run(principal, Runs())
    assert run(principal, Runs(), now=T0 + 24 * 3600)[2] is True  # expires_ttl < now is not yet true
    runs = Runs((201, {"id": "task-2"}))
    assert run(principal, runs, now=T0 + 24 * 3600 + 1) == (201, {"id": "task-2"}, False) and runs.count == 1


def test_an_answer_up_to_350000_bytes_is_kept_and_a_larger_one_is_a_409_on_retry(principal):
    envelope = len('{"b":""}')
    kept = Runs((200, {"b": "x" * (idempotency.MAX_KEPT_BYTES - envelope)}))
    run(principal, kept, key="kept")
    assert run(principal, Runs(), key="kept")[:2] == kept.answer
    large = Runs((200, {"b": "x" * (idempotency.MAX_KEPT_BYTES - envelope + 1)}))
    assert run(principal, large, key="large")[2] is False
    with pytest.raises(Conflict) as refused:
        run(principal, Runs(), key="large")
    assert refused.value.code == "idempotency_answer_not_kept" and large.count == 1


@pytest.mark.parametrize("value", ["", "x" * 256, "caf\u00e9", "tab\there"])
def test_a_bad_key_is_a_400_naming_the_header(value):
    with pytest.raises(InvalidRequest) as refused:
        idempotency.key_from({"Idempotency-Key": value})
    assert refused.value.param == "Idempotency-Key" and refused.value.code == "invalid_idempotency_key"


def test_the_header_is_read_in_any_case_up_to_255_characters():
    assert idempotency.key_from({"IDEMPOTENCY-KEY": "k" * 255}) == "k" * 255
    assert idempotency.key_from({"x-other": "1"}) is None and idempotency.key_from(None) is None


FORM = (b'--{b}\r\nContent-Disposition: form-data; name="prompt"\r\n\r\n{prompt}\r\n'
        b'--{b}\r\nContent-Disposition: form-data; name="image"; filename="a.png"\r\n'
        b'Content-Type: image/png\r\n\r\n\x89PNG-bytes\r\n--{b}--\r\n')


def form(boundary: str, prompt: str = "a cat") -> tuple[bytes, dict[str, str]]:
    """A multipart form as a client sends it: the boundary it drew, named in `Content-Type` (quoted,
    since RFC 2046's boundary characters include `=`, which RFC 2045 quotes in a parameter; with a
    parameter after it, in any order), and a header of the client's own that happens to mention a
    boundary too."""
    body = FORM.replace(b"{b}", boundary.encode()).replace(b"{prompt}", prompt.encode())
    return body, {"X-Client-Note": "boundary=none",
                  "Content-Type": f'multipart/form-data; boundary="{boundary}"; x=1'}


def run_form(principal, runs, boundary: str, prompt: str = "a cat", *, now=T0):
    body, headers = form(boundary, prompt)
    return idempotency.run_once(principal, "/v1/images/edits", "form-1", idempotency.comparable_body(body, headers),
                                runs, now=now)


def test_a_multipart_retry_with_a_new_boundary_replays_and_other_parts_are_a_409(principal):
    # Given a form submitted under a key
    runs = Runs()
    assert run_form(principal, runs, "first-boundary=1") == (200, {"id": "task-1"}, False)
    # When the client's retry draws another boundary, the same parts replay the first answer
    assert run_form(principal, runs, "retry-boundary=77", now=T0 + 5) == (200, {"id": "task-1"}, True)
    assert runs.count == 1
    # While other parts under the same key are refused
    with pytest.raises(Conflict) as refused:
        run_form(principal, runs, "boundary-third", prompt="a dog", now=T0 + 9)
    assert refused.value.code == "idempotency_key_reused" and runs.count == 1
