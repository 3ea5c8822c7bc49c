"""The images routes: the real streaming function (its ASGI app served by uvicorn, as the Lambda
Web Adapter runs it), the emulator, upstreams over HTTP on 127.0.0.1.

The images simulator is mounted at /chat as the chat-protocol simulator mounts it, so that
`GATEWAY_SIMULATOR_URL=<server>` routes every model to it. Beside it, small stand-in upstreams
that always fail, always refuse, or answer fewer images than asked, for the channel documents
of the failover tests.
"""

from __future__ import annotations

import asyncio
import base64
import json
import socket

import httpx
import pytest

from gateway.admission import balances
from gateway.api import images as images_api
from gateway.multipart import MAX_REQUEST_BYTES
from gateway_local.invoke import _invoke_asgi
from tests.conftest import EVENTS, use_environment
from tests.imagefiles import BMP, JPEG, PNG, TIFF_LE, WEBP, decode_png, multipart
from tests.integration.images_support import hits
from tests.integration.money_support import put_in_group

UNITS_PER_IMAGE = {"iota-image-1": 20_000, "iota-image-1-mini": 5_500, "theta-3": 20_000, "eta-image-edit": 15_000}
@pytest.fixture
def channels_document(simulated, tmp_path):
    """Installs a channels document (a list of channels, highest priority first)."""
    def install(*specs: dict) -> None:
        document = {"channels": [{"protocol": "chat", "api_key": "sk-upstream", "priority": len(specs) - i, **spec}
                                 for i, spec in enumerate(specs)]}
        path = tmp_path / "channels.json"
        path.write_text(json.dumps(document))
        use_environment(GATEWAY_CHANNELS_FILE=str(path))
    return install


