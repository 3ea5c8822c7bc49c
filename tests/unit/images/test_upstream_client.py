"""The images upstream client against the simulator (mounted as in the chat simulator) and fakes."""

import asyncio
import base64
import json

import httpx
import pytest
from starlette.applications import Starlette
from starlette.routing import Mount

from gateway.multipart import UploadedFile, parse_multipart
from gateway.upstreams.images import ImagesClient, UpstreamError
from gateway_local.simulators import images as simulator
from tests.imagefiles import JPEG, PNG, decode_png

KEY = "sk-upstream-secret-123"
# Mounted under /chat, as the chat-protocol simulator will mount it.
MOUNTED = Starlette(routes=[Mount("/chat", routes=simulator.routes)])


def run(coroutine):
    return asyncio.run(coroutine)


async def against_simulator(call, key: str = KEY):
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=MOUNTED)) as http:
        return await call(ImagesClient("http://sim/chat/", key, http), http)


async def against(handler, call, timeout=None):
    async with httpx.AsyncClient(transport=httpx.MockTransport(handler)) as http:
        return await call(ImagesClient("http://up", KEY, http, timeout=timeout))


def failure(coroutine) -> UpstreamError:
    with pytest.raises(UpstreamError) as caught:
        run(coroutine)
    assert KEY not in caught.value.message and KEY not in repr(caught.value)
    return caught.value


# --- against the simulator ---------------------------------------------------------------------

def test_iota_generation_answers_decodable_pngs_and_usage():
    answer = run(against_simulator(lambda c, _: c.generate(
        {"model": "iota-image-1", "prompt": "a red fox", "n": 2, "quality": "low"})))
    assert len(answer["data"]) == 2 and isinstance(answer["created"], int)
    pictures = [base64.b64decode(item["b64_json"]) for item in answer["data"]]
    assert all(decode_png(p) == (64, 64) for p in pictures) and pictures[0] != pictures[1]
    usage = answer["usage"]
    assert usage["total_tokens"] == usage["input_tokens"] + usage["output_tokens"]
    assert set(usage["input_tokens_details"]) == {"text_tokens", "image_tokens"}


def test_the_same_prompt_gives_the_same_picture():
    payload = {"model": "iota-image-1", "prompt": "a red fox"}
    first = run(against_simulator(lambda c, _: c.generate(payload)))
    second = run(against_simulator(lambda c, _: c.generate(payload)))
    assert first["data"] == second["data"]


def test_theta_generation_answers_urls_under_the_mount_that_serve_the_picture():
    async def call(client, http):
        answer = await client.generate({"model": "theta-3", "prompt": "a blue whale"})
        url = answer["data"][0]["url"]
        return answer, url, await http.get(url)

    answer, url, fetched = run(against_simulator(call))
    assert url.startswith("http://sim/chat/files/") and url.endswith(".png")
    assert "a blue whale" in answer["data"][0]["revised_prompt"]
    assert fetched.status_code == 200 and fetched.headers["content-type"] == "image/png"
    assert decode_png(fetched.content) == (64, 64)


def test_theta_answers_b64_json_when_asked():
    answer = run(against_simulator(lambda c, _: c.generate(
        {"model": "theta-3", "prompt": "a whale", "response_format": "b64_json"})))
    assert decode_png(base64.b64decode(answer["data"][0]["b64_json"])) == (64, 64)
    assert "url" not in answer["data"][0]


def test_edit_sends_the_image_and_fields_as_multipart():
    image = UploadedFile("cat.jpg", "image/jpeg", JPEG)
    answer = run(against_simulator(lambda c, _: c.edit(
        {"model": "eta-image-edit", "prompt": "add a hat", "n": "2",
         "response_format": "b64_json"}, [("image", image)])))
    assert len(answer["data"]) == 2 and answer["usage"]["input_tokens_details"]["image_tokens"] > 0
    assert decode_png(base64.b64decode(answer["data"][1]["b64_json"])) == (64, 64)


def test_edit_answers_urls_by_default():
    answer = run(against_simulator(lambda c, _: c.edit(
        {"model": "eta-image-edit", "prompt": "add a hat"}, [("image", UploadedFile("a.png", "image/png", PNG))])))
    assert answer["data"][0]["url"].startswith("http://sim/chat/files/")


def test_an_unknown_file_is_404():
    async def call(client, http):
        return await http.get("http://sim/chat/files/nothing.png")
    assert run(against_simulator(call)).status_code == 404


@pytest.mark.parametrize("prompt,status,retry_after", [("boom #fault=500", 500, None), ("slow #fault=429", 429, 1.0)])
def test_simulated_faults_are_retryable_upstream_errors(prompt, status, retry_after):
    error = failure(against_simulator(lambda c, _: c.generate({"model": "iota-image-1", "prompt": prompt})))
    assert (error.status, error.retryable, error.retry_after) == (status, True, retry_after)
    assert "simulated" in error.message
    error = failure(against_simulator(lambda c, _: c.edit(
        {"model": "eta-image-edit", "prompt": prompt}, [("image", UploadedFile("a.png", "image/png", PNG))])))
    assert (error.status, error.retryable) == (status, True)


