"""The local DynamoDB emulator: transactions all-or-nothing at a cost that does not grow with the table."""

from __future__ import annotations

from typing import Any

import pytest
from botocore.exceptions import ClientError

from gateway.store.aws import client, from_item, to_item, to_values
from gateway_local import moto_fixes

TABLE = "EmulatorScratch"


@pytest.fixture
def scratch(store):
    db = client("dynamodb")
    db.create_table(TableName=TABLE, BillingMode="PAY_PER_REQUEST",
                    AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"},
                                          {"AttributeName": "sk", "AttributeType": "S"}],
                    KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"},
                               {"AttributeName": "sk", "KeyType": "RANGE"}])
    yield db
    db.delete_table(TableName=TABLE)


def _get(db, pk: str, sk: str = "A"):
    return from_item(db.get_item(TableName=TABLE, Key=to_item({"pk": pk, "sk": sk}), ConsistentRead=True).get("Item"))


def _put(pk: str, sk: str = "A", **attrs):
    return {"Put": {"TableName": TABLE, "Item": to_item({"pk": pk, "sk": sk, **attrs})}}


def _writes(last_condition: str):
    """A new item, an update, a delete, then a put whose condition decides the whole transaction."""
    return [
        _put("new", n=1),
        {"Update": {"TableName": TABLE, "Key": to_item({"pk": "counted", "sk": "A"}),
                    "UpdateExpression": "ADD n :one SET tag = :t",
                    "ExpressionAttributeValues": to_values({":one": 1, ":t": "changed"})}},
        {"Delete": {"TableName": TABLE, "Key": to_item({"pk": "doomed", "sk": "A"})}},
        {"Put": {"TableName": TABLE, "Item": to_item({"pk": "guard", "sk": "A", "n": 2}),
                 "ConditionExpression": last_condition}},
    ]


def _load(scratch, count: int) -> None:
    """`count` items straight into the emulator's table (through the API this would take minutes)."""
    from moto.core import DEFAULT_ACCOUNT_ID
    from moto.dynamodb.models import dynamodb_backends

    table = dynamodb_backends[DEFAULT_ACCOUNT_ID]["us-east-1"].get_table(TABLE)
    for i in range(count):
        table.put_item({"pk": {"S": f"bulk#{i % 50}"}, "sk": {"S": f"{i:08d}"}, "n": {"N": str(i)}})


def test_a_failed_condition_in_the_last_operation_leaves_every_item_as_it_was(scratch):
    # Given an item to update, one to delete and one whose existence fails the last condition
    scratch.transact_write_items(TransactItems=[_put("counted", n=5, tag="kept"), _put("doomed", n=7),
                                                _put("guard", n=0)])
    # When a transaction touching all of them fails on its last operation
    with pytest.raises(ClientError) as failure:
        scratch.transact_write_items(TransactItems=_writes("attribute_not_exists(pk)"))
    # Then it is cancelled for that reason, and every item is as it was
    assert failure.value.response["Error"]["Code"] == "TransactionCanceledException"
    assert [r["Code"] for r in failure.value.response["CancellationReasons"]] == \
        ["None", "None", "None", "ConditionalCheckFailed"]
    assert _get(scratch, "new") is None
    assert _get(scratch, "counted") == {"pk": "counted", "sk": "A", "n": 5, "tag": "kept"}
    assert _get(scratch, "doomed") == {"pk": "doomed", "sk": "A", "n": 7}
    assert _get(scratch, "guard") == {"pk": "guard", "sk": "A", "n": 0}
    assert scratch.query(TableName=TABLE, KeyConditionExpression="pk = :p",
                         ExpressionAttributeValues=to_values({":p": "new"}))["Items"] == []


def test_a_transaction_whose_conditions_hold_applies_every_operation(scratch):
    # Given the same items
    scratch.transact_write_items(TransactItems=[_put("counted", n=5, tag="kept"), _put("doomed", n=7)])
    # When the last condition holds
    scratch.transact_write_items(TransactItems=_writes("attribute_not_exists(pk)"))
    # Then every operation took effect
    assert _get(scratch, "new") == {"pk": "new", "sk": "A", "n": 1}
    assert _get(scratch, "counted") == {"pk": "counted", "sk": "A", "n": 6, "tag": "changed"}
    assert _get(scratch, "doomed") is None
    assert _get(scratch, "guard") == {"pk": "guard", "sk": "A", "n": 2}


