"""Groups that price and route, through the API: an operator prices groups (PUT /api/option/
GroupRatio) and moves a user (PUT /api/user/); the user's next request, made with the openai SDK
against the text function over real HTTP, is held and settled at its group's ratio, written into
the log with the price before it; a channel limited to other groups is never tried for it, nor
listed in its model list; a key may carry a group its user may use."""

from __future__ import annotations

import json
from collections.abc import Iterator

import openai
import pytest

from gateway import auth, options
from gateway.admission import balances
from tests.channel_health_support import FakeUpstreams
from tests.conftest import api_event, use_environment
from tests.integration.money_support import assert_nothing_held

OPERATOR = {"Authorization": "Bearer demo-access-token", "X-Api-User": "1"}
# Prices whose every hold and charge is an even number of units, so that half is exact:
# 1000 units per input token, 2000 per output token (the fake upstream reports 5 in, 3 out).
PRICES = "prices:\n  m-small: {input_per_million: 2000, output_per_million: 4000}\n" \
         "  m-large: {input_per_million: 2000, output_per_million: 4000}\n"
FULL_PRICE = 5 * 1000 + 3 * 2000
QUOTA = 250_000_000  # 500 USD: a hold at these prices is about 16 USD


@pytest.fixture
def upstreams(fakes, store, tmp_path) -> Iterator[FakeUpstreams]:
    """`vip` (preferred, for the vip group only, serving m-small and m-large) and `open` (any group, m-small)."""
    upstreams, url = fakes
    upstreams.attempts.clear()
    path = tmp_path / "channels.yaml"
    path.write_text(
        "channels:\n"
        f"  - {{name: vip, protocol: chat, base_url: '{url}/vip', api_key: sk-v, models: [m-small, m-large],"
        " priority: 1, groups: [vip]}\n"
        f"  - {{name: open, protocol: chat, base_url: '{url}/open', api_key: sk-o, models: [m-small]}}\n" + PRICES)
    saved = use_environment(GATEWAY_CHANNELS_FILE=str(path), GATEWAY_SIMULATOR_URL=None,
                            GATEWAY_CHANNELS_PARAMETER=None)
    options.forget()
    yield upstreams
    use_environment(**saved)
    options.forget()


def call(fn, ctx, method: str, path: str, *, headers=None, body=None, query=None) -> tuple[int, dict]:
    event = api_event(method, path, resource=path, headers=headers, query=query,
                      body=None if body is None else json.dumps(body))
    answer = fn.lambda_handler(event, ctx)
    return answer["statusCode"], json.loads(answer["body"])


@pytest.fixture
def ann(demo, accounts):
    """A user of the default group with 500 USD, an access token and a key."""
    user = accounts.users.create_user(username="ann", quota=QUOTA, access_token="ann-access-token")
    key, _ = accounts.keys.create_key(int(user["id"]), name="main")
    return {"id": int(user["id"]), "key": key,
            "headers": {"Authorization": "Bearer ann-access-token", "X-Api-User": str(user["id"])}}


def set_ratios(commerce_fn, ctx, ratios: dict[str, float]) -> None:
    status, body = call(commerce_fn, ctx, "PUT", "/api/option", headers=OPERATOR,
                        body={"key": "GroupRatio", "value": json.dumps(ratios)})
    assert status == 200, body


def move(account_fn, ctx, user_id: int, **fields) -> tuple[int, dict]:
    return call(account_fn, ctx, "PUT", "/api/user", headers=OPERATOR, body={"id": user_id, **fields})


def chat(gateway_url: str, key: str, model: str = "m-small") -> str:
    with openai.OpenAI(base_url=f"{gateway_url}/v1", api_key=key, max_retries=0) as client:
        return client.chat.completions.create(model=model, messages=[{"role": "user", "content": "hi"}]) \
            .choices[0].message.content


def newest_entry(accounts, user_id: int) -> dict:
    return max(accounts.usage.ledger(user_id), key=lambda e: (int(e["at"]), e["sk"]))


