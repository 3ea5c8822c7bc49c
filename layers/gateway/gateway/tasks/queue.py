"""The two queues of the task engine: task polls and callbacks. A message carries a task id only;
the task store is the truth, so a stale or duplicated message can do no harm."""

from __future__ import annotations

import json

from gateway.settings import get_settings
from gateway.store.aws import client

MAX_DELAY_SECONDS = 900  # SQS refuses a longer DelaySeconds


def _send(queue_url: str, body: dict, delay: float) -> None:
    if not queue_url:
        raise RuntimeError("the queue URL is not configured (TASK_POLL_QUEUE_URL / CALLBACK_QUEUE_URL)")
    client("sqs").send_message(QueueUrl=queue_url, MessageBody=json.dumps(body, separators=(",", ":")),
                               DelaySeconds=max(0, min(int(round(delay)), MAX_DELAY_SECONDS)))


def send_poll(task_id: str, delay: float) -> None:
    _send(get_settings().task_poll_queue_url, {"task_id": task_id}, delay)


def send_callback(task_id: str, delay: float = 0) -> None:
    _send(get_settings().callback_queue_url, {"task_id": task_id}, delay)


def task_id_of(body: str) -> str:
    """The task id of a message body; ValueError for anything else (it goes to the DLQ)."""
    data = json.loads(body)
    if not isinstance(data, dict) or not isinstance(data.get("task_id"), str) or not data["task_id"]:
        raise ValueError(f"not a task message: {body[:200]!r}")
    return data["task_id"]


def delay_visibility(queue_url: str, receipt_handle: str, seconds: float) -> None:
    """Makes a received message come back after `seconds` (a retry with backoff)."""
    client("sqs").change_message_visibility(QueueUrl=queue_url, ReceiptHandle=receipt_handle,
                                            VisibilityTimeout=max(0, min(int(seconds), 43200)))