def test_a_transaction_copies_only_the_items_it_touches_whatever_the_table_holds(scratch, monkeypatch):
    # Given a count of every item moto makes, new or copied (a copy of a table copies every item)
    from moto.dynamodb.models.dynamo_type import Item

    made = [0]

    def counting_new(cls, *args, **kwargs):
        made[0] += 1
        return object.__new__(cls)

    def items_made_by_one_failed_transaction() -> int:
        scratch.transact_write_items(TransactItems=[_put("counted", n=5), _put("doomed", n=7),
                                                    _put("guard", n=0)])
        monkeypatch.setattr(Item, "__new__", staticmethod(counting_new), raising=False)
        made[0] = 0
        with pytest.raises(ClientError):
            scratch.transact_write_items(TransactItems=_writes("attribute_not_exists(pk)"))
        monkeypatch.undo()
        return made[0]

    # When the same transaction fails against 100 items, then against 100000
    _load(scratch, 100)
    small = items_made_by_one_failed_transaction()
    _load(scratch, 100_000 - 100)
    large = items_made_by_one_failed_transaction()
    # Then it does the same work: a handful of items, never a copy of the table
    assert small == large <= 10


def test_nothing_moto_makes_is_kept_for_its_dashboard(scratch):
    from moto.dynamodb.models.dynamo_type import Item

    scratch.put_item(TableName=TABLE, Item=to_item({"pk": "p", "sk": "A"}))
    assert Item.instances_tracked == []


def test_a_query_reads_its_own_partition_in_order_with_paging(scratch):
    # Given two partitions, written out of order
    for sk in ("c", "a", "b"):
        scratch.put_item(TableName=TABLE, Item=to_item({"pk": "one", "sk": sk}))
        scratch.put_item(TableName=TABLE, Item=to_item({"pk": "two", "sk": sk}))
    # When one partition is read two items a page, then a range of it
    pages, params = [], {"TableName": TABLE, "KeyConditionExpression": "pk = :p", "Limit": 2,
                         "ExpressionAttributeValues": to_values({":p": "one"})}
    while True:
        answer = scratch.query(**params)
        pages.append([from_item(i)["sk"] for i in answer["Items"]])
        if "LastEvaluatedKey" not in answer:
            break
        params["ExclusiveStartKey"] = answer["LastEvaluatedKey"]
    ranged = scratch.query(TableName=TABLE, KeyConditionExpression="pk = :p AND sk BETWEEN :a AND :b",
                           ExpressionAttributeValues=to_values({":p": "two", ":a": "b", ":b": "c"}))
    # Then only that partition's items come back, in key order
    assert pages == [["a", "b"], ["c"]]
    assert [from_item(i)["sk"] for i in ranged["Items"]] == ["b", "c"]
    assert scratch.query(TableName=TABLE, KeyConditionExpression="pk = :p",
                         ExpressionAttributeValues=to_values({":p": "none"}))["Items"] == []


def test_a_moto_whose_replaced_code_changed_is_refused_at_start(monkeypatch):
    # Given the installed moto, which the fixes know
    moto_fixes.check()
    # Given a moto whose transaction code is not the one the fixes were written against
    monkeypatch.setitem(moto_fixes._EXPECTED_SOURCES, "DynamoDBBackend.transact_write_items", "000000000000")
    # When the fixes are checked, Then the start fails naming what changed
    with pytest.raises(moto_fixes.MotoChanged, match="transact_write_items"):
        moto_fixes.check()