def test_a_missing_key_is_a_401_that_is_not_retried():
    error = failure(against_simulator(lambda c, _: c.generate({"model": "theta-3", "prompt": "x"}), key=""))
    assert (error.status, error.retryable) == (401, False) and "bearer" in error.message


def test_a_request_the_upstream_refuses_is_not_retried():
    error = failure(against_simulator(lambda c, _: c.generate({"model": "nope-1", "prompt": "x"})))
    assert (error.status, error.retryable) == (404, False) and "does not exist" in error.message
    error = failure(against_simulator(lambda c, _: c.edit(
        {"model": "eta-image-edit", "prompt": "x"}, [("image", UploadedFile("a.png", "text/plain", b"text"))])))
    assert (error.status, error.retryable) == (400, False) and "image" in error.message


def test_the_simulator_wants_a_bearer_token_in_the_chat_envelope():
    async def call(client, http):
        return await http.post("http://sim/chat/v1/images/generations", json={"model": "theta-3", "prompt": "x"},
                               headers={"Authorization": "Bearer "})
    response = run(against_simulator(call))
    assert response.status_code == 401
    assert set(response.json()["error"]) == {"message", "type", "param", "code"}


# --- against fakes -----------------------------------------------------------------------------

def test_the_request_carries_the_key_in_the_header_and_the_payload_as_json():
    seen = {}

    def handler(request: httpx.Request) -> httpx.Response:
        seen.update(url=str(request.url), auth=request.headers["authorization"], body=json.loads(request.content),
                    timeout=request.extensions["timeout"])
        return httpx.Response(200, json={"created": 1, "data": []})

    run(against(handler, lambda c: c.generate({"model": "theta-3", "prompt": "p"}), timeout=7.5))
    assert seen["url"] == "http://up/v1/images/generations" and seen["auth"] == f"Bearer {KEY}"
    assert seen["body"] == {"model": "theta-3", "prompt": "p"}
    assert seen["timeout"]["read"] == 7.5


def test_the_edit_form_is_what_the_parser_reads_back():
    seen = {}

    def handler(request: httpx.Request) -> httpx.Response:
        seen["form"] = parse_multipart(request.read(), request.headers["content-type"])
        return httpx.Response(200, json={"created": 1, "data": [{"url": "http://x"}]})

    run(against(handler, lambda c: c.edit({"model": "eta-image-edit", "prompt": "p", "seed": "9"},
                                          [("image", UploadedFile("a.png", "image/png", PNG))])))
    form = seen["form"]
    assert form.fields == {"model": "eta-image-edit", "prompt": "p", "seed": "9"}
    assert (form.files["image"].filename, form.files["image"].data) == ("a.png", PNG)


@pytest.mark.parametrize("exc,retryable", [
    (httpx.ConnectError("refused"), True), (httpx.ConnectTimeout("slow"), True),
    (httpx.ReadTimeout("slow"), True), (httpx.RemoteProtocolError("cut"), False),
])
def test_transport_failures_say_whether_to_retry(exc, retryable):
    def handler(request):
        raise exc
    error = failure(against(handler, lambda c: c.generate({})))
    assert (error.status, error.retryable) == (None, retryable)


@pytest.mark.parametrize("status,retryable", [(400, False), (401, False), (403, False), (404, False), (408, True),
                                              (409, True), (413, False), (429, True), (500, True), (502, True),
                                              (503, True)])
def test_statuses_say_whether_to_retry(status, retryable):
    error = failure(against(lambda r: httpx.Response(status, json={"error": {"message": "nope"}}),
                            lambda c: c.generate({})))
    assert (error.status, error.retryable) == (status, retryable) and "nope" in error.message


def test_an_upstream_that_echoes_the_key_has_it_scrubbed():
    def handler(request):
        return httpx.Response(401, json={"error": {"message": f"bad key {request.headers['authorization']}"}})
    error = failure(against(handler, lambda c: c.generate({})))
    assert "[redacted]" in error.message


def test_a_non_json_error_page_is_summarised():
    error = failure(against(lambda r: httpx.Response(502, text="<html>Bad Gateway</html>"), lambda c: c.generate({})))
    assert error.message.startswith("upstream 502") and error.retryable


@pytest.mark.parametrize("response", [httpx.Response(200, text="not json"), httpx.Response(200, json=[1]),
                                      httpx.Response(200, json={"created": 1})])
def test_a_200_that_is_not_an_image_answer_is_an_error(response):
    error = failure(against(lambda r: response, lambda c: c.generate({})))
    assert (error.status, error.retryable) == (200, False)
