"""Per-model prices an operator edits without a redeploy: the site option `ModelPrice` (new-api's
key; our price fields), set with `PUT /api/option/` as the console does, over the channels
document's `prices:` and the shipped table. Through the API: the next request of a user (the
openai SDK against the text function over real HTTP) is held and settled at the option's price
times its group's ratio, exact in the log; `/api/pricing` shows it; removing the entry goes back
to the document's price; a model only the option prices can be served; a bad value is a 400
naming the model and the field, and changes nothing; only operators set it; a change between a
request's hold and its settlement never reaches that request, nor a task's."""

from __future__ import annotations

import json
from collections.abc import Iterator
from decimal import Decimal

import openai
import pytest

from gateway import auth, options
from gateway.admission import billing
from gateway.prices import SHIPPED, Price
from gateway.store.tasks import Task
from gateway.tasks import engine
from tests.channel_health_support import FakeUpstreams
from tests.conftest import api_event, use_environment
from tests.integration.money_support import assert_nothing_held, put_in_group

OPERATOR = {"Authorization": "Bearer demo-access-token", "X-Api-User": "1"}
# The document's price of m-small: 1000 units per input token, 2000 per output token; the fake
# upstream reports 5 tokens in and 3 out.
DOCUMENT = "prices:\n  m-small: {input_per_million: 2000, output_per_million: 4000}\n"
DOCUMENT_PRICE = 5 * 1000 + 3 * 2000
QUOTA = 250_000_000


@pytest.fixture
def upstreams(fakes, store, tmp_path) -> Iterator[FakeUpstreams]:
    """One chat channel serving m-small (priced by the document) and m-new (priced nowhere)."""
    upstreams, url = fakes
    upstreams.attempts.clear()
    path = tmp_path / "channels.yaml"
    path.write_text("channels:\n"
                    f"  - {{name: open, protocol: chat, base_url: '{url}/open', api_key: sk-o,"
                    " models: [m-small, m-new]}\n" + DOCUMENT)
    saved = use_environment(GATEWAY_CHANNELS_FILE=str(path), GATEWAY_SIMULATOR_URL=None,
                            GATEWAY_CHANNELS_PARAMETER=None)
    options.forget()
    yield upstreams
    use_environment(**saved)
    options.forget()


def call(fn, ctx, method: str, path: str, *, headers=None, body=None) -> tuple[int, dict]:
    event = api_event(method, path, resource=path, headers=headers, body=None if body is None else json.dumps(body))
    answer = fn.lambda_handler(event, ctx)
    return answer["statusCode"], json.loads(answer["body"])


def set_prices(commerce_fn, ctx, prices: dict, headers=OPERATOR) -> tuple[int, dict]:
    """The console's save: the whole option as JSON text."""
    return call(commerce_fn, ctx, "PUT", "/api/option", headers=headers,
                body={"key": "ModelPrice", "value": json.dumps(prices)})


@pytest.fixture
def ann(demo, accounts):
    user = accounts.users.create_user(username="ann", quota=QUOTA, access_token="ann-access-token")
    key, _ = accounts.keys.create_key(int(user["id"]), name="main")
    return {"id": int(user["id"]), "key": key,
            "headers": {"Authorization": "Bearer ann-access-token", "X-Api-User": str(user["id"])}}


def chat(gateway_url: str, key: str, model: str = "m-small") -> str:
    with openai.OpenAI(base_url=f"{gateway_url}/v1", api_key=key, max_retries=0) as client:
        return client.chat.completions.create(model=model, messages=[{"role": "user", "content": "hi"}]) \
            .choices[0].message.content


def newest_entry(accounts, user_id: int) -> dict:
    return max(accounts.usage.ledger(user_id), key=lambda e: (int(e["at"]), e["sk"]))


