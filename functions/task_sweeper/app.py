"""The task sweeper (on a schedule): re-enqueues overdue polls, times out stuck tasks."""

from gateway.observability import logger
from gateway.tasks import engine


@logger.inject_lambda_context
def lambda_handler(event, context):
    return engine.sweep()
