"""The task poller: the polls of a batch of SQS messages (task ids), with partial batch failures.

The whole batch is polled at once (`engine.poll_many`), so a family that can ask its upstream
about many tasks in one call does so once per channel. A message whose poll raised (the task
store, the queue or the channel failing) is reported failed and comes back after the queue's
visibility timeout; after maxReceiveCount it goes to the dead-letter queue, and the sweeper
still watches its task. A poll the function has no time left for is failed at once rather than
cut off midway.
"""

from aws_lambda_powertools.utilities.batch import BatchProcessor, EventType, process_partial_response
from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord

from gateway import observability
from gateway.routing.channels import check_at_start
from gateway.tasks import engine, queue

check_at_start()  # a bad channels document fails the cold start, naming the field

processor = BatchProcessor(event_type=EventType.SQS)


def _task_ids(event: dict) -> list[str]:
    ids = []
    for record in event.get("Records", []):
        try:
            ids.append(queue.task_id_of(record.get("body", "")))
        except ValueError:
            pass  # reported failed by its record handler
    return ids


@observability.lambda_handler()
def lambda_handler(event, context):
    outcomes = engine.poll_many(_task_ids(event), time_left=lambda: context.get_remaining_time_in_millis() / 1000)

    def record_handler(record: SQSRecord) -> str:
        outcome = outcomes[queue.task_id_of(record.body)]
        if isinstance(outcome, BaseException):
            raise outcome
        return outcome

    return process_partial_response(event=event, record_handler=record_handler, processor=processor, context=context)
