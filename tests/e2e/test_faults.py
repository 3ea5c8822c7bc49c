"""The product end to end while DynamoDB throttles, fails and loses the answers of writes it
applied, and SQS delivers messages twice (`GATEWAY_LOCAL_FAULTS`, gateway_local/faults.py): a few
hundred seeded requests of every family, then the money counted where the gateway keeps it
(tests/e2e/faults_support.py). `make bench-faults` is the same with a few thousand."""

from __future__ import annotations

import pytest

from tests.e2e.conftest import DEMO_KEY, DEMO_QUOTA, LocalGateway
from tests.e2e.faults_support import FAULTS, Driver, count


@pytest.fixture(scope="module")
def faulty_gateway():
    server = LocalGateway({"GATEWAY_LOCAL_FAULTS": FAULTS, "GATEWAY_LOCAL_FAULTS_SEED": "7",
                           "POWERTOOLS_LOG_LEVEL": "CRITICAL"})
    yield server
    server.release()


def test_under_dynamodb_and_sqs_faults_every_request_answers_cleanly_and_every_unit_is_where_it_belongs(
        faulty_gateway):
    # Given a gateway whose emulator throttles, fails and loses answers of DynamoDB calls and
    # delivers SQS messages twice
    # When 200 requests of every family (text in four dialects, streamed or not, embeddings,
    # images, video and imgtask submits polled to their end) go through it, 8 at a time
    outcomes = Driver(faulty_gateway.url, DEMO_KEY, seed=7).run(200, concurrency=8)
    counts = count(outcomes, faulty_gateway.emulator_url, DEMO_QUOTA)
    # Then every request answered or failed cleanly, nothing was lost or charged twice, and every
    # task ended settled or refunded
    assert (counts.server_errors, counts.lost_units, counts.double_charges, counts.stuck_tasks) == (0, 0, 0, 0), \
        "\n".join(counts.problems)
    assert counts.requests == 200 and sum(n for (_, status), n in counts.statuses.items() if status == 200) > 160
    # (and the faults did happen: the emulator says so when it stops)
    faulty_gateway.stop()
    said = next(line for line in faulty_gateway.output if "AWS emulator faults:" in line)
    assert "'lost_answers': 0," not in said and "'throttled': 0," not in said, said
