"""This concern's items in the accounts table (single-table design, beside `store.table`; the
site options' item is `store.options`).

| item | pk | sk |
|---|---|---|
| an id counter | `COUNTER` | `REDEMPTION` |
| a redemption code (`redemption`) | `REDEEM#<code>` | `REDEEM` (gsi1: `REDEMPTIONS` / `<id, 12 digits>`) |
| a code's id pointer | `REDEMPTIONID#<id>` | `REDEMPTIONID` (`key`: the code) |
| a top-up order (`payments`) | `ORDER#<trade no>` | `ORDER` (gsi1 `ORDERS#<user>`, gsi2 `ORDERS`: `<created>#<no>`) |
| a credited payment's order | `PAYMENT#<payment intent id>` | `PAYMENT` (`trade_no`; written with the credit) |

A code is keyed by itself, so a redemption reads one item and claims it with one conditional
write; the operator's list reads the codes newest first from one index partition.
"""

from __future__ import annotations

from typing import Any

from gateway.settings import get_settings
from gateway.store.aws import client, from_item, is_condition_failure, to_item, to_values, transact

CODES_INDEX_PK = "REDEMPTIONS"


def code_key(code: str) -> dict[str, str]:
    return {"pk": f"REDEEM#{code}", "sk": "REDEEM"}


def code_id_key(code_id: int) -> dict[str, str]:
    return {"pk": f"REDEMPTIONID#{code_id}", "sk": "REDEMPTIONID"}


def order_key(trade_no: str) -> dict[str, str]:
    return {"pk": f"ORDER#{trade_no}", "sk": "ORDER"}


def payment_key(payment_intent: str) -> dict[str, str]:
    return {"pk": f"PAYMENT#{payment_intent}", "sk": "PAYMENT"}


def order_index(user_id: int, created_at: int, trade_no: str) -> dict[str, str]:
    sort = f"{int(created_at):012d}#{trade_no}"
    return {"gsi1pk": f"ORDERS#{user_id}", "gsi1sk": sort, "gsi2pk": "ORDERS", "gsi2sk": sort}


def code_index(code_id: int) -> dict[str, str]:
    return {"gsi1pk": CODES_INDEX_PK, "gsi1sk": f"{int(code_id):012d}"}