def test_answers_written_as_plain_json_read_back_as_moto_would_write_them(scratch, monkeypatch):
    # Given an item of every attribute type, with a key made only of sets and nesting
    item = {"pk": {"S": "every"}, "sk": {"S": "A"}, "n": {"N": "-12.50"}, "b": {"B": b"\x00\xffbytes"},
            "yes": {"BOOL": True}, "none": {"NULL": True}, "ss": {"SS": ["a", "b"]}, "ns": {"NS": ["1", "2"]},
            "bs": {"BS": [b"x", b"y"]}, "m": {"M": {"inner": {"L": [{"S": "deep"}, {"N": "3"}]}}}}
    scratch.put_item(TableName=TABLE, Item=item)
    calls = {
        "get_item": {"TableName": TABLE, "Key": {"pk": {"S": "every"}, "sk": {"S": "A"}}},
        "query": {"TableName": TABLE, "KeyConditionExpression": "pk = :p",
                  "ExpressionAttributeValues": {":p": {"S": "every"}}},
        "update_item": {"TableName": TABLE, "Key": {"pk": {"S": "every"}, "sk": {"S": "A"}},
                        "UpdateExpression": "SET z = :z", "ExpressionAttributeValues": {":z": {"S": "z"}},
                        "ReturnValues": "ALL_NEW"},
    }
    # When each is answered the fast way, then moto's own way
    fast = {name: getattr(scratch, name)(**params) for name, params in calls.items()}
    from moto.core.responses import ActionResult

    monkeypatch.setattr(ActionResult, "execute_result", moto_fixes._targets()["ActionResult.execute_result"])
    scratch.update_item(TableName=TABLE, Key={"pk": {"S": "every"}, "sk": {"S": "A"}}, UpdateExpression="REMOVE z")
    slow = {name: getattr(scratch, name)(**params) for name, params in calls.items()}
    # Then boto3 reads the same answers
    for name in calls:
        fast[name].pop("ResponseMetadata"), slow[name].pop("ResponseMetadata")
        assert fast[name] == slow[name], name
    assert fast["get_item"]["Item"]["b"] == {"B": b"\x00\xffbytes"}


# --- plain updates applied directly (moto_fixes 7.) give moto's own results ---------------------------

_START = {"n": {"N": "5"}, "s": {"S": "x"}, "ss": {"SS": ["a"]}, "l": {"L": [{"N": "1"}]},
          "m": {"M": {"k": {"S": "v"}}}}
_UPDATES = [  # (update expression, names, values, condition)
    ("SET a = :v", None, {":v": {"S": "text"}}, None),
    ("SET a = :v", None, {":v": {"N": "-1.250"}}, None),
    ("SET a = :v, b = :w, c = :x", None, {":v": {"BOOL": False}, ":w": {"NULL": True},
                                          ":x": {"M": {"deep": {"L": [{"SS": ["p", "q"]}]}}}}, None),
    ("SET a = :v", None, {":v": {"B": b"\x00\x01"}}, None),
    ("ADD n :one", None, {":one": {"N": "1"}}, None),
    ("ADD n :d", None, {":d": {"N": "1.50"}}, None),
    ("ADD fresh :d", None, {":d": {"N": "-2"}}, None),
    ("ADD s :one", None, {":one": {"N": "1"}}, None),  # a number added to a string: refused
    ("ADD ss :set", None, {":set": {"SS": ["b"]}}, None),  # a set: moto's own way
    ("REMOVE s, nothing", None, None, None),
    ("SET #status = :v", {"#status": "status"}, {":v": {"S": "on"}}, None),
    ("SET status = :v", None, {":v": {"S": "on"}}, None),  # a reserved word: refused
    ("SET pk = :v", None, {":v": {"S": "moved"}}, None),  # the key: refused
    ("REMOVE sk", None, None, None),
    ("SET a = :v, a = :w", None, {":v": {"S": "1"}, ":w": {"S": "2"}}, None),  # overlapping paths
    ("SET a = :v SET b = :w", None, {":v": {"S": "1"}, ":w": {"S": "2"}}, None),  # two SET clauses
    ("SET #gone = :v", {"#other": "x"}, {":v": {"S": "1"}}, None),  # a name not given
    ("SET a = :gone", None, {":v": {"S": "1"}}, None),  # a value not given
    ("SET a = :v REMOVE s ADD n :one", None, {":v": {"S": "1"}, ":one": {"N": "1"}}, None),
    ("SET n = n + :one", None, {":one": {"N": "1"}}, None),  # arithmetic: moto's own way
    ("SET m.k = :v", None, {":v": {"S": "nested"}}, None),  # a nested path: moto's own way
    ("SET a = :v", None, {":v": {"S": "y" * 410_000}}, None),  # over the item size limit
    ("ADD n :one", None, {":one": {"N": "1"}, ":five": {"N": "5"}}, "n = :five"),
    ("ADD n :one", None, {":one": {"N": "1"}, ":six": {"N": "6"}}, "n = :six"),  # the condition fails
    ("SET a = :v", None, {":v": {"S": "1"}}, "attribute_not_exists(pk)"),
]


