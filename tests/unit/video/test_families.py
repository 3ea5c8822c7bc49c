"""The task-family registry and the pricing rules every family shares."""

from decimal import Decimal

import pytest

from gateway.prices import Price
from gateway.store.tasks import Task
from gateway.tasks.adapter import UNIFIED
from gateway.tasks.families import FAMILIES, families, family_of
from gateway.tasks.families.base import Quantities, TaskFamily

PER_SECOND = Price(per_second=Decimal("0.40"))  # 200000 units per second
PER_IMAGE = Price(per_image=Decimal("0.04"))  # 20000 units per image
PER_CALL = Price(per_call=Decimal("0.02"))  # 10000 units per call


def test_every_registered_family_loads_under_its_own_name_with_complete_status_tables():
    for name in FAMILIES:
        family = family_of(name)
        # a family's channels speak its own protocol; a batch runs on a text channel's batch API
        # first, else on the gateway (a text protocol without one)
        assert isinstance(family, TaskFamily) and family.name == name
        assert family.protocols == (("chat", "messages", "content", "bedrock", "azure") if name == "batch"
                                    else (name,))
        assert set(family.statuses.values()) <= set(UNIFIED)
        assert set(family.public_statuses) == set(UNIFIED)
    assert [f.name for f in families()] == list(FAMILIES)


def test_an_unregistered_family_is_a_key_error():
    with pytest.raises(KeyError, match="omega"):
        family_of("omega")


def test_a_family_owns_the_models_its_name_prefixes():
    assert family_of("delta").owns_model("delta-3.0-generate-001")
    assert not family_of("delta").owns_model("zeta-video-1-0-pro-250528")
    assert not family_of("delta").owns_model(None)


@pytest.mark.parametrize("quantities, price, units", [
    (Quantities(seconds=8, samples=2), PER_SECOND, 1_600_000),
    (Quantities(seconds=10, multiplier="3.5"), PER_SECOND, 7_000_000),  # a pro mode at 3.5x
    (Quantities(images=4, samples=4), PER_IMAGE, 80_000),
    (Quantities(images=1, multiplier="1.5"), PER_IMAGE, 30_000),
    (Quantities(calls=1, multiplier="2"), PER_CALL, 20_000),  # an action priced at twice the base call
])
def test_the_hold_is_every_sample_times_the_price_times_the_multiplier(quantities, price, units):
    assert quantities.units(price) == units
    # and it survives the round trip through the stored task
    assert Quantities.of(quantities.as_dict()) == quantities


def _task(quantities: Quantities, results: int, held: int) -> Task:
    return Task(task_id="task_1", owner_id="1", family="delta", model="m", channel="c", upstream_task_id="u",
                created_at=0, updated_at=0, reservation={"units": held}, quantities=quantities.as_dict(),
                result_urls=[f"https://r/{i}" for i in range(results)])


def test_fewer_results_than_asked_settle_proportionally_and_never_above_the_hold():
    family = family_of("delta")
    quantities = Quantities(images=4, samples=4, multiplier="1.5")
    held = quantities.units(PER_IMAGE)
    assert family.units_to_settle(_task(quantities, 4, held), PER_IMAGE) == held
    assert family.units_to_settle(_task(quantities, 1, held), PER_IMAGE) == held // 4
    # a price raised since the submit never charges more than was held
    assert family.units_to_settle(_task(quantities, 3, held), Price(per_image=Decimal("1"))) == held
    # a model no longer priced keeps the price it was held at
    assert family.units_to_settle(_task(quantities, 1, held), None) == held


def test_the_task_record_maps_to_its_item_and_back():
    task = _task(Quantities(seconds=4), 1, 200_000).replace(open_shard="open#1", details={"seed": 7})
    item = task.item()
    assert "completed_at" not in item and item["open_shard"] == "open#1"
    assert Task.from_item({**item, "an_attribute_of_a_newer_version": 1}) == task
    assert "open_shard" not in task.replace(open_shard=None).item()
