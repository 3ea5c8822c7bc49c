"""The task engine under faults: duplicated messages, crashes, lost messages, stuck tasks, and
callbacks that fail or point where they must not. Each ends with exactly one settlement or
refund, proven by the ledger."""

from __future__ import annotations

import json
import threading
import time
from unittest.mock import create_autospec

import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from gateway.admission import billing
from gateway.settings import get_settings, reload_settings
from gateway.store.aws import client
from gateway.store.tasks import TasksRepository
from gateway.tasks import callbacks, engine
from tests.conftest import serve_asgi
from tests.integration.money_support import assert_nothing_held, closed_as
from tests.integration.tasks_support import ledger_of, stored
from tests.integration.test_video import DELTA, DELTA_UNITS, ZETA, ZETA_UNITS, quota, result, submit


def _submit(functions, ctx, key, body=DELTA) -> str:
    status, answer = submit(functions, ctx, body, key)
    assert status == 200, answer
    return answer.get("task_id") or answer["taskId"]


def test_a_duplicated_poll_message_ends_with_exactly_one_settlement(tasks_env, functions, queues, demo, accounts,
                                                                    lambda_context, clock):
    task_id = _submit(functions, lambda_context, demo["key"])
    clock.advance()
    # Given the same poll message delivered three times (SQS is at-least-once)
    for _ in range(2):
        queues.sqs.send_message(QueueUrl=queues.url("TaskPollQueue"), MessageBody=json.dumps({"task_id": task_id}))
    queues.polls(lambda_context)
    # Then the task finished once, and the money moved once
    assert [(e["outcome"], e["units"]) for e in ledger_of(accounts, task_id)] == [("settled", DELTA_UNITS)]
    assert result(functions, lambda_context, task_id, demo["key"])[1]["task_status"] == "succeeded"
    assert queues.depth("TaskPollQueue") == 0


