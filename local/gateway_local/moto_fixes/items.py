"""2. and 10.: what moto keeps of each object it makes, and how it sizes a new item."""

from __future__ import annotations

from typing import Any

# The size of an item LimitedSizeDict allows (moto's stand-in for DynamoDB's 400 KB).
ITEM_SIZE_LIMIT = 405_000


def install(originals: dict[str, Any]) -> None:
    from moto.core.common_models import BaseModel
    from moto.dynamodb.models.dynamo_type import Item

    BaseModel.__new__ = staticmethod(_untracked_new)  # type: ignore[method-assign]
    Item.__init__ = _item_init  # type: ignore[method-assign]


def _untracked_new(cls: type, *args: Any, **kwargs: Any) -> Any:
    return object.__new__(cls)


def _item_init(self: Any, hash_key: Any, range_key: Any, attrs: dict[str, Any]) -> None:
    """moto's `Item.__init__` with its size check kept as a running total (10., see the package docstring)."""
    from moto.dynamodb.models.dynamo_type import DynamoType, ItemSizeTooLarge, LimitedSizeDict
    from moto.dynamodb.models.utilities import bytesize

    self.hash_key, self.range_key = hash_key, range_key
    self.attrs = LimitedSizeDict()
    size = 0
    for key, value in attrs.items():
        typed = DynamoType(value)
        size += bytesize(key) + typed.size()
        if size > ITEM_SIZE_LIMIT:
            raise ItemSizeTooLarge
        dict.__setitem__(self.attrs, key, typed)