def test_an_operators_price_is_held_settled_and_shown_after_the_group_ratio_and_reset_goes_back(
        upstreams, gateway_url, account_fn, commerce_fn, lambda_context, accounts, ann):
    # Given ann in a group priced 0.5, paying the document's price of m-small
    put_in_group(accounts, ann["id"], "half", {"default": 1, "half": 0.5})
    auth.clear_cache()
    assert chat(gateway_url, ann["key"]) == "served by open"
    before = newest_entry(accounts, ann["id"])
    assert (int(before["base_units"]), int(before["units"])) == (DOCUMENT_PRICE, DOCUMENT_PRICE // 2)
    # When the operator doubles m-small's prices in the option (decimal text, as the console sends)
    status, body = set_prices(commerce_fn, lambda_context,
                              {"m-small": {"input_per_million": "4000", "output_per_million": "8000"}})
    assert status == 200, body
    # Then her next request is held and settled at the new price times her ratio, exactly
    assert chat(gateway_url, ann["key"]) == "served by open"
    after = newest_entry(accounts, ann["id"])
    assert (int(after["base_units"]), int(after["units"])) == (2 * DOCUMENT_PRICE, DOCUMENT_PRICE)
    assert int(after["reserved_base_units"]) == 2 * int(before["reserved_base_units"])
    assert int(after["reserved_units"]) == int(before["reserved_base_units"])  # the hold: x2, then x0.5
    assert_nothing_held(accounts, QUOTA - DOCUMENT_PRICE // 2 - DOCUMENT_PRICE, user_id=ann["id"])
    # And the request log shows it to her
    status, log = call(account_fn, lambda_context, "GET", "/api/log/self", headers=ann["headers"])
    newest = log["data"]["items"][0]
    assert (newest["quota"], newest["base_quota"], newest["group_ratio"]) == (DOCUMENT_PRICE, 2 * DOCUMENT_PRICE, 0.5)
    # And her pricing page shows the option's price after her ratio
    status, page = call(account_fn, lambda_context, "GET", "/api/pricing", headers=ann["headers"])
    small = {row["model_name"]: row for row in page["data"]}["m-small"]
    assert (small["input_per_million"], small["output_per_million"]) == (2000.0, 4000.0)
    # And the operator's view says where each price comes from, and the default to go back to
    status, view = call(account_fn, lambda_context, "GET", "/api/admin/prices", headers=OPERATOR)
    rows = {row["model_name"]: row for row in view["data"]}
    assert rows["m-small"]["source"] == "option"
    assert rows["m-small"]["price"] == {"input_per_million": "4000", "output_per_million": "8000"}
    assert rows["m-small"]["default"] == {"input_per_million": "2000", "output_per_million": "4000"}
    assert rows["m-large"]["source"] == "shipped" and rows["m-large"]["served"] is False
    assert rows["m-new"] == {"model_name": "m-new", "kind": None, "source": None, "price": None, "default": None,
                             "served": True}
    # When the operator removes the entry (the console's Reset to default)
    assert set_prices(commerce_fn, lambda_context, {})[0] == 200
    # Then the document's price is back
    assert chat(gateway_url, ann["key"]) == "served by open"
    assert int(newest_entry(accounts, ann["id"])["base_units"]) == DOCUMENT_PRICE


def test_a_model_only_the_option_prices_is_served_and_refused_again_once_removed(
        upstreams, gateway_url, account_fn, commerce_fn, lambda_context, accounts, ann):
    # Given a channel serves m-new, which nothing prices: it is refused, never served free
    with pytest.raises(openai.BadRequestError, match="model_not_priced|no price"):
        chat(gateway_url, ann["key"], "m-new")
    assert upstreams.attempts["open"] == 0
    # When the operator prices it in the option
    status, _ = set_prices(commerce_fn, lambda_context,
                           {"m-new": {"input_per_million": "1000", "output_per_million": "3000.5"}})
    assert status == 200
    # Then it is listed, served and billed at that price
    with openai.OpenAI(base_url=f"{gateway_url}/v1", api_key=ann["key"], max_retries=0) as client:
        assert "m-new" in [m.id for m in client.models.list().data]
    assert chat(gateway_url, ann["key"], "m-new") == "served by open"
    # 5 x 1000 + 3 x 3000.5 USD per million = 0.0140015 USD = 7000.75 units, rounded up once
    assert int(newest_entry(accounts, ann["id"])["units"]) == 7001
    status, page = call(account_fn, lambda_context, "GET", "/api/pricing", headers=ann["headers"])
    assert {row["model_name"]: row for row in page["data"]}["m-new"]["output_per_million"] == 3000.5
    # When the entry is removed, it is refused again
    assert set_prices(commerce_fn, lambda_context, {})[0] == 200
    with pytest.raises(openai.BadRequestError):
        chat(gateway_url, ann["key"], "m-new")


@pytest.mark.parametrize(("value", "words"), [
    ({"m-small": {"input_per_million": "-1"}}, "m-small.input_per_million: must be at least 0"),
    ({"m-small": {"input_per_million": "cheap"}}, "m-small.input_per_million: must be a number"),
    ({"m-small": {"output_per_million": True}}, "m-small.output_per_million: must be a number"),
    ({"m-small": {"output_per_million": None}}, "m-small.output_per_million: must be a number"),
    ({"m-small": {"input_per_million": "NaN"}}, "m-small.input_per_million: must be a number"),
    ({"m-small": {"input_per_million": "1e7"}}, "at most 1000000"),
    ({"m-small": {"per_call": "0.0000000000001"}}, "m-small.per_call: must have at most 12 decimal places"),
    ({"m-small": {"input_per_milion": "1"}}, "m-small.input_per_milion: is not a price field"),
    ({"m-small": "0.5"}, "m-small: must be an object of price fields"),
    ({"m-small": {}}, "m-small: must set at least one price field"),
    ({"*": {"per_call": "1"}}, "a model name"),
    ({" m-small": {"per_call": "1"}}, "a model name"),
    ([1], "JSON object"),
])
def test_a_bad_price_is_a_400_naming_the_model_and_the_field_and_changes_nothing(
        commerce_fn, lambda_context, demo, value, words):
    assert set_prices(commerce_fn, lambda_context, {"m-large": {"per_call": "1"}})[0] == 200
    status, body = set_prices(commerce_fn, lambda_context, value)
    assert status == 400 and body["success"] is False, body
    assert "ModelPrice" in body["message"] and words in body["message"], body["message"]
    options.forget()
    assert options.current("ModelPrice") == {"m-large": Price(per_call=Decimal(1))}


def test_the_object_itself_is_taken_as_well_as_its_text(commerce_fn, lambda_context, demo):
    status, _ = call(commerce_fn, lambda_context, "PUT", "/api/option", headers=OPERATOR,
                     body={"key": "ModelPrice", "value": {"m-small": {"input_per_million": 0.25}}})
    assert status == 200
    options.forget()
    assert options.current("ModelPrice") == {"m-small": Price(input_per_million=Decimal("0.25"))}


def test_only_operators_set_prices_or_read_the_operators_view(account_fn, commerce_fn, lambda_context, ann):
    status, _ = set_prices(commerce_fn, lambda_context, {"m-small": {"input_per_million": "0"}},
                           headers=ann["headers"])
    assert status == 403
    status, _ = call(account_fn, lambda_context, "GET", "/api/admin/prices", headers=ann["headers"])
    assert status == 403
    status, _ = call(account_fn, lambda_context, "GET", "/api/admin/prices")
    assert status == 401
    options.forget()
    assert options.current("ModelPrice") == {}


def test_a_price_changed_between_a_requests_hold_and_its_settlement_never_reaches_it(
        upstreams, gateway_url, commerce_fn, lambda_context, accounts, ann, monkeypatch):
    # Given the operator changes m-small's price while ann's request is on its way (after its
    # hold, before its settlement)
    settle = billing.settle

    def operator_changes_the_price_then_settle(*args, **kwargs):
        assert set_prices(commerce_fn, lambda_context,
                          {"m-small": {"input_per_million": "8000", "output_per_million": "16000"}})[0] == 200
        return settle(*args, **kwargs)

    monkeypatch.setattr(billing, "settle", operator_changes_the_price_then_settle)
    assert chat(gateway_url, ann["key"]) == "served by open"
    monkeypatch.setattr(billing, "settle", settle)
    # Then it settles at the price it was held at
    entry = newest_entry(accounts, ann["id"])
    assert int(entry["units"]) == DOCUMENT_PRICE
    # And the next request pays the new price
    assert chat(gateway_url, ann["key"]) == "served by open"
    assert int(newest_entry(accounts, ann["id"])["units"]) == 4 * DOCUMENT_PRICE


def test_a_task_settles_at_the_price_it_was_held_at(upstreams, commerce_fn, lambda_context, demo):
    # Given a task held at 0.20 USD a second (the option's price then) for 2 videos of 8 s, 1 of them delivered
    held = Price(per_second=Decimal("0.2"))
    task = Task(task_id="task_1", owner_id="1", family="delta", model="delta-3.0-generate-001", channel="c",
                upstream_task_id="u", created_at=0, updated_at=0, result_urls=["a"],
                quantities={"seconds": 16, "samples": 2}, reservation={"units": 1_600_000}, price=held.fields())
    # When the operator raises the model's price meanwhile (4 USD a second)
    assert set_prices(commerce_fn, lambda_context, {"delta-3.0-generate-001": {"per_second": "4"}})[0] == 200
    # Then its settlement prices what was delivered at the held price: 8 s x 0.20 USD
    assert engine.settled_units(task) == 800_000
    # While a task stored before tasks kept their price is priced as it was held then: without
    # the option (the shipped 0.40 USD a second: 8 s of a 3.20 USD hold)
    assert SHIPPED["delta-3.0-generate-001"].per_second == Decimal("0.40")
    assert engine.settled_units(task.replace(price=None, reservation={"units": 3_200_000})) == 1_600_000
