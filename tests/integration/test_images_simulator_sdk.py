"""The official `openai` SDK against the images simulator over real HTTP on 127.0.0.1.

The simulator is mounted under /chat as the chat-protocol simulator will mount it. A second
mount, /gateway-rules, answers like the simulator but first runs the gateway's own request
rules on what the SDK sent, which shows that SDK requests pass them.
"""

import base64

import httpx
import openai
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Mount, Route

from gateway.errors import InvalidRequest
from gateway.multipart import parse_multipart
from gateway.schemas.images import parse_edit_form, parse_generation_body
from gateway_local.simulators import images as simulator
from tests.conftest import serve_asgi
from tests.imagefiles import JPEG, PNG, decode_png

checked: list = []


async def _checked_generation(request: Request):
    try:
        checked.append(parse_generation_body(await request.body()))
    except InvalidRequest as exc:
        return JSONResponse({"error": {"message": exc.message, "type": "invalid_request_error",
                                       "param": exc.param, "code": None}}, status_code=400)
    return await simulator.generations(request)


async def _checked_edit(request: Request):
    try:
        checked.append(parse_edit_form(parse_multipart(await request.body(), request.headers["content-type"])))
    except InvalidRequest as exc:
        return JSONResponse({"error": {"message": exc.message, "type": "invalid_request_error",
                                       "param": exc.param, "code": None}}, status_code=400)
    return await simulator.edits(request)


APP = Starlette(routes=[
    Mount("/chat", routes=simulator.routes),
    Mount("/gateway-rules", routes=[
        Route("/v1/images/generations", _checked_generation, methods=["POST"]),
        Route("/v1/images/edits", _checked_edit, methods=["POST"]),
        *simulator.routes[2:],
    ]),
])


@pytest.fixture(scope="module")
def base_url():
    with serve_asgi(APP) as url:
        yield url


@pytest.fixture
def sdk(base_url):
    with openai.OpenAI(api_key="sk-test", base_url=f"{base_url}/chat/v1", max_retries=0) as client:
        yield client


def test_iota_generate_returns_decodable_pngs_and_usage(sdk):
    result = sdk.images.generate(model="iota-image-1", prompt="a red fox", n=2, size="1024x1024", quality="low")
    assert len(result.data) == 2
    assert all(decode_png(base64.b64decode(item.b64_json)) == (64, 64) for item in result.data)
    assert result.usage.input_tokens_details.text_tokens > 0 and result.usage.total_tokens > 0


def test_theta_generate_returns_a_url_that_serves_a_png(sdk, base_url):
    result = sdk.images.generate(model="theta-3", prompt="a lighthouse", size="1792x1024", style="natural")
    item = result.data[0]
    assert item.url.startswith(f"{base_url}/chat/files/") and "a lighthouse" in item.revised_prompt
    fetched = httpx.get(item.url)
    assert fetched.status_code == 200 and decode_png(fetched.content) == (64, 64)


def test_theta_generate_as_b64_json(sdk):
    result = sdk.images.generate(model="theta-3", prompt="a lighthouse", response_format="b64_json")
    assert decode_png(base64.b64decode(result.data[0].b64_json)) == (64, 64)


def test_edit_uploads_the_image_and_returns_pngs(sdk):
    result = sdk.images.edit(model="eta-image-edit", image=("photo.png", PNG, "image/png"), prompt="add a hat",
                             n=2, response_format="b64_json")
    assert len(result.data) == 2 and result.usage.input_tokens_details.image_tokens > 0
    assert all(decode_png(base64.b64decode(item.b64_json)) == (64, 64) for item in result.data)


def test_edit_as_url(sdk):
    result = sdk.images.edit(model="eta-image-edit", image=("photo.jpg", JPEG, "image/jpeg"), prompt="add a hat")
    assert decode_png(httpx.get(result.data[0].url).content) == (64, 64)


def test_faults_reach_the_sdk_as_its_own_errors(sdk):
    with pytest.raises(openai.InternalServerError):
        sdk.images.generate(model="iota-image-1", prompt="x #fault=500")
    with pytest.raises(openai.RateLimitError) as caught:
        sdk.images.edit(model="eta-image-edit", image=("p.png", PNG, "image/png"), prompt="x #fault=429")
    assert caught.value.response.headers["retry-after"] == "1"


def test_a_request_without_a_bearer_token_is_a_401(base_url):
    response = httpx.post(f"{base_url}/chat/v1/images/generations", json={"model": "theta-3", "prompt": "x"})
    assert response.status_code == 401 and response.json()["error"]["code"] == "invalid_api_key"


def test_what_the_sdk_sends_passes_the_gateway_rules(base_url):
    # Given the SDK pointed at the mount that applies the gateway's own schemas
    checked.clear()
    with openai.OpenAI(api_key="sk-test", base_url=f"{base_url}/gateway-rules/v1", max_retries=0) as sdk:
        # When it generates with both families and edits with every edit option
        sdk.images.generate(model="iota-image-1", prompt="p", n=3, quality="high", size="1536x1024",
                            output_format="png", background="transparent")
        sdk.images.generate(model="theta-3", prompt="p", n=1, response_format="url", quality="hd")
        sdk.images.edit(model="eta-image-edit", image=("x.jpg", PNG, "image/jpeg"), prompt="p", n=4,
                        response_format="url", extra_body={"seed": 7, "negative_prompt": "blur"})
        # Then a rule broken through the SDK comes back as a 400 naming the field
        with pytest.raises(openai.BadRequestError) as caught:
            sdk.images.edit(model="eta-image-edit", image=("x.png", b"not an image", "image/png"), prompt="p")
    assert caught.value.body["param"] == "image"
    iota, theta, edit = checked
    assert (iota.n, iota.size, theta.quality) == (3, "1536x1024", "hd")
    assert (edit.n, edit.seed, edit.negative_prompt, edit.image_type) == (4, 7, "blur", "png")


@pytest.mark.parametrize("call", ["generate", "edit"])
def test_an_iota_model_refuses_response_format_as_gpt_image_does(sdk, call):
    # gpt-image answers b64_json only and refuses the field (OpenAI images API reference;
    # openai-python ImageGenerateParams/ImageEditParams: "not supported for gpt-image-1").
    with pytest.raises(openai.BadRequestError) as refused:
        if call == "generate":
            sdk.images.generate(model="iota-image-1", prompt="a fox", response_format="b64_json")
        else:
            sdk.images.edit(model="iota-image-1", image=("a.png", PNG, "image/png"), prompt="p",
                            response_format="b64_json")
    assert refused.value.body["param"] == "response_format"
    assert "Unknown parameter: 'response_format'" in refused.value.body["message"]


def test_an_iota_field_the_images_api_does_not_define_is_an_unknown_parameter(sdk):
    # The simulator takes the fields openai-python's ImageGenerateParams / ImageEditParams define.
    with pytest.raises(openai.BadRequestError) as refused:
        sdk.images.generate(model="iota-image-1", prompt="a fox", extra_body={"seed": 7})
    assert refused.value.body["param"] == "seed" and refused.value.body["code"] == "unknown_parameter"
    with pytest.raises(openai.BadRequestError) as refused:
        sdk.images.edit(model="iota-image-1", image=("a.png", PNG, "image/png"), prompt="p",
                        extra_body={"style": "vivid"})
    assert refused.value.body["param"] == "style"
    ok = sdk.images.generate(model="iota-image-1", prompt="a fox", quality="low", background="opaque",
                             output_format="png", moderation="low", output_compression=50, user="u")
    assert ok.data[0].b64_json
