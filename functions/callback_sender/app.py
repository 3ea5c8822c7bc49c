"""The callback sender: POSTs a finished task's result to its callback_url, signed.

A failed delivery is retried with backoff (the message's visibility is pushed out, doubling per
receive), then lands in the dead-letter queue after the queue's maxReceiveCount. A URL that may
never be called (private, loopback, link-local, not http(s)) is dropped at once, logged. SQS
delivers a message at least once: a task's callback for one status is sent once, whatever the
duplicates (a claim on the task item before the send, marked sent after it).
"""

import json
import time

from aws_lambda_powertools.utilities.batch import BatchProcessor, EventType, process_partial_response
from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord

from gateway import observability, signing_keys
from gateway.observability import logger
from gateway.routing.outbound import sync_client
from gateway.settings import get_settings
from gateway.tasks import callbacks, engine, queue
from gateway.tasks.families import family_of

# An unreadable signing secret fails the cold start, naming it (signing_keys).
signing_keys.load_at_start(signing_keys.CALLBACK, signing_keys.RESULT_LINK)

processor = BatchProcessor(event_type=EventType.SQS)
#: How long one sender holds a callback's claim: longer than a send (every address's timeout).
CLAIM_SECONDS = 300


def record_handler(record: SQSRecord) -> str:
    task_id = queue.task_id_of(record.body)
    task = engine.tasks().get(task_id)
    if task is None or not task.callback_url:
        return "nothing to send"
    body = json.dumps(family_of(task.family).callback_payload(task), separators=(",", ":")).encode()
    now = int(time.time())
    until = now + CLAIM_SECONDS
    if not engine.tasks().claim_callback(task_id, task.status, until=until, now=now):
        return "sent already"  # a duplicate message, or another sender on it now
    try:
        callbacks.deliver(sync_client, task.callback_url, body, task_id=task_id)
    except callbacks.UnsafeCallback as exc:
        logger.warning("callback refused", extra={"task_id": task_id, "error": str(exc)})
        engine.tasks().end_callback_claim(task_id, task.status, until=until, sent=True)  # never to be sent
        return "refused"
    except callbacks.CallbackFailed:
        engine.tasks().end_callback_claim(task_id, task.status, until=until, sent=False)
        receives = int(record.attributes.approximate_receive_count or 1)
        delay = get_settings().callback_retry_seconds * 2 ** (receives - 1)
        queue.delay_visibility(get_settings().callback_queue_url, record.receipt_handle, delay)
        raise
    engine.tasks().end_callback_claim(task_id, task.status, until=until, sent=True)
    return "delivered"


@observability.lambda_handler()
def lambda_handler(event, context):
    return process_partial_response(event=event, record_handler=record_handler, processor=processor, context=context)