def test_a_user_moved_to_a_half_price_group_pays_exactly_half_hold_and_settlement(
        upstreams, gateway_url, account_fn, commerce_fn, lambda_context, accounts, ann):
    # Given groups priced 1 (default) and 0.5 (half), and ann in default
    set_ratios(commerce_fn, lambda_context, {"default": 1, "half": 0.5, "vip": 1})
    assert chat(gateway_url, ann["key"]) == "served by open"
    before = newest_entry(accounts, ann["id"])
    assert int(before["units"]) == FULL_PRICE and before["group"] == "default"
    # When the operator moves her to the half group and she asks the same again
    status, moved = move(account_fn, lambda_context, ann["id"], group="half")
    assert status == 200 and moved["data"]["group"] == "half"
    auth.clear_cache()  # the key cache's seconds have passed (0 in the tests: nothing cached anyway)
    assert chat(gateway_url, ann["key"]) == "served by open"
    # Then the hold and the settlement are exactly half, with the ratio and the base price in the entry
    after = newest_entry(accounts, ann["id"])
    assert int(after["units"]) * 2 == int(before["units"]) == FULL_PRICE
    assert int(after["reserved_units"]) * 2 == int(before["reserved_units"])
    assert (after["group"], after["group_ratio"], int(after["base_units"])) == ("half", "0.5", FULL_PRICE)
    assert int(after["reserved_base_units"]) == int(before["reserved_units"])
    # And the quota paid exactly that, with nothing left held
    assert_nothing_held(accounts, QUOTA - FULL_PRICE - FULL_PRICE // 2, user_id=ann["id"])
    # And the request log shows it to her
    status, log = call(account_fn, lambda_context, "GET", "/api/log/self", headers=ann["headers"])
    assert status == 200
    newest, older = log["data"]["items"][:2]
    assert (newest["quota"], newest["base_quota"], newest["group"], newest["group_ratio"]) == \
        (FULL_PRICE // 2, FULL_PRICE, "half", 0.5)
    assert newest["held_quota"] * 2 == newest["held_base_quota"] == older["held_quota"]
    assert (older["quota"], older["group_ratio"]) == (FULL_PRICE, 1.0)


def test_a_channel_of_another_group_is_never_tried_nor_listed(upstreams, gateway_url, account_fn, commerce_fn,
                                                             lambda_context, accounts, ann):
    # Given the preferred channel serves the vip group only, and ann is in default
    with openai.OpenAI(base_url=f"{gateway_url}/v1", api_key=ann["key"], max_retries=0) as client:
        # Then her model list has only what her group's channels serve
        assert [m.id for m in client.models.list().data] == ["m-small"]
        # And a model only the vip channel serves does not exist for her
        with pytest.raises(openai.NotFoundError):
            client.chat.completions.create(model="m-large", messages=[{"role": "user", "content": "hi"}])
    # And her requests go to the open channel, the vip one never tried
    assert [chat(gateway_url, ann["key"]) for _ in range(4)] == ["served by open"] * 4
    assert upstreams.attempts["vip"] == 0 and upstreams.attempts["open"] == 4
    # When the operator moves her to vip
    assert move(account_fn, lambda_context, ann["id"], group="vip")[0] == 200
    # Then she sees and reaches the vip channel first
    with openai.OpenAI(base_url=f"{gateway_url}/v1", api_key=ann["key"], max_retries=0) as client:
        assert [m.id for m in client.models.list().data] == ["m-large", "m-small"]
    assert chat(gateway_url, ann["key"], "m-large") == "served by vip"
    assert chat(gateway_url, ann["key"]) == "served by vip"


def test_failover_stays_inside_the_group(upstreams, gateway_url, accounts, ann):
    # Given the only channel of ann's group fails
    upstreams.answer("open", 503)
    try:
        # When she asks, the vip channel (which would answer) is not a failover for her
        with pytest.raises(openai.APIStatusError):
            chat(gateway_url, ann["key"])
    finally:
        upstreams.answer("open")
    assert upstreams.attempts["vip"] == 0
    assert_nothing_held(accounts, QUOTA, user_id=ann["id"])


def test_a_group_without_a_ratio_is_a_400_and_only_operators_move_users(account_fn, commerce_fn, lambda_context,
                                                                      accounts, ann, upstreams):
    status, body = move(account_fn, lambda_context, ann["id"], group="gold")
    assert status == 400 and "group" in body["message"] and "GroupRatio" in body["message"]
    status, _ = call(account_fn, lambda_context, "PUT", "/api/user", headers=ann["headers"],
                     body={"id": ann["id"], "group": "vip"})
    assert status == 403
    status, _ = move(account_fn, lambda_context, 999, group="vip")
    assert status == 404
    status, body = move(account_fn, lambda_context, ann["id"], group="vip", quota=5)
    assert status == 400 and "quota" in body["message"]
    assert balances.get_user(ann["id"])["group"] == "default"


@pytest.mark.parametrize(("value", "words"), [
    ("[1]", "JSON object"), ('{"default": 0}', "more than 0"), ('{"default": -1}', "more than 0"),
    ('{"default": "1"}', "must be a number"), ('{"default": true}', "must be a number"),
    ('{"a b": 1}', "no spaces"), ("{}", "non-empty"), ('{"default": 1e400}', "must be a number"),
    ("not json", "JSON object"),
])
def test_a_bad_group_ratio_is_a_400_naming_the_rule(commerce_fn, lambda_context, demo, value, words):
    status, body = call(commerce_fn, lambda_context, "PUT", "/api/option", headers=OPERATOR,
                        body={"key": "GroupRatio", "value": value})
    assert status == 400 and "GroupRatio" in body["message"] and words in body["message"], body
    options.forget()
    assert options.current("GroupRatio") == {"default": 1, "vip": 1, "svip": 1}


def test_a_key_may_carry_a_group_its_user_may_use(upstreams, gateway_url, account_fn, commerce_fn, lambda_context,
                                                 accounts, ann):
    set_ratios(commerce_fn, lambda_context, {"default": 1, "vip": 0.5})
    # Given ann (default) may use only her own group
    status, groups = call(account_fn, lambda_context, "GET", "/api/user/self/groups", headers=ann["headers"])
    assert status == 200 and groups["data"] == {"default": {"ratio": 1.0, "desc": "your group"}}
    status, body = call(account_fn, lambda_context, "POST", "/api/token", headers=ann["headers"],
                        body={"name": "vip key", "group": "vip"})
    assert status == 400 and body["success"] is False and "group" in body["message"]
    # When the operator lets her choose her keys' groups
    assert move(account_fn, lambda_context, ann["id"], can_use_self_group=True)[0] == 200
    _, groups = call(account_fn, lambda_context, "GET", "/api/user/self/groups", headers=ann["headers"])
    assert groups["data"]["vip"] == {"ratio": 0.5, "desc": "vip"}
    status, created = call(account_fn, lambda_context, "POST", "/api/token", headers=ann["headers"],
                           body={"name": "vip key", "group": "vip"})
    assert status == 200 and created["data"]["group"] == "vip"
    vip_key = created["data"]["key"]
    # Then that key reaches the vip channel at the vip price, her other key stays default
    assert chat(gateway_url, vip_key) == "served by vip"
    assert int(newest_entry(accounts, ann["id"])["units"]) == FULL_PRICE // 2
    assert chat(gateway_url, ann["key"]) == "served by open"
    # And once the operator takes the choice back, the vip key is refused, naming why
    assert move(account_fn, lambda_context, ann["id"], can_use_self_group=False)[0] == 200
    with pytest.raises(openai.PermissionDeniedError) as refused:
        chat(gateway_url, vip_key)
    assert "group" in str(refused.value)