def _update_outcome(db, expression, names, values, condition, *, exists: bool):
    key = {"pk": {"S": "u"}, "sk": {"S": "A"}}
    db.delete_item(TableName=TABLE, Key=key)
    if exists:
        db.put_item(TableName=TABLE, Item={**key, **_START})
    params = {"TableName": TABLE, "Key": key, "UpdateExpression": expression, "ReturnValues": "ALL_NEW",
              "ReturnValuesOnConditionCheckFailure": "ALL_OLD"}
    if names:
        params["ExpressionAttributeNames"] = names
    if values:
        params["ExpressionAttributeValues"] = values
    if condition:
        params["ConditionExpression"] = condition
    try:
        answer = db.update_item(**params).get("Attributes")
    except ClientError as error:
        answer = (error.response["Error"]["Code"], error.response["Error"]["Message"], error.response.get("Item"))
    return answer, db.get_item(TableName=TABLE, Key=key, ConsistentRead=True).get("Item")


def _transact_outcome(db, expression, names, values, condition, *, exists: bool):
    key = {"pk": {"S": "u"}, "sk": {"S": "A"}}
    db.delete_item(TableName=TABLE, Key=key)
    if exists:
        db.put_item(TableName=TABLE, Item={**key, **_START})
    update = {"TableName": TABLE, "Key": key, "UpdateExpression": expression}
    if names:
        update["ExpressionAttributeNames"] = names
    if values:
        update["ExpressionAttributeValues"] = values
    if condition:
        update["ConditionExpression"] = condition
    try:
        db.transact_write_items(TransactItems=[{"Update": update}, _put("other", n=1)])
        answer = None
    except ClientError as error:
        answer = (error.response["Error"]["Code"], error.response["Error"]["Message"],
                  error.response.get("CancellationReasons"))
    return answer, db.get_item(TableName=TABLE, Key=key, ConsistentRead=True).get("Item")


@pytest.mark.parametrize("exists", [True, False], ids=["item", "no-item"])
@pytest.mark.parametrize("how", [_update_outcome, _transact_outcome], ids=["UpdateItem", "TransactWriteItems"])
def test_plain_updates_give_what_moto_own_way_gives(scratch, monkeypatch, how, exists):
    # Given every kind of update, plain and not, on an item with attributes of several types (or none)
    from moto.dynamodb.models import DynamoDBBackend

    # When each is applied the direct way, then with moto's own update_item
    direct = [how(scratch, *case, exists=exists) for case in _UPDATES]
    assert moto_fixes.updates._plans, "the direct way was not taken"
    monkeypatch.setattr(DynamoDBBackend, "update_item", moto_fixes._targets()["DynamoDBBackend.update_item"])
    own = [how(scratch, *case, exists=exists) for case in _UPDATES]
    # Then the answers, the errors and the items left are the same
    for case, mine, theirs in zip(_UPDATES, direct, own, strict=True):
        assert mine == theirs, case[0]


def test_an_update_too_large_for_the_item_changes_none_of_it(scratch):
    # Given an item, and an update whose two values each fit but together pass the 400 KB limit
    key = to_item({"pk": "big", "sk": "A"})
    scratch.put_item(TableName=TABLE, Item={**key, "n": {"N": "1"}})
    # When it is applied
    with pytest.raises(ClientError) as refused:
        scratch.update_item(TableName=TABLE, Key=key, UpdateExpression="SET a = :a, b = :b ADD n :one",
                            ExpressionAttributeValues={":a": {"S": "x" * 210_000}, ":b": {"S": "y" * 210_000},
                                                       ":one": {"N": "1"}})
    # Then DynamoDB's error, and the item is as it was (not half updated)
    assert refused.value.response["Error"]["Code"] == "ValidationException"
    assert "size" in refused.value.response["Error"]["Message"].lower()
    assert _get(scratch, "big") == {"pk": "big", "sk": "A", "n": 1}
    # And one that fits is applied whole
    scratch.update_item(TableName=TABLE, Key=key, UpdateExpression="SET a = :a ADD n :one",
                        ExpressionAttributeValues={":a": {"S": "x" * 210_000}, ":one": {"N": "1"}})
    assert _get(scratch, "big")["n"] == 2 and len(_get(scratch, "big")["a"]) == 210_000


