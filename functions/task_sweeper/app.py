"""The task sweeper (on a schedule): re-enqueues overdue polls, times out stuck tasks."""

from gateway import observability
from gateway.tasks import engine


@observability.lambda_handler()
def lambda_handler(event, context):
    return engine.sweep()
