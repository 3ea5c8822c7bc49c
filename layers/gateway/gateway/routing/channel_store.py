"""The channels operators add through `/api/channel/`: data in the accounts table.

| item | pk | sk |
|---|---|---|
| a channel | `CHANNEL` | `<channel name>` (`id`, `spec`, `key_ref`, `key_last4`, `key_version`, `version`) |
| the channel id counter | `COUNTER` | `CHANNEL` |

`spec` is the channel's entry as the channels document writes it (name, protocol, base_url,
models, model_map, priority, weight, poll_hosts and any field the document gains), minus its key,
as JSON: the catalog builds the channel from it with the document's own rules
(`routing/channel.channel_of`), so a field added to the document reaches these channels unchanged. The key
itself is in the key store (`routing/channel_keys`), named by `key_ref`. Every write is
conditioned (a new name on the name being free, a change or a delete on the item's `version`):
two operators never overwrite each other's change unseen.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, replace
from typing import Any

from gateway.routing.health import PARTITION as HEALTH_PARTITION
from gateway.settings import get_settings

PARTITION = "CHANNEL"


@dataclass(frozen=True)
class ChannelRecord:
    id: int
    name: str
    spec: dict[str, Any]  # the document entry, without a key
    key_ref: str
    key_last4: str
    key_version: str  # the key's version in the key store (a secret's VersionId)
    version: int = 1
    created_at: int = 0
    updated_at: int = 0

    def item(self) -> dict[str, Any]:
        return {"pk": PARTITION, "sk": self.name, "id": self.id, "spec": json.dumps(self.spec, sort_keys=True),
                "key_ref": self.key_ref, "key_last4": self.key_last4, "key_version": self.key_version,
                "version": self.version, "created_at": self.created_at, "updated_at": self.updated_at}

    @classmethod
    def of(cls, item: dict[str, Any]) -> ChannelRecord:
        return cls(id=int(item["id"]), name=str(item["sk"]), spec=json.loads(item["spec"]),
                   key_ref=str(item["key_ref"]), key_last4=str(item.get("key_last4") or ""),
                   key_version=str(item["key_version"]), version=int(item.get("version") or 1),
                   created_at=int(item.get("created_at") or 0), updated_at=int(item.get("updated_at") or 0))

    def changed(self, **values: Any) -> ChannelRecord:
        return replace(self, version=self.version + 1, updated_at=int(time.time()), **values)


class StaleChannel(Exception):
    """The item changed (or went) since it was read: nothing was written."""


class ChannelStore:
    def __init__(self, table: str | None = None):
        self.table = table or get_settings().accounts_table

    def all(self, *, consistent: bool = False) -> list[ChannelRecord]:
        """Every channel added through the API, by id (one Query of a small partition)."""
        from gateway.store.aws import client, from_item, to_values

        found, start = [], None
        while True:
            page = client("dynamodb").query(TableName=self.table, KeyConditionExpression="pk = :p",
                                            ExpressionAttributeValues=to_values({":p": PARTITION}),
                                            ConsistentRead=consistent,
                                            **({"ExclusiveStartKey": start} if start else {}))
            found += [ChannelRecord.of(from_item(item)) for item in page.get("Items", [])]
            start = page.get("LastEvaluatedKey")
            if not start:
                return sorted(found, key=lambda r: r.id)

    def next_id(self) -> int:
        from gateway.store.aws import client, from_item, to_item, to_values

        answer = client("dynamodb").update_item(
            TableName=self.table, Key=to_item({"pk": "COUNTER", "sk": "CHANNEL"}), UpdateExpression="ADD #v :one",
            ExpressionAttributeNames={"#v": "value"}, ExpressionAttributeValues=to_values({":one": 1}),
            ReturnValues="UPDATED_NEW")
        return int(from_item(answer["Attributes"])["value"])

    def create(self, record: ChannelRecord) -> None:
        """Stores a new channel; `StaleChannel` when its name is taken."""
        self._put(record, {"ConditionExpression": "attribute_not_exists(pk)"})

    def replace(self, record: ChannelRecord) -> None:
        """Stores `record` over the version before it; `StaleChannel` if another write came first."""
        from gateway.store.aws import to_values

        self._put(record, {"ConditionExpression": "version = :v",
                           "ExpressionAttributeValues": to_values({":v": record.version - 1})})

    def delete(self, record: ChannelRecord) -> None:
        """Removes the channel as read (`StaleChannel` if it changed meanwhile), then its health item."""
        from gateway.store.aws import client, is_condition_failure, to_item, to_values

        db = client("dynamodb")
        try:
            db.delete_item(TableName=self.table, Key=to_item({"pk": PARTITION, "sk": record.name}),
                           ConditionExpression="version = :v",
                           ExpressionAttributeValues=to_values({":v": record.version}))
        except Exception as exc:
            if is_condition_failure(exc):
                raise StaleChannel(record.name) from None
            raise
        db.delete_item(TableName=self.table, Key=to_item({"pk": HEALTH_PARTITION, "sk": record.name}))

    def _put(self, record: ChannelRecord, condition: dict[str, Any]) -> None:
        from gateway.store.aws import client, is_condition_failure, to_item

        try:
            client("dynamodb").put_item(TableName=self.table, Item=to_item(record.item()), **condition)
        except Exception as exc:
            if is_condition_failure(exc):
                raise StaleChannel(record.name) from None
            raise