# --- DynamoDB calls handed to moto's handler without a web request (emulator.py) ------------------

_CALLS = [  # (operation, parameters): a sequence, each call on what the ones before left
    ("put_item", {"TableName": TABLE, "Item": {"pk": {"S": "c"}, "sk": {"S": "A"}, "n": {"N": "1"}}}),
    ("put_item", {"TableName": TABLE, "Item": {"pk": {"S": "c"}, "sk": {"S": "A"}},
                  "ConditionExpression": "attribute_not_exists(pk)", "ReturnValuesOnConditionCheckFailure": "ALL_OLD"}),
    ("update_item", {"TableName": TABLE, "Key": {"pk": {"S": "c"}, "sk": {"S": "A"}},
                     "UpdateExpression": "ADD n :one SET t = :t", "ReturnValues": "UPDATED_NEW",
                     "ExpressionAttributeValues": {":one": {"N": "1"}, ":t": {"S": "x"}}}),
    ("update_item", {"TableName": TABLE, "Key": {"pk": {"S": "c"}, "sk": {"S": "A"}},
                     "UpdateExpression": "SET t = :t", "ConditionExpression": "n = :nine",
                     "ExpressionAttributeValues": {":t": {"S": "y"}, ":nine": {"N": "9"}}}),
    ("update_item", {"TableName": TABLE, "Key": {"pk": {"S": "c"}, "sk": {"S": "A"}},
                     "UpdateExpression": "SET t = :unused"}),  # a value not given
    ("get_item", {"TableName": TABLE, "Key": {"pk": {"S": "c"}, "sk": {"S": "A"}}, "ConsistentRead": True}),
    ("get_item", {"TableName": "NoSuchTable", "Key": {"pk": {"S": "c"}, "sk": {"S": "A"}}}),
    ("get_item", {"TableName": TABLE, "Key": {"pk": {"S": "c"}}}),  # half a key
    ("batch_write_item", {"RequestItems": {TABLE: [
        {"PutRequest": {"Item": {"pk": {"S": "c"}, "sk": {"S": f"B{i}"}, "m": {"M": {"l": {"L": [{"N": str(i)}]}}}}}}
        for i in range(3)]}}),
    ("query", {"TableName": TABLE, "KeyConditionExpression": "pk = :p", "Limit": 2,
               "ExpressionAttributeValues": {":p": {"S": "c"}}}),
    ("transact_write_items", {"TransactItems": [
        {"Update": {"TableName": TABLE, "Key": {"pk": {"S": "c"}, "sk": {"S": "A"}}, "UpdateExpression": "ADD n :one",
                    "ExpressionAttributeValues": {":one": {"N": "1"}}}},
        {"ConditionCheck": {"TableName": TABLE, "Key": {"pk": {"S": "c"}, "sk": {"S": "B0"}},
                            "ConditionExpression": "attribute_not_exists(pk)"}}]}),
    ("put_item", {"TableName": TABLE, "Item": {"pk": {"S": "c"}, "sk": {"S": "bin"}, "b": {"B": b"\x00\xff"}}}),
    ("get_item", {"TableName": TABLE, "Key": {"pk": {"S": "c"}, "sk": {"S": "bin"}}}),
    ("delete_item", {"TableName": TABLE, "Key": {"pk": {"S": "c"}, "sk": {"S": "B1"}}, "ReturnValues": "ALL_OLD"}),
    ("describe_table", {"TableName": TABLE}),
]


def _outcomes(db) -> list[Any]:
    for item in db.scan(TableName=TABLE).get("Items", []):
        db.delete_item(TableName=TABLE, Key={"pk": item["pk"], "sk": item["sk"]})
    seen: list[Any] = []
    for operation, params in _CALLS:
        try:
            answer = getattr(db, operation)(**params)
            answer.pop("ResponseMetadata")
            answer.get("Table", {}).pop("CreationDateTime", None)
            seen.append(answer)
        except ClientError as error:
            seen.append((error.response["ResponseMetadata"]["HTTPStatusCode"], error.response["Error"],
                         error.response.get("Item"), error.response.get("CancellationReasons")))
    return seen


