"""Task poller throughput: tasks completed per second, and AWS calls per poll.

Submits `TASKS` delta, zeta and epsilon tasks (a third each) to the built-in simulators, polls
each once while it is still running upstream (AWS calls of a running poll), then tells the
simulators to answer done at once (`GATEWAY_SIM_TASK_SECONDS=0`) and times the poller draining
the poll queue the way Lambda's SQS event source drives it (batches of 10, partial failures)
until every task is settled. AWS calls are counted on the layer's own clients, inside the
poller function only (the event source's receive and delete are Lambda's, not ours).

    make bench        (or: .venv/bin/python bench/tasks.py [TASKS])

The emulator (moto) serves one request at a time in this process, so the figure is a floor set
by the emulator, not by DynamoDB; AWS calls per poll is the number that carries over.
"""

from __future__ import annotations

import os
import sys
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "local"), str(ROOT / "layers" / "gateway")]
os.environ.update({"GATEWAY_SIM_TASK_SECONDS": "0", "GATEWAY_TASK_POLL_SECONDS": "0",
                   "POWERTOOLS_LOG_LEVEL": "ERROR", "GATEWAY_KEY_CACHE_SECONDS": "60"})
for name in ("GATEWAY_CHANNELS_FILE", "GATEWAY_CHANNELS_PARAMETER"):
    os.environ.pop(name, None)

TASKS = int(sys.argv[1]) if len(sys.argv) > 1 else 150


def main() -> None:
    from gateway_local.emulator import start_emulator
    from gateway_local.server import simulators_app, sqs_step
    from tests.conftest import load_function, serve_asgi

    emulator = start_emulator(ROOT / "template.yaml")
    with serve_asgi(simulators_app()) as simulators:
        os.environ["GATEWAY_SIMULATOR_URL"] = simulators
        from gateway.admin import ensure_demo_account
        from gateway.auth import authenticate
        from gateway.routing import channels
        from gateway.settings import reload_settings
        from gateway.store.aws import client
        from gateway.store.tasks import TasksRepository
        from gateway.tasks import engine

        reload_settings()
        channels.reset_catalog()
        key = "sk-" + "b" * 48
        ensure_demo_account(user_id=1, key=key, quota=10**12, access_token="bench-token")
        principal = authenticate({"Authorization": f"Bearer {key}"})
        requests = [
            engine.NewTask(family="delta", model="delta-3.0-fast-generate-001", upstream_request={
                "instances": [{"prompt": "bench"}], "parameters": {"durationSeconds": 4}},
                quantities={"seconds": 4}, route="/v1/video/generations"),
            engine.NewTask(family="zeta", model="zeta-video-1-0-lite-t2v-250428", upstream_request={
                "model": "zeta-video-1-0-lite-t2v-250428", "content": [{"type": "text", "text": "bench"}]},
                quantities={"seconds": 5}, route="/v1/video/generations"),
            engine.NewTask(family="epsilon", model="epsilon-2", upstream_request={"prompt": "bench"},
                           quantities={"seconds": 4}, route="/v1/videos"),
        ]
        started = time.perf_counter()
        ids = [engine.submit(principal, requests[i % 3]).task_id for i in range(TASKS)]
        submit_seconds = time.perf_counter() - started

        calls: Counter = Counter()
        polls = Counter()
        counting = {"on": False}

        def count(event_name: str, **_: object) -> None:
            if counting["on"]:
                calls[event_name.split(".", 2)[2]] += 1

        for service in ("dynamodb", "sqs"):
            client(service).meta.events.register("before-call.*.*", count)
        poller = load_function("task_poller")
        real_poll_many = engine.poll_many

        def counted_poll_many(task_ids, **kwargs):
            outcomes = real_poll_many(task_ids, **kwargs)
            polls.update(outcome for outcome in outcomes.values() if isinstance(outcome, str))
            return outcomes

        engine.poll_many = counted_poll_many

        def handler(event, context):
            counting["on"] = True
            try:
                return poller.lambda_handler(event, context)
            finally:
                counting["on"] = False

        sqs = client("sqs")
        url = emulator.queues["TaskPollQueue"]
        arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
        tasks = TasksRepository()
        # Phase 1: every task still running upstream: one poll each, which re-enqueues it.
        os.environ["GATEWAY_SIM_TASK_SECONDS"] = "3600"
        while sum(polls.values()) < TASKS:
            sqs_step(sqs, url, arn, 10, handler, "TaskPollerFunction", True)
        running_polls, running_calls = sum(polls.values()), sum(calls.values())
        polls.clear()
        calls.clear()
        # Phase 2: the upstream answers done at once; timed until every task is settled.
        os.environ["GATEWAY_SIM_TASK_SECONDS"] = "0"
        started = time.perf_counter()
        while True:
            sqs_step(sqs, url, arn, 10, handler, "TaskPollerFunction", True)
            if sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["ApproximateNumberOfMessages"])[
                    "Attributes"]["ApproximateNumberOfMessages"] == "0":
                break
        elapsed = time.perf_counter() - started
        closed = sum(1 for task_id in ids if tasks.get(task_id).billing in ("settled", "refunded"))
        engine.poll_many = real_poll_many

    emulator.stop()
    total_polls = sum(polls.values())
    total_calls = sum(calls.values())
    print(f"tasks: {TASKS} (delta, zeta, epsilon), simulators answering at once; submitted in {submit_seconds:.2f} s "
          f"({TASKS / submit_seconds:.1f} submits/s)")
    print(f"poller: {closed}/{TASKS} tasks completed and settled in {elapsed:.2f} s -> "
          f"{closed / elapsed:.1f} tasks/s ({total_polls} polls: {dict(polls)})")
    print(f"AWS calls per poll of a running task: {running_calls / max(running_polls, 1):.2f} "
          f"({running_calls} calls in {running_polls} polls)")
    print(f"AWS calls in the finishing poller: {total_calls} -> {total_calls / max(total_polls, 1):.2f} per poll, "
          f"{total_calls / max(closed, 1):.2f} per task; by operation: {dict(sorted(calls.items()))}")


if __name__ == "__main__":
    main()