@pytest.fixture
def closed_port() -> int:
    """A port on 127.0.0.1 that nothing listens on: a connection there is refused at once."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()
    return port


def auth(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


def generate(url, body, key):
    payload = body if isinstance(body, str) else json.dumps(body)
    answer = httpx.post(f"{url}/v1/images/generations", content=payload, timeout=60,
                        headers={**auth(key), "Content-Type": "application/json"})
    return answer.status_code, answer.json(), answer


def edit_raw(url, body: bytes, content_type: str, key):
    answer = httpx.post(f"{url}/v1/images/edits", content=body, timeout=60,
                        headers={**auth(key), "Content-Type": content_type})
    return answer.status_code, answer.json()


def edit(url, fields, key, image=("photo.png", PNG, "image/png"), files=None):
    files = files if files is not None else {"image": image}
    if files:
        body, content_type = multipart(fields, files)
    else:  # httpx sends a form without files urlencoded; this one must still be multipart
        body = _form([f'Content-Disposition: form-data; name="{k}"\r\n\r\n{v}'.encode() for k, v in fields.items()])
        content_type = "multipart/form-data; boundary=b0undary"
    return edit_raw(url, body, content_type, key)


def balance(accounts, user_id=1):
    user = balances.get_user(user_id)
    ledger = [(e["model"], e["units"], e["reserved_units"], e["outcome"]) for e in accounts.usage.ledger(user_id)]
    return user["quota"], user["used_quota"], user["request_count"], ledger


def assert_chat_error(body, status_type=None):
    assert set(body) == {"error"} and set(body["error"]) == {"message", "type", "param", "code"}
    if status_type:
        assert body["error"]["type"] == status_type


def pictures(body) -> list[bytes]:
    return [base64.b64decode(item["b64_json"]) for item in body["data"]]


# --- rules: every bad value is a 400 naming the field, and nothing is charged --------------------

LONG = "x" * 32001
GENERATION_RULES = [
    ({"prompt": "a fox"}, "model"),
    ({"model": "nope-1", "prompt": "a fox"}, "model"),
    ({"model": 5, "prompt": "a fox"}, "model"),
    ({"model": ["iota-image-1"], "prompt": "a fox"}, "model"),
    ({"model": "eta-image-edit", "prompt": "a fox"}, "model"),
    ({"model": "iota-image-1"}, "prompt"),
    ({"model": "iota-image-1", "prompt": 3}, "prompt"),
    ({"model": "iota-image-1", "prompt": "   "}, "prompt"),
    ({"model": "iota-image-1", "prompt": LONG}, "prompt"),
    ({"model": "iota-image-1", "prompt": "a fox", "n": 0}, "n"),
    ({"model": "iota-image-1", "prompt": "a fox", "n": 11}, "n"),
    ({"model": "iota-image-1", "prompt": "a fox", "n": "2"}, "n"),
    ({"model": "iota-image-1", "prompt": "a fox", "n": True}, "n"),
    ({"model": "iota-image-1", "prompt": "a fox", "n": 1.5}, "n"),
    ({"model": "iota-image-1", "prompt": "a fox", "quality": "ultra"}, "quality"),
    ({"model": "iota-image-1", "prompt": "a fox", "size": "512x512"}, "size"),
    ({"model": "iota-image-1", "prompt": "a fox", "output_format": "gif"}, "output_format"),
    ({"model": "iota-image-1", "prompt": "a fox", "output_format": "jpeg", "background": "transparent"},
     "background"),
    ({"model": "iota-image-1", "prompt": "a fox", "output_compression": 101}, "output_compression"),
    ({"model": "iota-image-1", "prompt": "a fox", "moderation": "strict"}, "moderation"),
    ({"model": "iota-image-1", "prompt": "a fox", "response_format": "url"}, "response_format"),
    ({"model": "iota-image-1", "prompt": "a fox", "colour": "red"}, "colour"),
    ({"model": "theta-3", "prompt": "x" * 4001}, "prompt"),
    ({"model": "theta-3", "prompt": "a fox", "n": 2}, "n"),
    ({"model": "theta-3", "prompt": "a fox", "n": "1"}, "n"),
    ({"model": "theta-3", "prompt": "a fox", "response_format": "png"}, "response_format"),
    ({"model": "theta-3", "prompt": "a fox", "size": "1024x1536"}, "size"),
    ({"model": "theta-3", "prompt": "a fox", "quality": "high"}, "quality"),
    ({"model": "theta-3", "prompt": "a fox", "style": "pretty"}, "style"),
    ({"model": "theta-3", "prompt": "a fox", "user": 7}, "user"),
]


@pytest.mark.parametrize("body,field", GENERATION_RULES, ids=[f"{f}-{i}" for i, (_, f) in enumerate(GENERATION_RULES)])
def test_a_generation_breaking_a_rule_is_a_400_naming_the_field_and_costs_nothing(
        images, simulated, demo, accounts, body, field):
    before = balance(accounts)
    status, answer, _ = generate(images, body, demo["key"])
    assert status == 400
    assert_chat_error(answer, "invalid_request_error")
    assert answer["error"]["message"].startswith(f"{field}: ") and answer["error"]["param"] == field
    assert balance(accounts) == before and before[3] == []


@pytest.mark.parametrize("body,needle", [
    ("not json", "not valid JSON"), ("", "required"), ('["iota-image-1"]', "JSON object"), ("null", "JSON object"),
])
def test_a_generation_body_that_is_not_a_json_object_is_a_400(images, simulated, demo, accounts, body, needle):
    before = balance(accounts)
    status, answer, _ = generate(images, body, demo["key"])
    assert status == 400 and needle in answer["error"]["message"]
    assert balance(accounts) == before


GOOD_EDIT = {"model": "eta-image-edit", "prompt": "add a hat"}
EDIT_RULES = [
    ({"prompt": "add a hat"}, None, "model"),
    ({**GOOD_EDIT, "model": "theta-3"}, None, "model"),
    ({**GOOD_EDIT, "prompt": ""}, None, "prompt"),
    ({"model": "eta-image-edit"}, None, "prompt"),
    ({**GOOD_EDIT, "prompt": "x" * 801}, None, "prompt"),
    ({**GOOD_EDIT, "n": "0"}, None, "n"),
    ({**GOOD_EDIT, "n": "5"}, None, "n"),
    ({**GOOD_EDIT, "n": "2.5"}, None, "n"),
    ({**GOOD_EDIT, "n": "two"}, None, "n"),
    ({**GOOD_EDIT, "response_format": "png"}, None, "response_format"),
    ({**GOOD_EDIT, "seed": "-1"}, None, "seed"),
    ({**GOOD_EDIT, "seed": "2147483648"}, None, "seed"),
    ({**GOOD_EDIT, "seed": "lucky"}, None, "seed"),
    ({**GOOD_EDIT, "mask": "yes"}, None, "mask"),
    (GOOD_EDIT, {}, "image"),
    (GOOD_EDIT, {"image": ("notes.png", b"just some text, not a picture", "image/png")}, "image"),
    (GOOD_EDIT, {"image": ("empty.png", b"", "image/png")}, "image"),
    (GOOD_EDIT, {"image": ("a.gif", b"GIF89a" + b"\x00" * 20, "image/gif")}, "image"),
    (GOOD_EDIT, {"image[]": ("a.png", PNG, "image/png")}, "image"),
    (GOOD_EDIT, {"image": ("a.png", PNG, "image/png"), "prompt": ("p.txt", b"hat", "text/plain")}, "prompt"),
    ({**GOOD_EDIT, "image": "https://example.com/a.png"}, {}, "image"),
]


@pytest.mark.parametrize("fields,files,field", EDIT_RULES, ids=[f"{f}-{i}" for i, (_, _, f) in enumerate(EDIT_RULES)])
def test_an_edit_breaking_a_rule_is_a_400_naming_the_field_and_costs_nothing(
        images, simulated, demo, accounts, fields, files, field):
    before = balance(accounts)
    status, answer = edit(images, fields, demo["key"], files=files)
    assert status == 400
    assert_chat_error(answer, "invalid_request_error")
    assert answer["error"]["message"].startswith(f"{field}: ") and answer["error"]["param"] == field
    assert balance(accounts) == before and before[3] == []


def _form(parts: list[bytes], boundary: bytes = b"b0undary") -> bytes:
    return b"".join(b"--" + boundary + b"\r\n" + part + b"\r\n" for part in parts) + b"--" + boundary + b"--\r\n"


PROMPT_PART = b'Content-Disposition: form-data; name="prompt"\r\n\r\nadd a hat'
MODEL_PART = b'Content-Disposition: form-data; name="model"\r\n\r\neta-image-edit'
IMAGE_PART = b'Content-Disposition: form-data; name="image"; filename="a.png"\r\nContent-Type: image/png\r\n\r\n' + PNG


@pytest.mark.parametrize("body,content_type,needle", [
    (_form([MODEL_PART, PROMPT_PART, IMAGE_PART]), "application/json", "Content-Type: must be multipart/form-data"),
    (_form([MODEL_PART, PROMPT_PART, IMAGE_PART]), "multipart/form-data", "needs a boundary"),
    (_form([MODEL_PART, PROMPT_PART, IMAGE_PART])[:-14], "multipart/form-data; boundary=b0undary",
     "closing boundary delimiter is missing"),
    (b"model=eta-image-edit", "multipart/form-data; boundary=b0undary", "opening boundary delimiter is missing"),
    (_form([b'Content-Type: text/plain\r\n\r\nhat', IMAGE_PART]), "multipart/form-data; boundary=b0undary",
     "no Content-Disposition"),
    (_form([MODEL_PART, PROMPT_PART, PROMPT_PART, IMAGE_PART]), "multipart/form-data; boundary=b0undary",
     "prompt: is sent more than once"),
])
def test_a_malformed_multipart_body_is_a_400_that_says_what_is_wrong(images, simulated, demo, accounts,
                                                                     body, content_type, needle):
    before = balance(accounts)
    status, answer = edit_raw(images, body, content_type, demo["key"])
    assert status == 400 and needle in answer["error"]["message"]
    assert_chat_error(answer, "invalid_request_error")
    assert balance(accounts) == before


def test_an_upload_over_the_lambda_limit_is_a_413_that_states_the_limit(images, simulated, demo, accounts):
    # Given an edit whose image makes the body just over what a Lambda event can carry
    big = PNG + b"\x00" * (MAX_REQUEST_BYTES - len(PNG))
    before = balance(accounts)
    status, answer = edit(images, GOOD_EDIT, demo["key"], image=("big.png", big, "image/png"))
    # Then it is a 413 in the chat envelope naming the limit, and nothing is charged
    assert status == 413
    assert_chat_error(answer, "invalid_request_error")
    assert answer["error"]["code"] == "request_too_large"
    assert f"at most {MAX_REQUEST_BYTES} bytes" in answer["error"]["message"]
    assert balance(accounts) == before


# --- success: decodable images, and the quota and ledger move by exactly price x n ---------------

def test_an_iota_generation_answers_pngs_and_usage_and_charges_price_times_n(images, simulated, demo, accounts):
    quota, used, count, _ = balance(accounts)
    status, answer, raw = generate(images, {"model": "iota-image-1", "prompt": "a red fox", "n": 3, "quality": "low"},
                                   demo["key"])
    assert status == 200 and raw.headers["content-type"] == "application/json"
    assert isinstance(answer["created"], int) and len(answer["data"]) == 3
    assert all(set(item) == {"b64_json"} for item in answer["data"])
    assert all(decode_png(p) == (64, 64) for p in pictures(answer))
    assert answer["usage"]["total_tokens"] > 0 and "text_tokens" in answer["usage"]["input_tokens_details"]
    cost = 3 * UNITS_PER_IMAGE["iota-image-1"]
    assert balance(accounts) == (quota - cost, used + cost, count + 1, [("iota-image-1", cost, cost, "settled")])


def test_an_iota_generation_with_response_format_b64_json_is_answered_without_relaying_the_field(
        images, simulated, demo, accounts):
    # The simulator refuses the field as gpt-image does (400 "Unknown parameter: 'response_format'");
    # the gateway takes b64_json (the only answer an iota model gives) and does not relay it.
    quota = balance(accounts)[0]
    status, answer, _ = generate(images, {"model": "iota-image-1", "prompt": "a fox",
                                                             "response_format": "b64_json"}, demo["key"])
    assert status == 200, answer
    assert set(answer["data"][0]) == {"b64_json"}
    assert balance(accounts)[0] == quota - UNITS_PER_IMAGE["iota-image-1"]


def test_a_mini_model_is_charged_its_own_price(images, simulated, demo, accounts):
    quota = balance(accounts)[0]
    status, _, _ = generate(images, {"model": "iota-image-1-mini", "prompt": "a fox", "n": 2},
                            demo["key"])
    assert status == 200 and balance(accounts)[0] == quota - 2 * UNITS_PER_IMAGE["iota-image-1-mini"]


def test_a_theta_generation_answers_a_url_that_serves_the_png(images, simulated, demo, accounts):
    quota = balance(accounts)[0]
    status, answer, _ = generate(images, {"model": "theta-3", "prompt": "a lighthouse"},
                                 demo["key"])
    assert status == 200 and len(answer["data"]) == 1
    item = answer["data"][0]
    assert set(item) == {"url", "revised_prompt"} and "a lighthouse" in item["revised_prompt"]
    assert item["url"].startswith(f"{simulated}/chat/files/")
    fetched = httpx.get(item["url"])
    assert fetched.status_code == 200 and fetched.headers["content-type"] == "image/png"
    assert decode_png(fetched.content) == (64, 64)
    assert balance(accounts)[0] == quota - UNITS_PER_IMAGE["theta-3"]


def test_a_theta_generation_as_b64_json(images, simulated, demo, accounts):
    status, answer, _ = generate(images, {"model": "theta-3", "prompt": "a lighthouse", "response_format": "b64_json",
                                  "n": None, "size": "1792x1024", "quality": "hd", "style": "natural"},
                                 demo["key"])
    assert status == 200 and set(answer["data"][0]) == {"b64_json", "revised_prompt"}
    assert decode_png(pictures(answer)[0]) == (64, 64)
    assert balance(accounts)[3] == [("theta-3", 20_000, 20_000, "settled")]


@pytest.mark.parametrize("name,data,content_type", [
    ("photo.png", PNG, "image/png"), ("photo.jpg", JPEG, "image/jpeg"), ("photo.bmp", BMP, "image/bmp"),
    ("photo.tiff", TIFF_LE, "image/tiff"), ("photo.webp", WEBP, "image/webp"),
    ("misnamed.txt", PNG, "text/plain"),  # recognised from its bytes, not its name or declared type
])
def test_an_edit_of_every_accepted_format_answers_pngs_and_n_multiplies_the_charge(
        images, simulated, demo, accounts, name, data, content_type):
    quota, used, count, _ = balance(accounts)
    status, answer = edit(images, {**GOOD_EDIT, "n": "3", "response_format": "b64_json", "seed": "7",
                           "negative_prompt": "blur"}, demo["key"], image=(name, data, content_type))
    assert status == 200 and len(answer["data"]) == 3
    assert all(decode_png(p) == (64, 64) for p in pictures(answer))
    assert answer["usage"]["input_tokens_details"]["image_tokens"] > 0
    cost = 3 * UNITS_PER_IMAGE["eta-image-edit"]
    assert balance(accounts) == (quota - cost, used + cost, count + 1, [("eta-image-edit", cost, cost, "settled")])


def test_an_edit_answers_a_url_by_default(images, simulated, demo, accounts):
    status, answer = edit(images, GOOD_EDIT, demo["key"])
    assert status == 200 and set(answer["data"][0]) == {"url"}
    assert decode_png(httpx.get(answer["data"][0]["url"]).content) == (64, 64)
    assert balance(accounts)[3] == [("eta-image-edit", 15_000, 15_000, "settled")]


def test_the_sample_events_are_served(images_fn, simulated, demo, accounts):
    # The samples of events/ carry the demo key, as `sam local invoke -e` would send them; the
    # app gets them as the Lambda Web Adapter hands an event over (`make invoke` does the same).
    for name, cost in (("images_generation.json", 2 * UNITS_PER_IMAGE["iota-image-1"]),
                       ("images_edit.json", 2 * UNITS_PER_IMAGE["eta-image-edit"])):
        quota = balance(accounts)[0]
        answer = asyncio.run(_invoke_asgi(images_fn.app, json.loads((EVENTS / name).read_text())))
        assert answer["statusCode"] == 200, answer["body"]
        body = json.loads(answer["body"])
        assert len(body["data"]) == 2 and balance(accounts)[0] == quota - cost


# --- upstream failures: a full refund, and an answer in the chat envelope ------------------------

@pytest.mark.parametrize("fault,status,kind", [(500, 502, "upstream_error"), (503, 502, "upstream_error"),
                                               (429, 429, "rate_limit_error")])
def test_an_upstream_failure_is_refunded_exactly(images, simulated, demo, accounts, fault, status, kind):
    quota, used, count, _ = balance(accounts)
    answered, answer, raw = generate(images, {"model": "iota-image-1", "prompt": f"a fox #fault={fault}", "n": 4},
                                     demo["key"])
    assert answered == status
    assert_chat_error(answer, kind)
    assert f"simulated {'rate limit' if fault == 429 else f'failure {fault}'}" in answer["error"]["message"]
    if fault == 429:
        assert raw.headers["retry-after"] == "1"
    # Then the quota is back to the unit, and the ledger shows the request refunded
    assert balance(accounts) == (quota, used, count, [("iota-image-1", 0, 80_000, "refunded")])


def test_an_edit_failure_is_refunded_exactly(images, simulated, demo, accounts):
    quota, used, count, _ = balance(accounts)
    status, answer = edit(images, {**GOOD_EDIT, "prompt": "hat #fault=500", "n": "2"}, demo["key"])
    assert status == 502
    assert_chat_error(answer, "upstream_error")
    assert balance(accounts) == (quota, used, count, [("eta-image-edit", 0, 30_000, "refunded")])


def test_an_upstream_4xx_is_relayed_with_its_message_refunded_and_not_retried(
        images, channels_document, upstream, demo, accounts):
    # Given a channel that refuses the prompt, and a working one behind it
    channels_document({"name": "strict", "base_url": f"{upstream}/refuses", "models": ["theta-3"]},
                      {"name": "spare", "base_url": f"{upstream}/counted", "models": ["theta-3"]})
    quota = balance(accounts)[0]
    status, answer, _ = generate(images, {"model": "theta-3", "prompt": "a fox"}, demo["key"])
    # Then its status and message come back, the spare is never asked, and nothing is charged
    assert status == 400 and "refused by the safety system" in answer["error"]["message"]
    assert_chat_error(answer, "invalid_request_error")
    assert (hits["refuses"], hits["chat"]) == (1, 0)
    assert balance(accounts)[0] == quota and balance(accounts)[3] == [("theta-3", 0, 20_000, "refunded")]


def test_an_upstream_refusing_the_channel_key_is_not_blamed_on_the_client_key(
        images, channels_document, upstream, demo, accounts):
    channels_document({"name": "stale", "base_url": f"{upstream}/wrong-key", "models": ["theta-3"]})
    status, answer, _ = generate(images, {"model": "theta-3", "prompt": "a fox"}, demo["key"])
    assert status == 502 and "not a problem with your key" in answer["error"]["message"]
    assert balance(accounts)[3] == [("theta-3", 0, 20_000, "refunded")]


def test_failover_skips_a_dead_and_a_failing_channel_and_bills_once(
        images, channels_document, upstream, closed_port, demo, accounts):
    # Given a channel on a closed port, then one that answers 503, then a working one
    channels_document({"name": "dead", "base_url": f"http://127.0.0.1:{closed_port}/chat", "models": ["*"]},
                      {"name": "down", "base_url": f"{upstream}/down", "models": ["iota-image-1"]},
                      {"name": "good", "base_url": f"{upstream}/counted", "models": ["iota-image-1"]})
    quota, used, count, _ = balance(accounts)
    status, answer, _ = generate(images, {"model": "iota-image-1", "prompt": "a fox", "n": 2},
                                 demo["key"])
    # Then the third answers, each was tried once, and the request is billed once
    assert status == 200 and len(pictures(answer)) == 2
    assert (hits["down"], hits["chat"]) == (1, 1)
    cost = 2 * UNITS_PER_IMAGE["iota-image-1"]
    assert balance(accounts) == (quota - cost, used + cost, count + 1, [("iota-image-1", cost, cost, "settled")])
    (entry,) = accounts.usage.ledger(1)
    usage = {k: answer["usage"][k] for k in ("input_tokens", "output_tokens")}  # the upstream's, for the log
    assert entry["detail"] == {"images": 2, "channel": "good", **usage}


def test_when_every_channel_fails_the_request_is_refunded_and_answered_502(
        images, channels_document, upstream, closed_port, demo, accounts):
    channels_document({"name": "dead", "base_url": f"http://127.0.0.1:{closed_port}", "models": ["theta-3"]},
                      {"name": "down", "base_url": f"{upstream}/down", "models": ["theta-3"]})
    quota = balance(accounts)[0]
    status, answer, _ = generate(images, {"model": "theta-3", "prompt": "a fox"}, demo["key"])
    assert status == 502
    assert_chat_error(answer, "upstream_error")
    assert "2 upstream attempts failed" in answer["error"]["message"] and "overloaded" in answer["error"]["message"]
    assert balance(accounts)[0] == quota and balance(accounts)[3] == [("theta-3", 0, 20_000, "refunded")]


def test_fewer_images_than_asked_are_charged_as_returned(images, channels_document, upstream, demo, accounts):
    channels_document({"name": "stingy", "base_url": f"{upstream}/stingy", "models": ["iota-image-1"]})
    quota, used, count, _ = balance(accounts)
    status, answer, _ = generate(images, {"model": "iota-image-1", "prompt": "a fox", "n": 4},
                                 demo["key"])
    assert status == 200 and len(answer["data"]) == 1
    # Then four images were held and one is charged
    assert balance(accounts) == (quota - 20_000, used + 20_000, count + 1,
                                 [("iota-image-1", 20_000, 80_000, "settled")])


def test_a_half_price_group_halves_the_hold_and_the_charge_of_fewer_images(images, channels_document, upstream,
                                                                         demo, accounts):
    # Given the demo user in a group priced at 0.5
    put_in_group(accounts, 1, "half", {"default": 1, "half": 0.5})
    channels_document({"name": "stingy", "base_url": f"{upstream}/stingy", "models": ["iota-image-1"]})
    quota, used, count, _ = balance(accounts)
    # When four images are asked for and one comes back
    status, answer, _ = generate(images, {"model": "iota-image-1", "prompt": "a fox", "n": 4},
                                 demo["key"])
    assert status == 200 and len(answer["data"]) == 1
    # Then half of four images was held and half of one is charged, the base prices in the entry
    assert balance(accounts) == (quota - 10_000, used + 10_000, count + 1,
                                 [("iota-image-1", 10_000, 40_000, "settled")])
    (entry,) = accounts.usage.ledger(1)
    assert (entry["group_ratio"], entry["base_units"], entry["reserved_base_units"]) == ("0.5", 20_000, 80_000)


def test_an_upstream_slower_than_the_time_budget_is_a_504_and_refunded(images, channels_document, upstream, demo,
                                                                       accounts, monkeypatch):
    # Given 1.5 s of budget for the upstream (15 minutes less the reserve, deployed), and an
    # upstream that needs 2.5 s
    monkeypatch.setattr(images_api, "TIME_BUDGET_SECONDS", 1.5)
    channels_document({"name": "slow", "base_url": f"{upstream}/slow", "models": ["theta-3"]})
    quota = balance(accounts)[0]
    status, answer, _ = generate(images, {"model": "theta-3", "prompt": "a fox"}, demo["key"])
    assert status == 504 and "timed out" in answer["error"]["message"]
    assert_chat_error(answer, "upstream_error")
    assert balance(accounts)[0] == quota and balance(accounts)[3] == [("theta-3", 0, 20_000, "refunded")]


def test_with_no_time_left_no_upstream_is_tried(images, channels_document, upstream, demo, accounts, monkeypatch):
    monkeypatch.setattr(images_api, "TIME_BUDGET_SECONDS", 0.5)
    channels_document({"name": "slow", "base_url": f"{upstream}/slow", "models": ["theta-3"]})
    status, answer, _ = generate(images, {"model": "theta-3", "prompt": "a fox"}, demo["key"])
    assert status == 504 and hits["slow"] == 0
    assert balance(accounts)[3] == [("theta-3", 0, 20_000, "refunded")]


# --- who may use what ----------------------------------------------------------------------------

def test_an_unpriced_model_is_refused_before_anything_is_held(images, simulated, demo, accounts):
    # Given the simulator would serve any model, but iota-image-9 has no price
    before = balance(accounts)
    status, answer, _ = generate(images, {"model": "iota-image-9", "prompt": "a fox"}, demo["key"])
    assert status == 400 and answer["error"]["code"] == "model_not_priced" and answer["error"]["param"] == "model"
    assert balance(accounts) == before


def test_a_model_no_channel_serves_is_404(images, channels_document, upstream, demo, accounts):
    channels_document({"name": "theta-only", "base_url": f"{upstream}/chat", "models": ["theta-3"]})
    status, answer, _ = generate(images, {"model": "iota-image-1", "prompt": "a fox"}, demo["key"])
    assert status == 404 and answer["error"]["code"] == "model_not_found"
    assert balance(accounts)[3] == []


def test_an_allowlisted_key_may_use_only_its_models(images, simulated, demo, accounts):
    # Given a key limited to theta-3 and 50000 units
    key, record = accounts.keys.create_key(1, name="theta-only", quota=50_000, allowed_models=["theta-3"])
    before = balance(accounts)
    status, answer, _ = generate(images, {"model": "iota-image-1", "prompt": "a fox"}, key)
    assert status == 404 and answer["error"]["code"] == "model_not_found"
    status, answer = edit(images, GOOD_EDIT, key)
    assert status == 404 and answer["error"]["param"] == "model"
    assert balance(accounts) == before
    # When it uses its own model, Then both the user's and the key's quota move by the price
    status, _, _ = generate(images, {"model": "theta-3", "prompt": "a fox"}, key)
    assert status == 200
    assert balance(accounts)[0] == before[0] - 20_000
    assert balances.get_key(record["pk"].removeprefix("KEY#"))["remain_quota"] == 30_000


def test_a_key_without_enough_quota_is_refused_before_the_upstream(images, simulated, demo, accounts):
    key, _ = accounts.keys.create_key(1, name="small", quota=30_000)
    status, answer, _ = generate(images, {"model": "iota-image-1", "prompt": "a fox", "n": 2}, key)
    assert status == 403 and answer["error"]["code"] == "insufficient_quota"
    assert balance(accounts)[3] == []


def test_no_key_is_a_401_in_the_chat_envelope(images, simulated):
    answer = httpx.post(f"{images}/v1/images/generations", content='{"model": "theta-3", "prompt": "x"}')
    assert answer.status_code == 401
    assert_chat_error(answer.json(), "authentication_error")

