"""The plants table: one item per plant, keyed by its int64 id."""

from __future__ import annotations

import time

from gateway.errors import Conflict
from gateway.schemas.plants import NewPlant, Plant
from gateway.settings import get_settings
from gateway.store.aws import client, from_item, is_condition_failure, to_item


class PlantsRepository:
    def __init__(self, table: str | None = None):
        self._table = table

    @property
    def table(self) -> str:
        return self._table or get_settings().plants_table

    def create(self, plant: NewPlant, *, owner_id: int) -> Plant:
        """Stores a new plant; an id that exists already is a `Conflict` (409), never overwritten."""
        item = {"id": plant.id, "name": plant.name, "tag": plant.tag, "owner_id": owner_id,
                "created_at": int(time.time())}
        try:
            client("dynamodb").put_item(TableName=self.table, Item=to_item(item),
                                        ConditionExpression="attribute_not_exists(id)")
        except Exception as exc:
            if is_condition_failure(exc):
                raise Conflict(f"id: a plant with id {plant.id} already exists", param="id") from None
            raise
        return Plant(name=plant.name, tag=plant.tag)

    def get(self, plant_id: int) -> Plant | None:
        found = from_item(client("dynamodb").get_item(
            TableName=self.table, Key=to_item({"id": plant_id})).get("Item"))
        return Plant(name=found["name"], tag=found.get("tag")) if found else None
