"""What template.yaml promises about the images routes, read as data (no AWS, no sockets)."""

import json
from pathlib import Path

import pytest

from gateway.multipart import MAX_REQUEST_BYTES
from gateway_local.emulator import load_template

TEMPLATE = Path(__file__).resolve().parents[2] / "template.yaml"


@pytest.fixture(scope="module")
def resources():
    return load_template(TEMPLATE)["Resources"]


def test_api_gateway_answers_a_too_large_request_in_the_chat_envelope_naming_the_limit(resources):
    # A body too large for a Lambda event is answered by API Gateway itself, never by a function.
    responses = resources["GatewayApi"]["Properties"]["GatewayResponses"]
    too_large = responses["REQUEST_TOO_LARGE"]
    assert too_large["StatusCode"] == "413"
    body = json.loads(too_large["ResponseTemplates"]["application/json"])
    assert set(body) == {"error"} and set(body["error"]) == {"message", "type", "param", "code"}
    assert body["error"]["code"] == "request_too_large"
    assert f"at most {MAX_REQUEST_BYTES} bytes" in body["error"]["message"]
    assert "DEFAULT_5XX" not in responses


def test_the_images_function_serves_both_routes_on_the_gateway_api(resources):
    function = resources["ImagesFunction"]["Properties"]
    routes = {(e["Properties"]["Path"], e["Properties"]["Method"]) for e in function["Events"].values()}
    assert routes == {("/v1/images/generations", "post"), ("/v1/images/edits", "post")}
    assert all(e["Properties"]["RestApiId"] == {"Ref": "GatewayApi"} for e in function["Events"].values())
    assert function["CodeUri"] == "functions/images" and function["Timeout"] == 29
    assert "multipart~1form-data" in resources["GatewayApi"]["Properties"]["BinaryMediaTypes"]
