"""The model list: family and kind from the catalog alone, and each SDK's list shape."""

from __future__ import annotations

import pytest

from gateway.api.models import (
    available,
    chat_list,
    content_list,
    describe,
    dialect_of,
    family_of,
    find,
    kind_of,
    messages_list,
)
from gateway.auth import Principal
from gateway.errors import Dialect, InvalidRequest, NotFound
from gateway.prices import Price
from gateway.routing.catalog import Catalog


def principal(allowed: tuple[str, ...] | None = None) -> Principal:
    return Principal(user_id=1, key_hash="h", key_id="k", key_name="n", unlimited=True, allowed_models=allowed,
                     expires_at=0)


def catalog(channels: list[dict], prices: dict | None = None) -> Catalog:
    return Catalog.from_document({"channels": [{"base_url": "http://up", "api_key": "k", **c} for c in channels],
                                  "prices": prices or {}})


def test_a_new_family_appears_by_its_prices_and_channels_alone():
    # Given prices and channels of task families no code knows about
    built = catalog([{"name": "a", "protocol": "alpha", "models": ["*"]},
                     {"name": "g", "protocol": "gamma", "models": ["gamma2.6-i2v"]},
                     {"name": "i", "protocol": "imgtask", "models": ["mj-imagine"]}],
                    {"alpha-v2-master": {"per_call": 0.2}, "gamma2.6-i2v": {"per_second": 0.1},
                     "mj-imagine": {"per_call": 0.05}})
    # When the list is made
    infos = {i.id: i for i in available(principal(), built)}
    # Then each is there with its family (the id's family word, else its channel's protocol) and kind
    assert (infos["alpha-v2-master"].family, infos["alpha-v2-master"].kind) == ("alpha", "task")
    assert (infos["gamma2.6-i2v"].family, infos["gamma2.6-i2v"].kind) == ("gamma", "video")
    assert (infos["mj-imagine"].family, infos["mj-imagine"].kind) == ("imgtask", "task")
    # And the shipped video models of other families are not listed: no channel of theirs exists
    assert "epsilon-2" not in infos and "m-small" not in infos


def test_kinds_come_from_the_price_shape_and_families_from_the_id():
    assert kind_of(Price.of({"per_image": 1})) == "image"
    assert kind_of(Price.of({"per_second": 1})) == "video"
    assert kind_of(Price.of({"input_per_million": 1, "output_per_million": 0})) == "embedding"
    assert kind_of(Price.of({"input_per_million": 1, "output_per_million": 2})) == "text"
    empty = catalog([])
    assert [family_of(m, empty) for m in ("iota-image-1", "eta-image-edit", "theta-3", "zeta-video-1-0-pro-250528",
                                          "beta-2-pro", "delta-2.0-generate-001", "m-small", "alphabet")] == [
        "iota", "eta", "theta", "zeta", "beta", "delta", "gateway", "gateway"]


def test_a_model_is_listed_only_where_a_channel_of_its_kind_serves_it():
    built = catalog([{"name": "m", "protocol": "messages", "models": ["*"]}])
    names = [i.id for i in available(principal(), built)]
    assert "m-small" in names
    assert "m-embed" not in names  # embeddings need a chat or content channel
    assert "iota-image-1" not in names  # images go through chat channels
    assert describe("m-unpriced", built) is None


def test_a_forbidden_or_unknown_model_is_a_404_and_an_allowed_one_is_found():
    built = catalog([{"name": "c", "protocol": "chat", "models": ["*"]}])
    assert find(principal(("m-small",)), built, "m-small").family == "gateway"
    for model in ("m-large", "no-such-model"):
        with pytest.raises(NotFound) as caught:
            find(principal(("m-small",)), built, model)
        assert caught.value.param == "model"


def test_the_anthropic_list_pages_by_id():
    built = catalog([{"name": "c", "protocol": "chat", "models": ["*"]}])
    infos = available(principal(), built)
    first = messages_list(infos, {"limit": "2"})
    assert first["has_more"] is True and len(first["data"]) == 2
    assert first["data"][0] == {"id": infos[0].id, "type": "model", "display_name": infos[0].id,
                                "created_at": "2023-11-14T22:13:20Z", "owned_by": infos[0].family,
                                "kind": infos[0].kind}
    second = messages_list(infos, {"limit": "2", "after_id": first["last_id"]})
    assert second["data"][0]["id"] == infos[2].id and second["first_id"] == infos[2].id
    back = messages_list(infos, {"limit": "1", "before_id": second["first_id"]})
    assert back["data"][0]["id"] == infos[1].id
    whole = messages_list(infos, {"limit": "1000"})
    assert whole["has_more"] is False and len(whole["data"]) == len(infos)
    with pytest.raises(InvalidRequest):
        messages_list(infos, {"limit": "0"})
    with pytest.raises(InvalidRequest):
        messages_list(infos, {"after_id": "nope"})


def test_the_google_list_pages_by_token_and_names_models_with_their_prefix():
    built = catalog([{"name": "c", "protocol": "chat", "models": ["*"]}])
    infos = available(principal(), built)
    first = content_list(infos, {"pageSize": "3"})
    assert [m["name"] for m in first["models"]] == [f"models/{i.id}" for i in infos[:3]]
    second = content_list(infos, {"pageSize": "3", "pageToken": first["nextPageToken"]})
    assert second["models"][0]["name"] == f"models/{infos[3].id}"
    assert "nextPageToken" not in content_list(infos, {"pageSize": "1000"})


def test_the_shape_follows_the_sdk_that_asks():
    assert dialect_of("/v1/models", {"anthropic-version": "2023-06-01"}) is Dialect.MESSAGES
    assert dialect_of("/v1/models", {"Authorization": "Bearer x"}) is Dialect.CHAT
    assert dialect_of("/v1beta/models", {}) is Dialect.CONTENT
    assert chat_list([])["object"] == "list"