def test_dynamodb_calls_without_a_web_request_answer_as_moto_whole_way(scratch, monkeypatch):
    # Given calls of every kind the gateway makes, some refused, one with a binary value
    from gateway_local import emulator

    taken: list[bool] = []
    direct_call = emulator._dynamodb_call

    def counted(*args: Any) -> Any:
        call = direct_call(*args)
        taken.append(call is not None)
        return call

    monkeypatch.setattr(emulator, "_dynamodb_call", counted)
    # When they are answered the direct way, then moto's whole way (a werkzeug request, its parser)
    direct = _outcomes(scratch)
    assert taken.count(True) > len(_CALLS) - 2 and taken.count(False) >= 1  # a binary value goes the whole way
    monkeypatch.setattr(emulator, "_dynamodb_call", lambda *a: None)
    whole = _outcomes(scratch)
    # Then every answer and every error is the same
    for (operation, _), mine, theirs in zip(_CALLS, direct, whole, strict=True):
        assert mine == theirs, operation
    assert direct[-3]["Item"]["b"] == {"B": b"\x00\xff"}


# --- global index partitions (moto_fixes 11.) -----------------------------------------------------------

INDEXED = "EmulatorIndexed"


@pytest.fixture
def indexed(store):
    db = client("dynamodb")
    db.create_table(TableName=INDEXED, BillingMode="PAY_PER_REQUEST",
                    AttributeDefinitions=[{"AttributeName": n, "AttributeType": "S"} for n in ("pk", "sk", "g", "r")],
                    KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}, {"AttributeName": "sk", "KeyType": "RANGE"}],
                    GlobalSecondaryIndexes=[{"IndexName": "byg", "Projection": {"ProjectionType": "ALL"},
                                             "KeySchema": [{"AttributeName": "g", "KeyType": "HASH"},
                                                           {"AttributeName": "r", "KeyType": "RANGE"}]}])
    yield db
    db.delete_table(TableName=INDEXED)


def _by_index(db, g: str) -> list[tuple[str, str]]:
    items, params = [], {"TableName": INDEXED, "IndexName": "byg", "KeyConditionExpression": "g = :g",
                         "ExpressionAttributeValues": {":g": {"S": g}}, "Limit": 3}
    while True:
        answer = db.query(**params)
        items += [(i["pk"]["S"], i["sk"]["S"]) for i in answer["Items"]]
        if "LastEvaluatedKey" not in answer:
            return items
        params["ExclusiveStartKey"] = answer["LastEvaluatedKey"]


def _by_scan(db, g: str) -> list[tuple[str, str]]:
    items = db.scan(TableName=INDEXED)["Items"]
    found = [(i["r"]["S"], i["pk"]["S"], i["sk"]["S"]) for i in items if i.get("g", {}).get("S") == g and "r" in i]
    return [(pk, sk) for _, pk, sk in sorted(found)]


def test_a_global_index_query_sees_every_write_as_a_scan_does(indexed):
    import random

    rng = random.Random(7)
    groups = ("g0", "g1", "g2")
    for step in range(300):
        pk, sk = f"p{rng.randrange(6)}", f"s{rng.randrange(4)}"
        key = {"pk": {"S": pk}, "sk": {"S": sk}}
        choice = rng.randrange(7)
        try:
            if choice == 0:  # a put, in a group or not
                item = {**key, "r": {"S": f"{rng.randrange(50):03d}"}}
                if rng.random() < 0.8:
                    item["g"] = {"S": rng.choice(groups)}
                indexed.put_item(TableName=INDEXED, Item=item)
            elif choice == 1:  # an update that moves the item to another group
                indexed.update_item(TableName=INDEXED, Key=key, UpdateExpression="SET g = :g, r = :r",
                                    ExpressionAttributeValues={":g": {"S": rng.choice(groups)},
                                                               ":r": {"S": f"{rng.randrange(50):03d}"}})
            elif choice == 2:  # an update that takes it out of the index
                indexed.update_item(TableName=INDEXED, Key=key, UpdateExpression="REMOVE g")
            elif choice == 3:
                indexed.delete_item(TableName=INDEXED, Key=key)
            elif choice == 4:  # a transaction that moves an item, then is cancelled by its last condition
                indexed.transact_write_items(TransactItems=[
                    {"Update": {"TableName": INDEXED, "Key": key, "UpdateExpression": "SET g = :g, r = :r",
                                "ExpressionAttributeValues": {":g": {"S": "g0"}, ":r": {"S": "000"}}}},
                    {"ConditionCheck": {"TableName": INDEXED, "Key": {"pk": {"S": "nobody"}, "sk": {"S": "x"}},
                                        "ConditionExpression": "attribute_exists(pk)"}}])
            elif choice == 5:  # a batch of puts and deletes
                indexed.batch_write_item(RequestItems={INDEXED: [
                    {"PutRequest": {"Item": {**key, "g": {"S": rng.choice(groups)}, "r": {"S": "010"}}}},
                    {"DeleteRequest": {"Key": {"pk": {"S": f"p{rng.randrange(6)}"}, "sk": {"S": "s9"}}}}]})
            else:  # PartiQL, which the partitions do not follow: built again
                indexed.execute_statement(Statement=f"UPDATE {INDEXED} SET g='g1' WHERE pk='{pk}' AND sk='{sk}'")
        except ClientError:
            pass  # a cancelled transaction, an update of a missing item's key...: nothing to compare yet
        for g in groups:
            assert _by_index(indexed, g) == _by_scan(indexed, g), (step, choice, g)


