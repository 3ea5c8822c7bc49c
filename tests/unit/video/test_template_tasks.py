"""What template.yaml promises about the video and task functions, read as data."""

from pathlib import Path

import pytest

from gateway_local.template import load_template

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
        ("/v1/videos/{video_id}", "get"), ("/videos/{videoId}/content", "get"),
        ("/v1/videos/{video_id}/content", "get"), ("/v1/video/results/{task_id}/{index}", "get")}


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
        ("AWSSecretsManagerGetSecretValuePolicy", {"SecretArn": {"Ref": "CallbackSigningSecret"}}),
        ("AWSSecretsManagerGetSecretValuePolicy", {"SecretArn": {"Ref": "ResultLinkSecret"}}),
        # UpdateItem: the claim of each task and status, so a duplicated message sends its webhook once
        ("Statement", [{"Effect": "Allow", "Action": ["dynamodb:GetItem", "dynamodb:UpdateItem"],
                        "Resource": {"Fn::GetAtt": "TasksTable.Arn"}}]),
        ("SQSPollerPolicy", {"QueueName": {"Fn::GetAtt": "CallbackQueue.QueueName"}})]
    assert sender["Environment"]["Variables"]["GATEWAY_CALLBACK_SECRET_ID"] == {"Ref": "CallbackSigningSecret"}
    video = _policies(resources["VideoFunction"])
    assert ("SQSSendMessagePolicy", {"QueueName": {"Fn::GetAtt": "TaskPollQueue.QueueName"}}) in video
    assert not any(kind == "SQSSendMessagePolicy" and "CallbackQueue" in str(value) for kind, value in video)


def test_json_and_multipart_bodies_are_untouched_by_the_content_media_types(template):
    types = template["Resources"]["GatewayApi"]["Properties"]["BinaryMediaTypes"]
    assert types[0] == "multipart~1form-data" and "video~1mp4" in types
    assert not any(t in ("*~1*", "application~1json", "text~1plain") for t in types)


def test_the_alpha_function_serves_every_alpha_path_of_the_spec(template):
    events = template["Resources"]["AlphaFunction"]["Properties"]["Events"].values()
    served = {(e["Properties"]["Path"], e["Properties"]["Method"]) for e in events}
    spec = {("/alpha/v1/videos/text2video", "post"), ("/alpha/v1/videos/image2video", "post"),
            ("/alpha/v1/videos/omni-video", "post"), ("/alpha/v1/videos/motion-control", "post"),
            ("/alpha/v1/images/omni-image", "post"), ("/alpha/v1/general/custom-elements", "post"),
            ("/alpha/v1/general/custom-elements", "get"), ("/alpha/v1/general/custom-voices", "post"),
            ("/alpha/v1/general/custom-voices", "get"), ("/alpha/v1/general/custom-voices/{voice_id}", "get"),
            ("/alpha/v1/videos/text2video/{task_id}", "get"), ("/alpha/v1/videos/motion-control/{task_id}", "get"),
            ("/alpha/v1/images/omni-image/{task_id}", "get"), ("/alpha/v1/video/{task_id}", "get")}
    # and the upstream's own queries of the two operations the spec gives none
    assert served == spec | {("/alpha/v1/videos/image2video/{task_id}", "get"),
                             ("/alpha/v1/videos/omni-video/{task_id}", "get")}
    alpha = _policies(template["Resources"]["AlphaFunction"])
    assert ("SQSSendMessagePolicy", {"QueueName": {"Fn::GetAtt": "TaskPollQueue.QueueName"}}) in alpha


def test_the_results_bucket_keeps_a_result_as_long_as_the_gateways_links_promise(template):
    # A delta link is signed until KEPT_SECONDS after its task ended (tasks/kept.py): the bucket's
    # lifecycle rule must not remove the copy before (it expires objects at midnight UTC after
    # ExpirationInDays, so never earlier than that many days)
    from gateway.store.results import KEPT_SECONDS

    rules = template["Resources"]["ResultsBucket"]["Properties"]["LifecycleConfiguration"]["Rules"]
    (rule,) = [r for r in rules if r["Status"] == "Enabled"]
    assert rule["ExpirationInDays"] * 24 * 3600 >= KEPT_SECONDS
    # and the functions that presign or check kept results may read them (a presigned link serves
    # only what the signer's role may read)
    resources = template["Resources"]
    object_reader = {"Statement": [{"Effect": "Allow", "Action": "s3:GetObject",
                                    "Resource": {"Fn::Sub": "${ResultsBucket.Arn}/*"}}]}
    for name in ("VideoFunction", "BetaFunction", "ImgtaskFunction"):
        policies = resources[name]["Properties"]["Policies"]
        assert object_reader in policies, name
