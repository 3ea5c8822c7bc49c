"""The sweeper (on a schedule): re-enqueues overdue polls, times out stuck tasks, and refunds
reservations left open by a request that can no longer be running."""

from gateway import billing
from gateway.observability import logger
from gateway.tasks import engine


@logger.inject_lambda_context
def lambda_handler(event, context):
    return {**engine.sweep(), "reservations": billing.sweep_stale()}