# --- conditions parsed once (moto_fixes 12.) give moto's own verdicts ----------------------------------

_HELD = {"n": {"N": "5"}, "s": {"S": "apple"}, "b": {"B": b"\x01"}, "ss": {"SS": ["a", "b"]},
         "l": {"L": [{"N": "1"}, {"S": "two"}]}, "m": {"M": {"k": {"S": "v"}, "d": {"N": "2"}}},
         "t": {"BOOL": True}, "z": {"NULL": True}}
_CONDITIONS = [  # (condition, names, the values of a first use, of a second use)
    ("n = :v", None, {":v": {"N": "5"}}, {":v": {"N": "6"}}),
    ("n < :v AND s = :w", None, {":v": {"N": "9"}, ":w": {"S": "apple"}}, {":v": {"N": "2"}, ":w": {"S": "apple"}}),
    ("n BETWEEN :a AND :b", None, {":a": {"N": "1"}, ":b": {"N": "5"}}, {":a": {"N": "6"}, ":b": {"N": "9"}}),
    ("n IN (:a, :b, :a)", None, {":a": {"N": "5"}, ":b": {"N": "1"}}, {":a": {"N": "4"}, ":b": {"N": "1"}}),
    ("begins_with(s, :p)", None, {":p": {"S": "app"}}, {":p": {"S": "pp"}}),
    ("contains(ss, :e) OR contains(s, :e)", None, {":e": {"S": "b"}}, {":e": {"S": "q"}}),
    ("size(l) = :n AND size(s) > :m", None, {":n": {"N": "2"}, ":m": {"N": "3"}}, {":n": {"N": "3"}, ":m": {"N": "3"}}),
    ("attribute_type(m, :t)", None, {":t": {"S": "M"}}, {":t": {"S": "L"}}),
    ("NOT (#m.k = :v)", {"#m": "m"}, {":v": {"S": "v"}}, {":v": {"S": "w"}}),
    ("l[1] = :v AND m.d >= :d", None, {":v": {"S": "two"}, ":d": {"N": "2"}}, {":v": {"S": "two"}, ":d": {"N": "3"}}),
    ("b = :b", None, {":b": {"B": b"\x01"}}, {":b": {"B": b"\x02"}}),
    ("t = :t AND attribute_exists(z)", None, {":t": {"BOOL": True}}, {":t": {"BOOL": False}}),
    ("ss = :set", None, {":set": {"SS": ["b", "a"]}}, {":set": {"SS": ["a"]}}),
    ("m = :map", None, {":map": {"M": {"k": {"S": "v"}, "d": {"N": "2"}}}}, {":map": {"M": {}}}),
    ("attribute_not_exists(gone) AND n <> :v", None, {":v": {"N": "4"}}, {":v": {"N": "5"}}),
    ("n = :v", None, {":v": {"S": "5"}}, {":v": {"N": "5"}}),  # the same expression, values of another type
    ("n BETWEEN :a AND :b", None, {":a": {"NULL": True}, ":b": {"N": "5"}}, {":a": {"N": "1"}, ":b": {"N": "5"}}),
    ("n = :missing", None, {":v": {"N": "5"}}, {":v": {"N": "5"}}),  # a value not given
    ("#gone = :v", None, {":v": {"N": "5"}}, {":v": {"N": "5"}}),  # a name not given
    ("n = = :v", None, {":v": {"N": "5"}}, {":v": {"N": "5"}}),  # not an expression
]


