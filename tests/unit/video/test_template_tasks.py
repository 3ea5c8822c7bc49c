"""What template.yaml promises about the video and task functions, read as data."""

from pathlib import Path

import pytest

from gateway_local.emulator import load_template

TEMPLATE = Path(__file__).resolve().parents[3] / "template.yaml"


@pytest.fixture(scope="module")
def template():
    return load_template(TEMPLATE)


def _policies(function) -> list[tuple[str, object]]:
    return [next(iter(policy.items())) for policy in function["Properties"]["Policies"]]


def test_the_video_function_serves_the_spec_routes_and_the_sdk_content_path(template):
    events = template["Resources"]["VideoFunction"]["Properties"]["Events"].values()
    assert {(e["Properties"]["Path"], e["Properties"]["Method"]) for e in events} == {
        ("/v1/video/generations", "post"), ("/v1/video/generations/result", "get"), ("/v1/videos", "post"),
        ("/v1/videos", "get"),
        ("/v1/videos/{video_id}", "get"), ("/videos/{videoId}/content", "get"), ("/v1/videos/{video_id}/content", "get")}


def test_the_poller_and_the_callback_sender_report_partial_batch_failures(template):
    resources = template["Resources"]
    for name, queue in (("TaskPollerFunction", "TaskPollQueue"), ("CallbackSenderFunction", "CallbackQueue")):
        function = resources[name]["Properties"]
        (event,) = function["Events"].values()
        assert event["Type"] == "SQS" and event["Properties"]["Queue"] == {"Fn::GetAtt": f"{queue}.Arn"}
        assert event["Properties"]["FunctionResponseTypes"] == ["ReportBatchItemFailures"]
        # Lambda refuses a function that could outlive its queue's visibility timeout
        assert function["Timeout"] <= resources[queue]["Properties"]["VisibilityTimeout"]
    assert resources["CallbackQueue"]["Properties"]["RedrivePolicy"]["maxReceiveCount"] == 8


def test_the_sweeper_runs_every_minute_with_the_configurable_maximum_age(template):
    function = template["Resources"]["TaskSweeperFunction"]["Properties"]
    (event,) = function["Events"].values()
    assert event["Type"] == "Schedule" and event["Properties"]["Schedule"] == "rate(1 minute)"
    # Every function sees it: whoever reserves for a task holds it that long (billing.task_hold_seconds)
    variables = template["Globals"]["Function"]["Environment"]["Variables"]
    assert variables["GATEWAY_TASK_MAX_AGE_SECONDS"] == {"Ref": "TaskMaxAgeSeconds"}
    assert template["Parameters"]["TaskMaxAgeSeconds"]["Default"] == 7200


def test_each_task_function_gets_only_the_access_it_uses(template):
    resources = template["Resources"]
    sender = resources["CallbackSenderFunction"]["Properties"]
    assert _policies(resources["CallbackSenderFunction"]) == [
        ("DynamoDBReadPolicy", {"TableName": {"Ref": "TasksTable"}}),
        ("SQSPollerPolicy", {"QueueName": {"Fn::GetAtt": "CallbackQueue.QueueName"}})]
    assert "CallbackSigningSecret" in sender["Environment"]["Variables"]["GATEWAY_CALLBACK_SECRET"]["Fn::Sub"]
    video = _policies(resources["VideoFunction"])
    assert ("SQSSendMessagePolicy", {"QueueName": {"Fn::GetAtt": "TaskPollQueue.QueueName"}}) in video
    assert not any(kind == "SQSSendMessagePolicy" and "CallbackQueue" in str(value) for kind, value in video)


def test_json_and_multipart_bodies_are_untouched_by_the_content_media_types(template):
    types = template["Resources"]["GatewayApi"]["Properties"]["BinaryMediaTypes"]
    assert types[0] == "multipart~1form-data" and "video~1mp4" in types
    assert not any(t in ("*~1*", "application~1json", "text~1plain") for t in types)
