"""3. and 11.: a Query reads the items of its partition, of the table or of a global index."""

from __future__ import annotations

from typing import Any


def install(originals: dict[str, Any]) -> None:
    from moto.dynamodb.models.table import Table

    original_query = originals["Table.query"]

    def query(self: Any, hash_key: Any, *args: Any, **kwargs: Any) -> Any:
        index_name = kwargs.get("index_name", args[6] if len(args) > 6 else None)
        if index_name is None and hash_key is not None and self.range_key_attr is not None:
            partition = self.items.get(hash_key)  # .get: the dict is a defaultdict
            items = list(partition.values()) if partition else []
            return original_query(_Candidates(self, items), hash_key, *args, **kwargs)
        if index_name is not None:
            conditions = kwargs.get("hash_key_conditions", args[9] if len(args) > 9 else None)
            view = _index_partition(self, index_name, conditions)
            if view is not None:
                return original_query(view, hash_key, *args, **kwargs)
        return original_query(self, hash_key, *args, **kwargs)

    Table.query = query  # type: ignore[method-assign]


def generation() -> int:
    """Bumped whenever items or a table's schema may have changed without the hooks seeing it."""
    return _index_generation


class _Candidates:
    """A table seen through some of its items (one partition of the table or of an index): its
    `all_items` are those."""

    def __init__(self, table: Any, items: list[Any]):
        self._table, self._items = table, items

    def all_items(self) -> list[Any]:
        return self._items

    def __getattr__(self, name: str) -> Any:
        return getattr(self._table, name)


_index_generation = 0  # bumped by a call that may change items without the hooks below seeing it


class _GlobalIndexes:
    """The global indexes of one table as partitions: the index's hash key values -> its items."""

    def __init__(self, table: Any):
        self.generation = _index_generation
        self.hash_attrs = {index.name: tuple(k["AttributeName"] for k in index.schema if k["KeyType"] == "HASH")
                           for index in table.global_indexes}
        self.partitions: dict[str, dict[tuple[Any, ...], dict[tuple[Any, Any], Any]]] = {
            name: {} for name in self.hash_attrs}
        self.memberships: dict[tuple[Any, Any], dict[str, tuple[Any, ...]]] = {}  # table key -> index -> values
        for item in _stored_items(table):
            self._add(item)

    def _add(self, item: Any) -> None:
        key, found = (item.hash_key, item.range_key), {}
        for name, attributes in self.hash_attrs.items():
            values = tuple(item.attrs.get(attribute) for attribute in attributes)
            if all(value is not None for value in values):
                self.partitions[name].setdefault(values, {})[key] = item
                found[name] = values
        if found:
            self.memberships[key] = found

    def refresh(self, table: Any, hash_key: Any, range_key: Any) -> None:
        """Files the item now stored under this key (if any) where it belongs, and only there."""
        key = (hash_key, range_key)
        for name, values in self.memberships.pop(key, {}).items():
            partition = self.partitions[name].get(values)
            if partition is not None:
                partition.pop(key, None)
                if not partition:
                    del self.partitions[name][values]
        item = _stored_item(table, hash_key, range_key)
        if item is not None:
            self._add(item)


def _stored_items(table: Any) -> list[Any]:
    if table.range_key_attr is None:
        return list(table.items.values())
    return [item for partition in table.items.values() for item in partition.values()]


def _stored_item(table: Any, hash_key: Any, range_key: Any) -> Any:
    if range_key is None:
        return None if table.range_key_attr is not None else table.items.get(hash_key)
    partition = table.items.get(hash_key)  # .get: the dict is a defaultdict
    return partition.get(range_key) if partition else None


def _indexes_of(table: Any) -> _GlobalIndexes:
    indexes = table.__dict__.get("_gateway_indexes")
    if indexes is None or indexes.generation != _index_generation:
        indexes = table.__dict__["_gateway_indexes"] = _GlobalIndexes(table)
    return indexes


def refresh(table: Any, hash_key: Any, range_key: Any) -> None:
    indexes = table.__dict__.get("_gateway_indexes")
    if indexes is not None and indexes.generation == _index_generation:
        indexes.refresh(table, hash_key, range_key)


def _index_partition(table: Any, index_name: str, conditions: list[tuple[str, Any]] | None) -> Any:
    """The table seen through one partition of a global index; None where the whole table must be
    looked at (a local index, a condition on other attributes, an unknown index: moto judges)."""
    if not table.global_indexes:
        return None
    indexes = _indexes_of(table)
    attributes = indexes.hash_attrs.get(index_name)
    asked = dict(conditions or [])
    if attributes is None or set(asked) != set(attributes):
        return None
    items = indexes.partitions[index_name].get(tuple(asked[attribute] for attribute in attributes), {})
    return _Candidates(table, list(items.values()))


def _key_of_put(table: Any, attrs: dict[str, Any]) -> tuple[Any, Any] | None:
    from moto.dynamodb.models.dynamo_type import DynamoType

    try:
        hash_key = DynamoType(attrs[table.hash_key_attr])
        range_key = DynamoType(attrs[table.range_key_attr]) if table.range_key_attr else None
    except Exception:  # noqa: BLE001 - no key: moto refuses the put, nothing is stored
        return None
    return hash_key, range_key


def keep_indexes() -> None:
    """Hooks every way an item is stored, changed or removed to `refresh` (11.)."""
    from moto.dynamodb.models import DynamoDBBackend as backend_class
    from moto.dynamodb.models.table import Table as table_class

    put, delete, update = table_class.put_item, table_class.delete_item, backend_class.update_item

    def put_item(self: Any, item_attrs: dict[str, Any], *args: Any, **kwargs: Any) -> Any:
        key = _key_of_put(self, item_attrs)
        try:
            return put(self, item_attrs, *args, **kwargs)
        finally:
            if key is not None:
                refresh(self, *key)

    def delete_item(self: Any, hash_key: Any, range_key: Any) -> Any:
        try:
            return delete(self, hash_key, range_key)
        finally:
            refresh(self, hash_key, range_key)

    def update_item(self: Any, table_name: str, key: dict[str, Any], *args: Any, **kwargs: Any) -> Any:
        try:
            return update(self, table_name, key, *args, **kwargs)
        finally:
            table = self.tables.get(table_name)
            if table is not None:
                found = _key_of_put(table, key) if table.hash_key_attr in key else None
                if found is not None:
                    refresh(table, *found)
                else:
                    _forget_indexes()

    table_class.put_item, table_class.delete_item = put_item, delete_item  # type: ignore[method-assign]
    backend_class.update_item = update_item  # type: ignore[method-assign]
    for name in ("update_table", "update_table_global_indexes", "execute_statement", "execute_transaction",
                 "batch_execute_statement", "restore_table_from_backup", "restore_table_to_point_in_time",
                 "import_table"):
        setattr(backend_class, name, _forgetting(getattr(backend_class, name)))


def _forget_indexes() -> None:
    global _index_generation
    _index_generation += 1


def _forgetting(method: Any) -> Any:
    def call(*args: Any, **kwargs: Any) -> Any:
        try:
            return method(*args, **kwargs)
        finally:
            _forget_indexes()

    return call