def _verdicts(db) -> list[Any]:
    key = {"pk": {"S": "c"}, "sk": {"S": "A"}}
    db.put_item(TableName=TABLE, Item={**key, **_HELD})
    verdicts = []
    for condition, names, *uses in _CONDITIONS:
        for values in uses:
            params = {"TableName": TABLE, "Item": {**key, **_HELD}, "ConditionExpression": condition,
                      "ExpressionAttributeValues": values, "ReturnValuesOnConditionCheckFailure": "ALL_OLD"}
            if names:
                params["ExpressionAttributeNames"] = names
            try:
                db.put_item(**params)
                verdicts.append("held")
            except ClientError as error:
                verdicts.append((error.response["Error"]["Code"], error.response["Error"]["Message"]))
            update = {"TableName": TABLE, "Key": key, "UpdateExpression": "SET #seen = :seen",
                      "ConditionExpression": condition, "ExpressionAttributeValues": {**values, ":seen": {"N": "1"}},
                      "ExpressionAttributeNames": {**(names or {}), "#seen": "seen"}}
            try:
                db.transact_write_items(TransactItems=[{"Update": update}])
                verdicts.append("held")
            except ClientError as error:
                verdicts.append((error.response["Error"]["Code"], error.response.get("CancellationReasons")))
            db.put_item(TableName=TABLE, Item={**key, **_HELD})
    return verdicts


def test_conditions_parsed_once_give_moto_own_verdicts(scratch, monkeypatch):
    # Given conditions of every form, each used twice with other values (the second use reads the kept parse)
    from moto.dynamodb.comparisons import ConditionExpressionParser

    moto_fixes.conditions._conditions.clear()
    # When each is checked on the same item the kept way, then with moto's own parse every time
    kept = _verdicts(scratch)
    assert any(entry is not None for entry in moto_fixes.conditions._conditions.values()), "no parse was kept"
    monkeypatch.setattr(ConditionExpressionParser, "parse", moto_fixes._targets()["ConditionExpressionParser.parse"])
    own = _verdicts(scratch)
    # Then every verdict, and every error, is the same
    assert kept == own
    assert "held" in kept and any(v != "held" for v in kept)


def test_dynamodb_calls_to_the_emulator_go_unsigned_and_any_other_signed(store):
    # Given a client of the emulator and one of another endpoint, each call seen before it is sent
    import botocore.session
    from botocore.awsrequest import AWSResponse

    seen: dict[str, Any] = {}

    def capture(name: str):
        def before_send(request: Any, **_: Any) -> Any:
            seen[name] = dict(request.headers)
            if name == "elsewhere":  # never sent: nothing here reaches the internet
                return AWSResponse(request.url, 200, {}, None)
            return None
        return before_send

    emulator = client("dynamodb")
    emulator.meta.events.register("before-send.dynamodb", capture("emulator"))
    elsewhere = botocore.session.get_session().create_client("dynamodb", endpoint_url="http://127.0.0.1:9",
                                                             region_name="us-east-1")
    elsewhere.meta.events.register("before-send.dynamodb", capture("elsewhere"))
    # When each makes a call
    emulator.list_tables()
    try:
        elsewhere.list_tables()
    except Exception:  # noqa: BLE001 - the stand-in answer has no body; only the request matters
        pass
    # Then only the other endpoint's call is signed
    assert "Authorization" not in seen["emulator"]
    sqs = client("sqs")
    sqs.meta.events.register("before-send.sqs", capture("sqs"))
    sqs.list_queues()
    assert "Authorization" in seen["sqs"]  # another service of the emulator: moto routes it by its signature
    assert seen["elsewhere"]["Authorization"].startswith(b"AWS4-HMAC-SHA256") or \
        str(seen["elsewhere"]["Authorization"]).startswith("AWS4-HMAC-SHA256")
