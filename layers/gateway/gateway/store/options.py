"""The site options' one item in the accounts table (`pk` `OPTION`, `sk` `SITE`): each option an
operator has set, its text in an attribute of its own (`o:<new-api option key>`); what they mean
and their rules: `gateway.options`."""

from __future__ import annotations

from gateway.settings import get_settings
from gateway.store.aws import client, from_item, to_item, to_values

OPTIONS_KEY = {"pk": "OPTION", "sk": "SITE"}


class OptionsRepository:
    def __init__(self, table: str | None = None):
        self._table = table

    @property
    def table(self) -> str:
        return self._table or get_settings().accounts_table

    @property
    def _db(self):
        return client("dynamodb")

    def options(self) -> dict[str, str]:
        """Every option an operator has set (key -> text): one strongly consistent GetItem, so every
        function that reads an option (a group's ratio at admission) needs GetItem only."""
        item = from_item(self._db.get_item(TableName=self.table, Key=to_item(OPTIONS_KEY),
                                           ConsistentRead=True).get("Item")) or {}
        return {name[2:]: str(value) for name, value in item.items() if name.startswith("o:")}

    def put_option(self, key: str, value: str, *, by: int, at: int) -> None:
        """One option's text; the others are untouched (an attribute each, set alone)."""
        self._db.update_item(TableName=self.table, Key=to_item(OPTIONS_KEY),
                             UpdateExpression="SET #o = :v, updated_by = :by, updated_at = :at",
                             ExpressionAttributeNames={"#o": f"o:{key}"},
                             ExpressionAttributeValues=to_values({":v": value, ":by": int(by), ":at": int(at)}))
