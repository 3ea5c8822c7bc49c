"""The sweeper (on a schedule): re-enqueues overdue polls, times out stuck tasks, refunds
reservations left open by a request that can no longer be running, and probes the channels
whose cooldown has ended (`tasks/probes.py`)."""

from gateway import observability
from gateway.admission import billing
from gateway.routing.channels import check_at_start
from gateway.tasks import engine, probes

check_at_start()  # an unreadable or bad channels document fails the cold start, naming the cause


@observability.lambda_handler()
def lambda_handler(event, context):
    return {**engine.sweep(), "reservations": billing.sweep_stale(), "channels": probes.sweep()}
