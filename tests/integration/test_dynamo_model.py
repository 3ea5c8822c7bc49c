"""The emulator's model of DynamoDB's limits (`gateway_local.dynamo_model`): each rule bites, through
boto3 as the gateway calls it. A fake clock makes the windows exact; nothing here waits."""

from __future__ import annotations

import pytest
from botocore.config import Config
from botocore.exceptions import ClientError

from gateway.store.aws import to_item, to_values
from gateway_local.dynamo_model import DynamoModel


class FakeClock:
    def __init__(self) -> None:
        self.now, self.slept = 1000.0, []

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)


@pytest.fixture
def clock():
    return FakeClock()


@pytest.fixture
def model(store, clock):
    model = DynamoModel(latency_ms=4, transaction_ms=12, clock=clock, sleep=clock.sleep)
    store.use_model(model)
    yield model
    store.use_model(None)


@pytest.fixture
def db(store):
    import boto3

    # No retries: each refusal is seen as DynamoDB answers it.
    return boto3.client("dynamodb", config=Config(retries={"total_max_attempts": 1, "mode": "standard"}))


def _table(store) -> str:
    return store.tables["AccountsTable"]


def _add(table: str, pk: str, units: int = 1) -> dict:
    return {"Update": {"TableName": table, "Key": to_item({"pk": pk, "sk": "X"}), "UpdateExpression": "ADD n :u",
                       "ExpressionAttributeValues": to_values({":u": units})}}


def _n(db, table: str, pk: str) -> int:
    item = db.get_item(TableName=table, Key=to_item({"pk": pk, "sk": "X"}), ConsistentRead=True).get("Item")
    return int(item["n"]["N"]) if item else 0


def test_a_transaction_meeting_one_in_flight_on_an_item_is_cancelled_and_applies_nothing(store, model, clock, db):
    table = _table(store)
    db.transact_write_items(TransactItems=[_add(table, "A"), _add(table, "B")])
    clock.now += 0.005  # the first transaction is still in flight (12 ms)
    with pytest.raises(ClientError) as caught:
        db.transact_write_items(TransactItems=[_add(table, "C"), _add(table, "B")])
    assert caught.value.response["Error"]["Code"] == "TransactionCanceledException"
    assert [r["Code"] for r in caught.value.response["CancellationReasons"]] == ["None", "TransactionConflict"]
    assert (_n(db, table, "B"), _n(db, table, "C")) == (1, 0)
    # A plain write to the item in flight is refused too
    with pytest.raises(ClientError) as single:
        db.update_item(**_add(table, "A")["Update"])
    assert single.value.response["Error"]["Code"] == "TransactionConflictException"
    # Once the first one has finished, the same transaction goes through
    clock.now += 0.010
    db.transact_write_items(TransactItems=[_add(table, "C"), _add(table, "B")])
    assert (_n(db, table, "B"), _n(db, table, "C")) == (2, 1)
    assert model.counts.conflicts == 2


def test_a_transaction_on_other_items_is_not_cancelled(store, model, clock, db):
    table = _table(store)
    db.transact_write_items(TransactItems=[_add(table, "A")])
    db.transact_write_items(TransactItems=[_add(table, "B")])
    assert model.counts.conflicts == 0


def test_writes_to_one_partition_beyond_1000_units_a_second_are_throttled(store, model, clock, db):
    table = _table(store)
    for _ in range(1000):  # one unit each, within the same instant
        db.update_item(**_add(table, "HOT")["Update"])
    with pytest.raises(ClientError) as caught:
        db.update_item(**_add(table, "HOT")["Update"])
    assert caught.value.response["Error"]["Code"] == "ProvisionedThroughputExceededException"
    assert _n(db, table, "HOT") == 1000  # the refused write applied nothing
    db.update_item(**_add(table, "COLD")["Update"])  # another partition key is not limited by it
    clock.now += 0.1  # a tenth of a second gives back 100 units
    for _ in range(100):
        db.update_item(**_add(table, "HOT")["Update"])
    with pytest.raises(ClientError):
        db.update_item(**_add(table, "HOT")["Update"])
    assert model.counts.throttles == 2


def test_a_transactional_write_costs_twice_and_an_index_write_one_more(store, model, clock, db):
    table = _table(store)
    db.update_item(**_add(table, "P")["Update"])
    assert model.counts.write_units == 1
    db.transact_write_items(TransactItems=[_add(table, "Q")])
    assert model.counts.write_units == 1 + 2
    db.put_item(TableName=table, Item=to_item({"pk": "R", "sk": "X", "gsi1pk": "I", "gsi1sk": "1"}))
    assert model.counts.write_units == 1 + 2 + 2


def test_reads_of_one_partition_beyond_3000_units_a_second_are_throttled(store, model, clock, db):
    table = _table(store)
    db.update_item(**_add(table, "R")["Update"])
    for _ in range(3000):
        db.get_item(TableName=table, Key=to_item({"pk": "R", "sk": "X"}), ConsistentRead=True)
    with pytest.raises(ClientError) as caught:
        db.get_item(TableName=table, Key=to_item({"pk": "R", "sk": "X"}), ConsistentRead=True)
    assert caught.value.response["Error"]["Code"] == "ProvisionedThroughputExceededException"


def test_each_call_waits_its_service_time_a_transaction_longer(store, model, clock, db):
    table = _table(store)
    clock.slept.clear()
    db.update_item(**_add(table, "L")["Update"])
    db.transact_write_items(TransactItems=[_add(table, "M")])
    assert clock.slept == [0.004, 0.012]


def test_the_model_is_off_unless_asked_for(store, db, monkeypatch):
    monkeypatch.delenv("GATEWAY_LOCAL_DYNAMODB_MODEL", raising=False)
    assert DynamoModel.from_environment() is None
    monkeypatch.setenv("GATEWAY_LOCAL_DYNAMODB_MODEL", "1")
    monkeypatch.setenv("GATEWAY_LOCAL_DYNAMODB_TRANSACTION_MS", "20")
    assert DynamoModel.from_environment().transaction_latency == 0.02