def test_concurrent_pollers_of_one_task_settle_it_once(tasks_env, functions, demo, accounts, lambda_context, clock):
    task_id = _submit(functions, lambda_context, demo["key"])
    clock.advance()
    outcomes: list[str] = []
    threads = [threading.Thread(target=lambda: outcomes.append(engine.poll_once(task_id))) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert "finished" in outcomes
    assert [e["outcome"] for e in ledger_of(accounts, task_id)] == ["settled"]


def test_a_poller_crash_between_the_upstream_answer_and_the_write_still_settles_once(
        tasks_env, functions, queues, demo, accounts, lambda_context, clock, monkeypatch):
    task_id = _submit(functions, lambda_context, demo["key"])
    clock.advance()
    real_update = TasksRepository.update
    crashes = []

    def crash_once(self, task, changes, remove=()):
        if changes.get("status") == "succeeded" and not crashes:
            crashes.append(task.task_id)
            raise RuntimeError("the function died after the upstream answered")
        return real_update(self, task, changes, remove)

    monkeypatch.setattr(TasksRepository, "update", crash_once)
    # When the first poll crashes after the upstream said succeeded, before anything was written
    with pytest.raises(RuntimeError):
        engine.poll_once(task_id)
    assert stored(task_id)["status"] == "submitted" and ledger_of(accounts, task_id) == []
    # Then the message comes back (its batch item failed) and the rerun finishes it, once
    assert engine.poll_once(task_id) == "finished"
    assert engine.poll_once(task_id) == "done"
    assert [(e["outcome"], e["units"]) for e in ledger_of(accounts, task_id)] == [("settled", DELTA_UNITS)]


def test_a_crash_between_the_terminal_write_and_the_settlement_is_finished_by_the_next_message(
        tasks_env, functions, demo, accounts, lambda_context, clock, monkeypatch):
    task_id = _submit(functions, lambda_context, demo["key"])
    clock.advance()
    real_settle = billing.settle

    def crash(*args, **kwargs):
        raise RuntimeError("the function died before settling")

    monkeypatch.setattr(billing, "settle", create_autospec(billing.settle, side_effect=crash))
    with pytest.raises(RuntimeError):
        engine.poll_once(task_id)
    task = stored(task_id)
    assert task["status"] == "succeeded" and "open_shard" in task and ledger_of(accounts, task_id) == []
    monkeypatch.setattr(billing, "settle", real_settle)
    # The redelivered message finishes it; the sweeper, later, finds nothing left to do
    assert engine.poll_once(task_id) == "finished"
    assert engine.sweep(now=time.time() + 3600) == {"requeued": 0, "timed_out": 0, "finished": 0, "stale": 0}
    assert [(e["outcome"], e["units"]) for e in ledger_of(accounts, task_id)] == [("settled", DELTA_UNITS)]
    assert "open_shard" not in stored(task_id)


def test_a_lost_poll_message_is_re_enqueued_by_the_sweeper_and_settled_once(
        tasks_env, functions, queues, demo, accounts, lambda_context, clock):
    task_id = _submit(functions, lambda_context, demo["key"])
    # Given the first poll message is lost
    queues.purge("TaskPollQueue")
    clock.advance()
    # When the sweeper runs before the poll is overdue, it leaves the task alone
    assert engine.sweep()["requeued"] == 0
    # And once it is overdue, it re-enqueues it
    overdue = time.time() + get_settings().task_sweep_grace_seconds + 5
    assert engine.sweep(now=overdue)["requeued"] == 1
    # (once, not at every sweep: the requeued poll's time is moved a grace period on)
    assert engine.sweep(now=overdue)["requeued"] == 0
    queues.polls(lambda_context)
    assert result(functions, lambda_context, task_id, demo["key"])[1]["task_status"] == "succeeded"
    assert [(e["outcome"], e["units"]) for e in ledger_of(accounts, task_id)] == [("settled", DELTA_UNITS)]
    # And a later sweep finds nothing open
    assert engine.sweep(now=overdue + 3600)["requeued"] == 0


def test_a_task_stuck_past_the_maximum_age_is_failed_and_refunded_once(
        tasks_env, functions, queues, demo, accounts, lambda_context):
    before = quota(accounts)
    task_id = _submit(functions, lambda_context, demo["key"])
    queues.purge("TaskPollQueue")
    # The simulator's clock never moves: the task never finishes upstream
    too_old = time.time() + get_settings().task_max_age_seconds + 1
    assert engine.sweep(now=too_old)["timed_out"] == 1
    assert engine.sweep(now=too_old + 60)["timed_out"] == 0
    answer = result(functions, lambda_context, task_id, demo["key"])[1]
    assert answer["task_status"] == "failed" and "did not finish within" in answer["message"]
    assert quota(accounts) == before
    assert [e["outcome"] for e in ledger_of(accounts, task_id)] == ["refunded"]
    # A late poll message for it changes nothing
    assert engine.poll_once(task_id) == "done"


def test_the_sweeper_function_answers_a_scheduled_event(tasks_env, functions, lambda_context):
    from tests.conftest import EVENTS

    event = json.loads((EVENTS / "task_sweeper.json").read_text())
    assert functions["task_sweeper"].lambda_handler(event, lambda_context) == {
        "requeued": 0, "timed_out": 0, "finished": 0, "stale": 0,
        "reservations": {"refunded": 0, "already_closed": 0, "leases_folded": 0, "leases_already_closed": 0},
        "channels": {"probed": 0, "recovered": 0}}


def test_a_poll_message_that_is_not_a_task_is_reported_as_a_batch_item_failure(tasks_env, functions, lambda_context):
    from tests.conftest import EVENTS

    event = json.loads((EVENTS / "task_poller.json").read_text())
    event["Records"][0]["body"] = "garbage"
    answer = functions["task_poller"].lambda_handler(event, lambda_context)
    assert answer["batchItemFailures"] == [{"itemIdentifier": event["Records"][0]["messageId"]}]


# ---------------------------------------------------------------------------------------------
# Callbacks
# ---------------------------------------------------------------------------------------------

class Receiver:
    """A callback receiver on 127.0.0.1 that fails its first `failures` deliveries."""

    def __init__(self, failures: int) -> None:
        self.failures, self.received = failures, []

    async def handle(self, request: Request) -> JSONResponse:
        self.received.append((await request.body(), dict(request.headers)))
        if len(self.received) <= self.failures:
            return JSONResponse({"error": "try later"}, status_code=503)
        return JSONResponse({"ok": True})


@pytest.fixture
def receiver():
    found = Receiver(failures=2)
    with serve_asgi(Starlette(routes=[Route("/hook", found.handle, methods=["POST"])])) as url:
        found.url = url + "/hook"
        yield found


def test_a_callback_is_delivered_signed_after_retries(tasks_env, functions, queues, demo, accounts, lambda_context,
                                                     clock, receiver):
    task_id = _submit(functions, lambda_context, demo["key"], {**ZETA, "callback_url": receiver.url})
    clock.advance()
    queues.polls(lambda_context)
    # When the receiver fails twice, the sender retries (the message comes back) and then delivers
    deadline = time.monotonic() + 20
    while len(receiver.received) < 3 and time.monotonic() < deadline:
        queues.callbacks(lambda_context, rounds=1)
    assert len(receiver.received) == 3
    queues.callbacks(lambda_context)
    assert len(receiver.received) == 3 and queues.depth("CallbackQueue") == 0
    body, headers = receiver.received[-1]
    payload = json.loads(body)
    assert payload["task_id"] == task_id and payload["task_status"] == "succeeded" and payload["video_results"]
    assert headers["x-gateway-task-id"] == task_id
    assert callbacks.verify(body, headers["x-gateway-signature"], "test-secret")
    assert not callbacks.verify(body + b" ", headers["x-gateway-signature"], "test-secret")
    assert [(e["outcome"], e["units"]) for e in ledger_of(accounts, task_id)] == [("settled", ZETA_UNITS)]


def test_by_default_a_callback_is_never_sent_to_a_private_address(tasks_env, functions, queues, demo,
                                                                 lambda_context, clock, receiver, monkeypatch):
    task_id = _submit(functions, lambda_context, demo["key"], {**ZETA, "callback_url": receiver.url})
    clock.advance()
    queues.polls(lambda_context)
    # When the deployed default is in force (private addresses refused) at delivery time
    monkeypatch.setenv("GATEWAY_CALLBACK_ALLOW_PRIVATE", "0")
    reload_settings()
    queues.callbacks(lambda_context)
    # Then nothing reached 127.0.0.1 and the message is not retried forever
    assert receiver.received == [] and queues.depth("CallbackQueue") == 0
    assert stored(task_id)["status"] == "succeeded"


def test_a_failing_callback_goes_to_the_dead_letter_queue_after_its_retries(tasks_env, functions, queues, demo,
                                                                           lambda_context, clock):
    failing = Receiver(failures=100)
    with serve_asgi(Starlette(routes=[Route("/hook", failing.handle, methods=["POST"])])) as url:
        _submit(functions, lambda_context, demo["key"], {**ZETA, "callback_url": url + "/hook"})
        clock.advance()
        queues.polls(lambda_context)
        deadline = time.monotonic() + 30
        dead = queues.url("CallbackDeadLetterQueue")
        while time.monotonic() < deadline:
            queues.callbacks(lambda_context, rounds=1)
            if queues.sqs.get_queue_attributes(QueueUrl=dead, AttributeNames=["ApproximateNumberOfMessages"])[
                    "Attributes"]["ApproximateNumberOfMessages"] != "0":
                break
    # maxReceiveCount is 8: eight attempts, then the dead-letter queue
    assert len(failing.received) == 8
    moved = client("sqs").receive_message(QueueUrl=dead).get("Messages", [])
    assert len(moved) == 1 and json.loads(moved[0]["Body"])["task_id"]


def test_a_poller_with_no_time_left_fails_its_records_instead_of_starting_a_poll(tasks_env, functions, demo,
                                                                                 lambda_context, monkeypatch):
    from tests.conftest import EVENTS

    task_id = _submit(functions, lambda_context, demo["key"])
    event = json.loads((EVENTS / "task_poller.json").read_text())
    event["Records"][0]["body"] = json.dumps({"task_id": task_id})
    monkeypatch.setattr(type(lambda_context), "get_remaining_time_in_millis", staticmethod(lambda: 5_000))
    # Every record failed: Powertools fails the whole invocation, and the batch comes back
    from aws_lambda_powertools.utilities.batch.exceptions import BatchProcessingError
    with pytest.raises(BatchProcessingError, match="All records failed"):
        functions["task_poller"].lambda_handler(event, lambda_context)
    assert stored(task_id)["polls"] == 0 and stored(task_id)["status"] == "submitted"


def test_a_family_that_reports_every_change_gets_a_callback_per_status_change(
        tasks_env, functions, queues, demo, lambda_context, clock, monkeypatch):
    from gateway.tasks.families import family_of

    # Given a family whose callbacks follow every change (as the alpha protocol's do)
    monkeypatch.setattr(type(family_of("zeta")), "callback_on_change", True)
    receiver = Receiver(failures=0)
    with serve_asgi(Starlette(routes=[Route("/hook", receiver.handle, methods=["POST"])])) as url:
        _submit(functions, lambda_context, demo["key"], {**ZETA, "callback_url": url + "/hook"})
        # When a poll finds it running, then a later one finds it done
        clock.advance(15)  # past the simulator's queued third: running
        queues.polls(lambda_context, rounds=1)
        queues.callbacks(lambda_context)
        clock.advance()
        queues.polls(lambda_context)
        queues.callbacks(lambda_context)
    # Then the receiver heard of the running task and of the finished one, each signed
    statuses = [json.loads(body)["task_status"] for body, _ in receiver.received]
    assert statuses == ["processing", "succeeded"]
    assert all(callbacks.verify(body, headers["x-gateway-signature"], "test-secret")
               for body, headers in receiver.received)


def test_a_duplicated_callback_message_sends_the_webhook_once(tasks_env, functions, queues, demo, lambda_context,
                                                              clock):
    receiver = Receiver(failures=0)
    with serve_asgi(Starlette(routes=[Route("/hook", receiver.handle, methods=["POST"])])) as url:
        task_id = _submit(functions, lambda_context, demo["key"], {**ZETA, "callback_url": url + "/hook"})
        clock.advance()
        queues.polls(lambda_context)
        # Given the finished task's callback message delivered three times (SQS is at-least-once)
        for _ in range(2):
            queues.sqs.send_message(QueueUrl=queues.url("CallbackQueue"), MessageBody=json.dumps({"task_id": task_id}))
        queues.callbacks(lambda_context)
    # Then the receiver heard of it once
    assert [json.loads(body)["task_status"] for body, _ in receiver.received] == ["succeeded"]
    assert queues.depth("CallbackQueue") == 0


def test_a_family_that_polls_in_batches_asks_its_upstream_once_per_channel_for_a_batch_of_polls(
        tasks_env, functions, queues, demo, accounts, lambda_context, clock, monkeypatch):
    from gateway.tasks.families import family_of

    # Given a family whose upstream answers for many tasks in one call (as imgtask's list does)
    family = family_of("zeta")
    monkeypatch.setattr(type(family), "polls_in_batches", True)
    calls: list[list[str]] = []
    real_poll = type(family).poll_upstream

    def counted(self, http, channel, tasks):
        calls.append([task.task_id for task in tasks])
        return real_poll(self, http, channel, tasks)

    monkeypatch.setattr(type(family), "poll_upstream", counted)
    task_ids = {_submit(functions, lambda_context, demo["key"], ZETA) for _ in range(3)}
    clock.advance()
    # When the poller gets their three poll messages in one batch
    queues.polls(lambda_context, rounds=1)
    # Then the upstream was asked once, about all three, and each was settled once
    assert len(calls) == 1 and set(calls[0]) == task_ids
    for task_id in task_ids:
        assert [(e["outcome"], e["units"]) for e in ledger_of(accounts, task_id)] == [("settled", ZETA_UNITS)]


def test_the_sweeper_function_re_enqueues_an_overdue_poll_and_times_out_a_stuck_task_through_its_queues(
        tasks_env, functions, queues, demo, lambda_context):
    from tests.conftest import EVENTS, use_environment

    event = json.loads((EVENTS / "task_sweeper.json").read_text())
    sweeper = functions["task_sweeper"]
    saved = use_environment(GATEWAY_TASK_SWEEP_GRACE_SECONDS="0", GATEWAY_TASK_MAX_AGE_SECONDS=None)
    try:
        # Given a task whose poll message was lost, when the scheduled sweeper runs, it is re-enqueued
        _submit(functions, lambda_context, demo["key"])
        queues.purge("TaskPollQueue")
        assert sweeper.lambda_handler(event, lambda_context)["requeued"] == 1
        queues.purge("TaskPollQueue")
        # Given a task with a callback that never finishes, past its (shortened) maximum age
        use_environment(GATEWAY_TASK_MAX_AGE_SECONDS="1")
        _submit(functions, lambda_context, demo["key"], body={**ZETA, "callback_url": "http://127.0.0.1:9/hook"})
        queues.purge("TaskPollQueue")
        time.sleep(2.5)
        # When the sweeper runs, it fails it and queues its callback
        assert sweeper.lambda_handler(event, lambda_context)["timed_out"] >= 1
        sqs = client("sqs")
        messages = sqs.receive_message(QueueUrl=queues.url("CallbackQueue"), MaxNumberOfMessages=10,
                                       WaitTimeSeconds=1).get("Messages", [])
        assert messages
    finally:
        use_environment(**saved)


@pytest.mark.parametrize("inline", [False, True])
def test_an_upstream_that_says_succeeded_without_a_video_link_fails_the_task_and_refunds_it(
        tasks_env, functions, demo, accounts, lambda_context, inline):
    from gateway.tasks.adapter import InlineResult, TaskSnapshot

    before = quota(accounts)
    task_id = _submit(functions, lambda_context, demo["key"])
    # Given an upstream poll that says "succeeded" with no video link (nothing, or the bytes inline)
    snapshot = TaskSnapshot(status="succeeded", upstream_status="SUCCEEDED", progress=100, result_urls=[],
                            error=None, duration=None, raw={},
                            inline_results=[InlineResult("video/mp4", b"....ftyp")] if inline else [])
    # When the engine records it
    assert engine.record(TasksRepository().get(task_id), snapshot) == "finished"
    # Then the task failed saying why, and the whole hold came back: nothing is billed for no video
    task = stored(task_id)
    assert task["status"] == "failed"
    assert task["error"] == ("the upstream returned the video inline, and no results bucket keeps it" if inline
                             else "the upstream finished without a video")
    assert [(e["outcome"], e["units"]) for e in ledger_of(accounts, task_id)] == [("refunded", 0)]
    closed_as(task_id, billing.REFUNDED)
    assert_nothing_held(accounts, before)


def test_each_poll_of_a_running_task_is_counted_so_the_next_one_waits_longer(
        tasks_env, functions, demo, lambda_context):
    # (the tests' environment polls at once: poll_delay's growth is tests/unit/video's to check)
    task_id = _submit(functions, lambda_context, demo["key"])
    polls = []
    for _ in range(2):  # the upstream is still working (the simulators' clock has not moved)
        assert engine.poll_once(task_id) == "running"
        polls.append(int(stored(task_id)["polls"]))
    assert polls == [1, 2]


def test_the_sweeper_finishes_a_task_left_terminal_but_unsettled_and_counts_it_once(
        tasks_env, functions, demo, accounts, lambda_context, clock, monkeypatch):
    task_id = _submit(functions, lambda_context, demo["key"])
    clock.advance()
    # Given a poller that died after writing "succeeded", before settling
    monkeypatch.setattr(billing, "settle", create_autospec(billing.settle, side_effect=RuntimeError("died")))
    with pytest.raises(RuntimeError):
        engine.poll_once(task_id)
    monkeypatch.undo()
    # When the sweeper comes by once its grace has passed, it finishes it (and says so, once)
    later = time.time() + get_settings().task_sweep_grace_seconds + 5
    assert engine.sweep(now=later) == {"requeued": 0, "timed_out": 0, "finished": 1, "stale": 0}
    assert [(e["outcome"], e["units"]) for e in ledger_of(accounts, task_id)] == [("settled", DELTA_UNITS)]


def test_a_sweep_that_finds_the_task_moved_meanwhile_counts_it_stale_and_enqueues_nothing(
        tasks_env, functions, queues, demo, lambda_context, monkeypatch):
    task_id = _submit(functions, lambda_context, demo["key"])
    queues.purge("TaskPollQueue")
    # Given the sweeper's copy of an overdue task is behind: its conditional update finds it moved
    monkeypatch.setattr(TasksRepository, "update", create_autospec(TasksRepository.update, return_value=None))
    overdue = time.time() + get_settings().task_sweep_grace_seconds + 5
    assert engine.sweep(now=overdue) == {"requeued": 0, "timed_out": 0, "finished": 0, "stale": 1}
    assert queues.depth("TaskPollQueue") == 0 and stored(task_id)["status"] == "submitted"


def test_a_submit_the_upstream_refuses_is_refunded_and_holds_nothing(tasks_env, functions, demo, accounts,
                                                                     lambda_context):
    before = quota(accounts)
    status, answer = submit(functions, lambda_context, {**DELTA, "instances": [{"prompt": "no #fault=reject"}]},
                            demo["key"])
    assert status == 400, answer
    assert_nothing_held(accounts, before)


def _snapshot(status: str, **fields) -> engine.TaskSnapshot:
    return engine.TaskSnapshot(**{"status": status, "upstream_status": status, "progress": None, "result_urls": [],
                                  "error": None, "duration": None, "raw": {}, **fields})


def test_a_task_the_upstream_cancelled_is_refunded_as_a_refund_not_logged_as_an_error(
        tasks_env, functions, demo, accounts, lambda_context):
    # Given a running task, When its upstream says it was cancelled
    before = quota(accounts)
    task_id = _submit(functions, lambda_context, demo["key"])
    assert engine.record(engine.tasks().get(task_id), _snapshot("cancelled", error="cancelled upstream")) == \
        "finished"
    # Then its hold comes back, and the log says refund (type 6), not error (type 5)
    (entry,) = ledger_of(accounts, task_id)
    assert (entry["outcome"], entry["log_type"]) == ("refunded", 6)
    closed_as(task_id, billing.REFUNDED)
    assert quota(accounts) == before


def test_a_task_the_upstream_failed_is_refunded_and_logged_as_an_error(
        tasks_env, functions, demo, accounts, lambda_context):
    task_id = _submit(functions, lambda_context, demo["key"])
    engine.record(engine.tasks().get(task_id), _snapshot("failed", error="content refused"))
    (entry,) = ledger_of(accounts, task_id)
    assert (entry["outcome"], entry["log_type"]) == ("refunded", 5)


def test_a_running_tasks_reported_duration_is_kept_and_an_unknown_one_leaves_it(
        tasks_env, functions, demo, lambda_context):
    # Given a running task, When a poll reports its duration, then one reports none
    task_id = _submit(functions, lambda_context, demo["key"])
    engine.record(engine.tasks().get(task_id), _snapshot("in_progress", duration="8"))
    assert stored(task_id)["duration"] == "8"
    engine.record(engine.tasks().get(task_id), _snapshot("in_progress", duration=None))
    # Then the duration the upstream said stays
    assert stored(task_id)["duration"] == "8"


def test_a_poll_at_a_given_time_schedules_the_next_from_that_time(tasks_env, functions, demo, lambda_context):
    # Given a running task polled at a time of the caller's (the sweeper's and the tests' clock)
    task_id = _submit(functions, lambda_context, demo["key"])
    at = time.time() + 50_000
    assert engine.poll_once(task_id, now=at) == "running"
    # Then its next poll is due from that time, not from the machine's clock
    assert int(stored(task_id)["next_poll_at"]) == int(at + engine.poll_delay(0))


class _SubmitClock:
    """The engine's `time`, whose monotonic clock has moved `late` seconds after the submit's
    budget started (a slow init or store write): the first reading starts the budget."""

    def __init__(self, late: float):
        self.late, self.started = late, False

    def monotonic(self) -> float:
        if not self.started:
            self.started = True
            return 1000.0
        return 1000.0 + self.late

    def __getattr__(self, name):
        return getattr(time, name)


@pytest.mark.parametrize(("late", "tried"), [(engine.SUBMIT_BUDGET_SECONDS - 13.0, True),
                                             (engine.SUBMIT_BUDGET_SECONDS - 12.5, False)])
def test_a_submit_tries_an_upstream_only_while_a_whole_attempt_fits_in_its_budget(
        tasks_env, functions, demo, accounts, lambda_context, monkeypatch, late, tried):
    # Given a submit whose budget (22 s) has `late` seconds gone when it would call the upstream,
    # and an attempt that may take 3 s to connect and 10 s to read
    before = quota(accounts)
    monkeypatch.setattr(engine, "time", _SubmitClock(late))
    status, answer = submit(functions, lambda_context, DELTA, demo["key"])
    if tried:
        # Then with 13 s left the upstream is asked and the task accepted
        assert status == 200, answer
    else:
        # Then with 12.5 s left nothing is sent (API Gateway would cut the answer at 29 s while
        # the task runs on, billed): a refusal saying so, and the hold given back
        assert status >= 500 and "no time was left" in json.dumps(answer), (status, answer)
        assert quota(accounts) == before


def test_a_failed_tasks_refund_gives_its_error_cut_at_200_characters_and_the_task_is_kept_its_time(
        tasks_env, functions, demo, accounts, lambda_context):
    task_id = _submit(functions, lambda_context, demo["key"])
    engine.record(engine.tasks().get(task_id), _snapshot("failed", error="e" * 300), now=1_800_000_000)
    (entry,) = ledger_of(accounts, task_id)
    assert entry["detail"]["reason"] == "e" * 200, entry
    item = stored(task_id)
    assert (item["closed_at"], item["expires_ttl"]) == (1_800_000_000, 1_800_000_000 + billing.CLOSED_KEPT_SECONDS)


@pytest.mark.parametrize("answer", ["refused", "short"])
def test_a_batched_poll_refused_or_answered_short_keeps_every_task_of_the_batch_waiting(
        tasks_env, functions, demo, accounts, lambda_context, monkeypatch, answer):
    """One upstream call for a batch (imgtask's list): a retryable refusal, or fewer answers than
    tasks asked about, reschedules each task of the batch, its money held."""
    from gateway.tasks.families import family_of
    from gateway.upstreams.errors import UpstreamError

    family = family_of("zeta")
    monkeypatch.setattr(type(family), "polls_in_batches", True)
    task_ids = [_submit(functions, lambda_context, demo["key"], ZETA) for _ in range(3)]
    real_poll = type(family).poll_upstream

    def poll(self, http, channel, tasks):
        if answer == "refused":
            raise UpstreamError(503, "upstream overloaded", retryable=True)
        return list(real_poll(self, http, channel, tasks))[:-1]  # one task's answer missing

    monkeypatch.setattr(type(family), "poll_upstream", poll)
    outcomes = engine.poll_many(task_ids)
    assert outcomes == {task_id: "running" for task_id in task_ids}
    for task_id in task_ids:
        assert int(stored(task_id)["polls"]) == 1
        assert billing.get_reservation(task_id).status == billing.RESERVED


def test_one_task_that_cannot_be_read_leaves_the_rest_of_a_poll_going(
        tasks_env, functions, demo, accounts, lambda_context, monkeypatch):
    task_ids = [_submit(functions, lambda_context, demo["key"]) for _ in range(2)]
    repository = engine.tasks()
    real_get = type(repository).get

    def get(self, task_id, *args, **kwargs):
        if task_id == task_ids[0]:
            raise RuntimeError("the item could not be read")
        return real_get(self, task_id, *args, **kwargs)

    monkeypatch.setattr(type(repository), "get", get)
    outcomes = engine.poll_many(task_ids)
    assert isinstance(outcomes[task_ids[0]], RuntimeError) and outcomes[task_ids[1]] == "running"


def test_a_family_whose_timeout_rule_raises_leaves_the_ending_to_the_engine(
        tasks_env, functions, demo, accounts, lambda_context, monkeypatch):
    from gateway.tasks.families import family_of

    task_id = _submit(functions, lambda_context, demo["key"])
    family = family_of(engine.tasks().get(task_id).family)

    def broken(self, task):
        raise RuntimeError("the family's timeout rule failed")

    monkeypatch.setattr(type(family), "timed_out", broken)
    assert engine._timed_out(engine.tasks().get(task_id)) is None
