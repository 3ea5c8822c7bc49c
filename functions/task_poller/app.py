"""The task poller: one poll per SQS message (a task id), with partial batch failures.

A message whose poll raises (the task store, the queue or the channel failing) is reported
failed and comes back after the queue's visibility timeout; after maxReceiveCount it goes to
the dead-letter queue, and the sweeper still watches its task. A message the function has no
time left for is failed at once rather than cut off mid-poll.
"""

from aws_lambda_powertools.utilities.batch import BatchProcessor, EventType, process_partial_response
from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord

from gateway import observability
from gateway.channels import check_at_start
from gateway.tasks import engine, queue

check_at_start()  # a bad channels document fails the cold start, naming the field

processor = BatchProcessor(event_type=EventType.SQS)
# One poll takes at most the upstream client's timeouts (engine.POLL_TIMEOUT) and a few AWS calls.
TIME_NEEDED_MS = 15_000


def record_handler(record: SQSRecord, lambda_context) -> str:
    if lambda_context.get_remaining_time_in_millis() < TIME_NEEDED_MS:
        raise TimeoutError("not enough time left in this invocation; the message comes back")
    return engine.poll_once(queue.task_id_of(record.body))


@observability.lambda_handler()
def lambda_handler(event, context):
    return process_partial_response(event=event, record_handler=record_handler, processor=processor, context=context)
