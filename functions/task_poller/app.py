"""The task poller: one poll per SQS message (a task id), with partial batch failures.

A message whose poll raises (the task store, the queue or the channel failing) is reported
failed and comes back after the queue's visibility timeout; after maxReceiveCount it goes to
the dead-letter queue, and the sweeper still watches its task.
"""

from aws_lambda_powertools.utilities.batch import BatchProcessor, EventType, process_partial_response
from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord

from gateway.observability import logger
from gateway.tasks import engine, queue

processor = BatchProcessor(event_type=EventType.SQS)


def record_handler(record: SQSRecord) -> str:
    return engine.poll_once(queue.task_id_of(record.body))


@logger.inject_lambda_context
def lambda_handler(event, context):
    return process_partial_response(event=event, record_handler=record_handler, processor=processor, context=context)
