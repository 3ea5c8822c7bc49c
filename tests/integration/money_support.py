"""What a money test asserts beyond the ledger: no reservation is left open, and a request that
costs nothing leaves the quota where it was (a hold never released leaves an empty ledger too)."""

from __future__ import annotations

from gateway.admission import balances, billing
from gateway.settings import get_settings
from gateway.store.aws import client, from_item, to_item
from gateway.store.holds import reservation_pk

# Far beyond any hold's deadline: `billing.overdue` then lists every reservation still open.
_END_OF_TIME = 2 ** 40


def open_reservations(user_id: int | None = None) -> list[billing.Reservation]:
    """Every reservation still `reserved` (the sweeper's index holds only open ones), of one user or all."""
    return [r for r in billing.overdue(_END_OF_TIME)
            if r.status == billing.RESERVED and (user_id is None or r.user_id == user_id)]


def assert_nothing_held(accounts, quota_before: int, user_id: int = 1) -> None:
    """The request moved no money: nothing of the user's is still held and the quota is back."""
    assert open_reservations(user_id) == [], "a reservation was left open"
    assert balances.get_user(user_id)["quota"] == quota_before


def closed_as(reservation_id: str, outcome: str, units: int | None = None) -> billing.Reservation:
    """The reservation, asserted closed with `outcome` (and, for a settlement, `units` charged)."""
    reservation = billing.get_reservation(reservation_id)
    assert reservation is not None, f"no reservation {reservation_id}"
    assert reservation.status == outcome, f"{reservation_id} is {reservation.status}, not {outcome}"
    if units is not None:
        record = reservation_record(reservation_id)
        assert int(record["closed_units"]) == units, f"{reservation_id} closed at {record['closed_units']} units"
    return reservation


def reservation_record(reservation_id: str) -> dict:
    """The reservation's item as DynamoDB holds it (closed units, close time, expiry)."""
    return from_item(client("dynamodb").get_item(
        TableName=get_settings().accounts_table, Key=to_item({"pk": reservation_pk(reservation_id), "sk": "RES"}),
        ConsistentRead=True)["Item"])


def put_in_group(accounts, user_id: int, group: str, ratios: dict[str, float]) -> None:
    """The operator's two moves, straight into the store: GroupRatio set to `ratios`, the user moved
    to `group` (tests of the API make them through PUT /api/option/ and PUT /api/user/)."""
    import json
    import time

    from gateway import options
    from gateway.store.options import OptionsRepository

    OptionsRepository().put_option("GroupRatio", json.dumps(ratios), by=1, at=int(time.time()))
    options.forget()
    accounts.users.set_user_fields(user_id, {"group": group})
