"""What template.yaml promises about the images routes, read as data (no AWS, no sockets)."""

import json
from pathlib import Path

import pytest

from gateway.multipart import MAX_REQUEST_BYTES
from gateway_local.template import load_template

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



def test_every_answer_api_gateway_makes_itself_names_its_request_id(resources):
    responses = resources["GatewayApi"]["Properties"]["GatewayResponses"]
    for kind in ("DEFAULT_4XX", "DEFAULT_5XX", "REQUEST_TOO_LARGE"):
        assert responses[kind]["ResponseParameters"]["Headers"]["x-request-id"] == "context.requestId"
    # A 5xx keeps API Gateway's own message and shape, and adds the id to quote
    assert responses["DEFAULT_5XX"]["ResponseTemplates"]["application/json"] == (
        '{"message": $context.error.messageString, "request_id": "$context.requestId"}')


def test_any_other_path_is_routed_to_a_function_that_answers_404_in_the_family_envelope(resources):
    events = resources["AccountFunction"]["Properties"]["Events"]
    routes = {(e["Properties"]["Path"], e["Properties"]["Method"]) for e in events.values()}
    assert {("/", "any"), ("/{proxy+}", "any")} <= routes


def test_a_request_hold_outlasts_every_api_function_timeout():
    from gateway.admission.billing import REQUEST_HOLD_SECONDS

    template = load_template(TEMPLATE)
    default = template["Globals"]["Function"]["Timeout"]
    for resource in template["Resources"].values():
        props = resource.get("Properties", {})
        if resource["Type"] == "AWS::Serverless::Function" and any(
                e["Type"] == "Api" for e in (props.get("Events") or {}).values()):
            assert REQUEST_HOLD_SECONDS > props.get("Timeout", default)


def test_the_images_function_serves_both_routes_on_the_gateway_api(resources):
    function = resources["ImagesFunction"]["Properties"]
    routes = {(e["Properties"]["Path"], e["Properties"]["Method"]) for e in function["Events"].values()}
    assert routes == {("/v1/images/generations", "post"), ("/v1/images/edits", "post")}
    assert all(e["Properties"]["RestApiId"] == {"Ref": "GatewayApi"} for e in function["Events"].values())
    # Streamed as the text routes are (issue 31): 15 minutes for a slow generation, no 6 MB answer limit.
    assert function["CodeUri"] == "functions/images" and function["Timeout"] == 900
    assert function["Handler"] == "run.sh" and function["Environment"]["Variables"]["AWS_LWA_INVOKE_MODE"] == \
        "response_stream"
    assert all(e["Properties"]["ResponseTransferMode"] == "RESPONSE_STREAM"
               and e["Properties"]["TimeoutInMillis"] == 900000 for e in function["Events"].values())
    assert function["Layers"] == resources["TextFunction"]["Properties"]["Layers"]  # the same adapter
    assert "multipart~1form-data" in resources["GatewayApi"]["Properties"]["BinaryMediaTypes"]
