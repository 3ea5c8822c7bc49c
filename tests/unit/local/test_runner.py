"""The local runner reads its routes from template.yaml and builds API Gateway's events."""

import base64
from pathlib import Path

import pytest

from gateway_local import apigw
from gateway_local.template import compile_path, read_template, schedule_seconds

ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture(scope="module")
def template():
    return read_template(ROOT / "template.yaml")


def test_every_api_event_of_the_template_is_a_route(template):
    routes = {(r.method, r.path) for r in template.routes}
    assert ("POST", "/plants") in routes and ("GET", "/api/user/self") in routes
    assert template.route_for("POST", "/plants")[0].function == "PlantsFunction"
    # Any other method or path goes to the catch-all, whose function answers it a 404
    assert template.route_for("GET", "/plants")[0].path == "/{proxy+}"
    assert template.route_for("GET", "/")[0].path == "/"
    assert template.route_for("POST", "/v1beta/models/m:generateContent")[0].function == "TextFunction"
    assert template.binary_media_types == ("multipart/form-data", "video/mp4", "image/webp", "image/jpeg",
                                           "application/binary", "image/*", "audio/*")


def test_the_task_functions_event_sources_are_read(template):
    poller, sender = template.functions["TaskPollerFunction"], template.functions["CallbackSenderFunction"]
    assert poller.queues == (("TaskPollQueue", 10),) and poller.partial_batch
    assert sender.queues == (("CallbackQueue", 5),) and sender.partial_batch
    assert template.functions["TaskSweeperFunction"].schedules == ("rate(1 minute)",)
    assert template.route_for("GET", "/videos/v1/content")[0].function == "VideoFunction"


def test_static_segments_beat_parameters_and_greedy_paths_come_last():
    static, _ = compile_path("/v1/videos/{video_id}")
    assert static.fullmatch("/v1/videos/abc").group("video_id") == "abc"
    greedy, greedy_rank = compile_path("/v1beta/models/{proxy+}")
    assert greedy.fullmatch("/v1beta/models/m:generateContent").group("proxy") == "m:generateContent"
    assert compile_path("/v1beta/models/list")[1] > greedy_rank


def test_a_request_becomes_a_rest_proxy_event():
    event = apigw.build_event(
        method="POST", path="/v1/images/edits", resource="/v1/images/edits", path_parameters={},
        raw_headers=[("Content-Type", "multipart/form-data; boundary=x"), ("X-Tag", "a"), ("X-Tag", "b")],
        raw_query=[("k", "1"), ("k", "2")], body=b"\x89PNG", binary_media_types=("multipart/form-data",),
        source_ip="127.0.0.1")
    assert event["isBase64Encoded"] is True and base64.b64decode(event["body"]) == b"\x89PNG"
    assert event["multiValueHeaders"]["X-Tag"] == ["a", "b"] and event["headers"]["X-Tag"] == "b"
    assert event["multiValueQueryStringParameters"] == {"k": ["1", "2"]} and event["pathParameters"] is None
    assert event["requestContext"]["requestId"] and event["requestContext"]["resourcePath"] == "/v1/images/edits"
    text = apigw.build_event(method="GET", path="/p", resource="/p", path_parameters={}, raw_headers=[],
                             raw_query=[], body=b"", binary_media_types=(), source_ip="1.2.3.4")
    assert text["body"] is None and text["queryStringParameters"] is None and text["isBase64Encoded"] is False


def test_a_handler_answer_becomes_http():
    status, headers, body = apigw.response_parts({"statusCode": 201, "headers": {"A": "1"},
                                                  "multiValueHeaders": {"Set-Cookie": ["x", "y"]},
                                                  "body": base64.b64encode(b"\x00").decode(), "isBase64Encoded": True})
    assert (status, body) == (201, b"\x00") and ("Set-Cookie", "y") in headers


def test_schedule_rates_are_understood():
    assert schedule_seconds("rate(5 minutes)") == 300 and schedule_seconds("rate(1 hour)") == 3600


def test_a_path_parameter_may_hold_a_newline_as_api_gateway_allows(template):
    # A decoded %0A in a model name still reaches the content route (which then refuses it)
    found = template.route_for("POST", "/v1beta/models/a\nb:generateContent")
    assert found is not None and found[1]["proxy"] == "a\nb:generateContent"


def test_the_streaming_function_has_eight_instances_per_core_unless_told(monkeypatch):
    from gateway_local.instances import instance_limit

    monkeypatch.delenv("GATEWAY_LOCAL_INSTANCES", raising=False)
    monkeypatch.setattr("os.cpu_count", lambda: 3)
    assert instance_limit() == 3 and instance_limit(streaming=True) == 24
    monkeypatch.setenv("GATEWAY_LOCAL_INSTANCES", "5")
    assert instance_limit() == 5 and instance_limit(streaming=True) == 5
    monkeypatch.setenv("GATEWAY_LOCAL_INSTANCES", "0")
    with pytest.raises(ValueError, match="at least 1"):
        instance_limit(streaming=True)


def test_make_run_serves_from_one_process_per_core_unless_told(monkeypatch):
    from gateway_local.processes import process_count

    monkeypatch.delenv("GATEWAY_LOCAL_PROCESSES", raising=False)
    monkeypatch.setattr("os.cpu_count", lambda: 4)
    assert process_count() == 4
    monkeypatch.setenv("GATEWAY_LOCAL_PROCESSES", "1")
    assert process_count() == 1
    monkeypatch.setenv("GATEWAY_LOCAL_PROCESSES", "two")
    with pytest.raises(ValueError, match="whole number"):
        process_count()