class CommerceRepository:
    def __init__(self, table: str | None = None):
        self._table = table

    @property
    def table(self) -> str:
        return self._table or get_settings().accounts_table

    @property
    def _db(self):
        return client("dynamodb")

    # Ids ----------------------------------------------------------------------------------------

    def next_ids(self, name: str, count: int) -> range:
        """`count` fresh ids of the counter `name` (one atomic ADD)."""
        answer = self._db.update_item(
            TableName=self.table, Key=to_item({"pk": "COUNTER", "sk": name}), UpdateExpression="ADD #v :n",
            ExpressionAttributeNames={"#v": "value"}, ExpressionAttributeValues=to_values({":n": int(count)}),
            ReturnValues="UPDATED_NEW")
        last = int(answer["Attributes"]["value"]["N"])
        return range(last - count + 1, last + 1)

    # Redemption codes --------------------------------------------------------------------------

    def put_code(self, code: dict[str, Any]) -> None:
        """A new code and its id pointer, together (a code never exists without its pointer)."""
        transact(self._db, [
            {"Put": {"TableName": self.table, "Item": to_item({**code_key(code["key"]), **code_index(code["id"]),
                                                               **code}),
                     "ConditionExpression": "attribute_not_exists(pk)"}},
            {"Put": {"TableName": self.table, "Item": to_item({**code_id_key(code["id"]), "key": code["key"]}),
                     "ConditionExpression": "attribute_not_exists(pk)"}},
        ])

    def code(self, code: str, consistent: bool = True) -> dict[str, Any] | None:
        answer = self._db.get_item(TableName=self.table, Key=to_item(code_key(code)), ConsistentRead=consistent)
        return from_item(answer.get("Item"))

    def code_by_id(self, code_id: int) -> dict[str, Any] | None:
        pointer = from_item(self._db.get_item(TableName=self.table, Key=to_item(code_id_key(code_id)),
                                              ConsistentRead=True).get("Item"))
        return self.code(str(pointer["key"])) if pointer else None

    def codes_page(self, *, limit: int, before_id: int | None) -> tuple[list[dict[str, Any]], bool]:
        """Codes newest first (by id), `limit` of them after the id `before_id`, and whether more follow."""
        condition = "gsi1pk = :pk" + (" AND gsi1sk < :before" if before_id is not None else "")
        values: dict[str, Any] = {":pk": CODES_INDEX_PK}
        if before_id is not None:
            values[":before"] = code_index(before_id)["gsi1sk"]
        answer = self._db.query(TableName=self.table, IndexName="gsi1", KeyConditionExpression=condition,
                                ExpressionAttributeValues=to_values(values), ScanIndexForward=False, Limit=limit + 1)
        items = [from_item(item) for item in answer.get("Items", [])]
        return items[:limit], len(items) > limit

    def update_unused(self, code: str, changes: dict[str, Any], *, used: int) -> bool:
        """Sets `changes` on an existing code whose status is not `used`; False otherwise."""
        names = {f"#a{n}": name for n, name in enumerate(changes)}
        values = {f":v{n}": value for n, value in enumerate(changes.values())}
        try:
            self._db.update_item(
                TableName=self.table, Key=to_item(code_key(code)),
                UpdateExpression="SET " + ", ".join(f"#a{n} = :v{n}" for n in range(len(changes))),
                ConditionExpression="attribute_exists(pk) AND #s <> :used",
                ExpressionAttributeNames={**names, "#s": "status"},
                ExpressionAttributeValues=to_values({**values, ":used": int(used)}))
        except Exception as exc:
            if is_condition_failure(exc):
                return False
            raise
        return True

    def delete_code(self, code: str) -> dict[str, Any] | None:
        """Deletes a code; answers it as it was when deleted (None: already gone). Its id pointer
        goes after it (a pointer left by a crash leads nowhere: `code_by_id` answers None)."""
        old = from_item(self._db.delete_item(TableName=self.table, Key=to_item(code_key(code)),
                                             ReturnValues="ALL_OLD").get("Attributes"))
        if old is not None:
            self._db.delete_item(TableName=self.table, Key=to_item(code_id_key(int(old["id"]))))
        return old

    # Top-up orders ---------------------------------------------------------------------------------

    def put_order(self, order: dict[str, Any]) -> None:
        self._db.put_item(TableName=self.table, Item=to_item({
            **order_key(order["trade_no"]), **order_index(order["user_id"], order["created_at"], order["trade_no"]),
            **order}), ConditionExpression="attribute_not_exists(pk)")

    def order(self, trade_no: str) -> dict[str, Any] | None:
        return from_item(self._db.get_item(TableName=self.table, Key=to_item(order_key(trade_no)),
                                           ConsistentRead=True).get("Item"))

    def set_order_session(self, trade_no: str, session_id: str, pay_link: str = "", expires_at: int = 0) -> None:
        """The Checkout Session's id, link and expiry on the order (a session's events find the order by
        the `client_reference_id` that names it, then check this id)."""
        self._db.update_item(TableName=self.table, Key=to_item(order_key(trade_no)),
                             UpdateExpression="SET session_id = :s, pay_link = :l, expires_at = :e",
                             ExpressionAttributeValues=to_values({":s": session_id, ":l": pay_link,
                                                                 ":e": expires_at}))

    def ask_cancel(self, trade_no: str, now: int) -> bool:
        """Marks a pending order as being cancelled by its payer; False when it is not pending."""
        try:
            self._db.update_item(
                TableName=self.table, Key=to_item(order_key(trade_no)), UpdateExpression="SET cancel_asked_at = :now",
                ConditionExpression="#s = :pending", ExpressionAttributeNames={"#s": "status"},
                ExpressionAttributeValues=to_values({":now": now, ":pending": "pending"}))
        except Exception as exc:
            if is_condition_failure(exc):
                return False
            raise
        return True

    def order_for_payment(self, payment_intent: str) -> str | None:
        """The order a credited PaymentIntent paid, None if none (yet)."""
        if not payment_intent:
            return None
        pointer = from_item(self._db.get_item(TableName=self.table, Key=to_item(payment_key(payment_intent)),
                                              ConsistentRead=True).get("Item"))
        return str(pointer["trade_no"]) if pointer else None

    def end_order(self, trade_no: str, status: str) -> bool:
        """A pending order ends unpaid (`status`); False when it was not pending."""
        try:
            self._db.update_item(
                TableName=self.table, Key=to_item(order_key(trade_no)), UpdateExpression="SET #s = :end",
                ConditionExpression="#s = :pending", ExpressionAttributeNames={"#s": "status"},
                ExpressionAttributeValues=to_values({":end": status, ":pending": "pending"}))
        except Exception as exc:
            if is_condition_failure(exc):
                return False
            raise
        return True

    def orders_page(self, *, user_id: int | None, limit: int) -> tuple[list[dict[str, Any]], bool]:
        """One user's orders (gsi1) or everyone's (gsi2), newest first, and whether more follow."""
        index, key = ("gsi1", f"ORDERS#{user_id}") if user_id is not None else ("gsi2", "ORDERS")
        answer = self._db.query(TableName=self.table, IndexName=index, KeyConditionExpression=f"{index}pk = :pk",
                                ExpressionAttributeValues=to_values({":pk": key}), ScanIndexForward=False,
                                Limit=limit + 1)
        items = [from_item(item) for item in answer.get("Items", [])]
        return items[:limit], len(items) > limit
