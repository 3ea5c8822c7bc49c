"""Bedrock batch inference as the batch family uses it: which bedrock channels run a batch (their
S3 location, role, IAM keys and minimum of records), each job status as OpenAI shows a batch, the
control plane's and S3's hosts on AWS, and the channel's `batch` settings refused elsewhere."""

from __future__ import annotations

import httpx
import pytest

from gateway.errors import InvalidRequest
from gateway.routing.channel import BedrockBatch, Channel, ChannelsConfigError, channel_of, spec_model
from gateway.tasks.engine import NewTask
from gateway.tasks.families.batch import FAMILY, bedrock

CHAT = "/v1/chat/completions"
KEYS = "AKIAEXAMPLE|secret|eu-west-1"
SETTINGS = BedrockBatch(s3_uri="s3://ops-bucket/batches", role_arn="arn:aws:iam::123456789012:role/b",
                        min_records=100)


def channel(name: str, *, key: str = KEYS, batch: BedrockBatch | None = SETTINGS,
            base_url: str = "https://bedrock-runtime.eu-west-1.amazonaws.com") -> Channel:
    return Channel(name=name, protocol="bedrock", base_url=base_url, api_key=key, models=frozenset({"*"}),
                   region="eu-west-1", bedrock_batch=batch)


def batch_of(lines: int) -> NewTask:
    return NewTask(family="batch", model="m-small", upstream_request={"endpoint": CHAT}, route="/v1/batches",
                   quantities={"lines": lines})


def test_a_bedrock_channel_runs_a_batch_only_with_its_location_role_keys_and_enough_records():
    ready, bare = channel("ready"), channel("bare", batch=None)
    api_key, role = channel("api-key", key="ABSKkey|eu-west-1"), channel("role", key="")
    chat = Channel(name="chat", protocol="chat", base_url="http://c", api_key="k", models=frozenset({"*"}))
    assert [c.name for c in FAMILY.usable_channels([ready, bare, api_key, role, chat], batch_of(100))] == [
        "chat", "ready"]
    assert [c.name for c in FAMILY.usable_channels([ready, chat], batch_of(99))] == ["chat"]
    with pytest.raises(InvalidRequest) as refused:
        FAMILY.usable_channels([ready, bare], batch_of(99))
    assert "at least 100 requests (this file has 99)" in str(refused.value)


def test_each_job_status_is_shown_as_openai_shows_a_batch():
    shown = {status: bedrock.progress({"status": status}, False) for status in (
        "Submitted", "Validating", "Scheduled", "InProgress", "Stopping", "Completed", "PartiallyCompleted",
        "Failed", "Stopped", "Expired")}
    assert [value[0] for value in list(shown.values())[:5]] == [
        "validating", "validating", "validating", "in_progress", "cancelling"]
    assert [value[1] for value in shown.values()] == [None] * 5 + [
        "completed", "completed", "failed", "cancelled", "expired"]


def test_jobs_go_to_the_control_plane_host_and_objects_to_the_buckets_virtual_host():
    sent: list[httpx.Request] = []

    def answer(request: httpx.Request) -> httpx.Response:
        sent.append(request)
        if request.url.host.endswith(".s3.eu-west-1.amazonaws.com"):
            return httpx.Response(200)
        return httpx.Response(200, json={"jobArn": "arn:aws:bedrock:eu-west-1:123456789012:model-invocation-job/"
                                                   "abcdefghijkl"})

    data = b'{"custom_id":"a","method":"POST","url":"/v1/chat/completions","body":{"model":"m","messages":' \
           b'[{"role":"user","content":"hi"}]}}\n'
    with httpx.Client(transport=httpx.MockTransport(answer)) as http:
        job_arn, input_uri = bedrock.submit(http, channel("ready"), "anthropic.claude-sonnet-4-20250514-v1:0", data,
                                            CHAT, "batch_0123abc")
    put, create = sent
    assert str(put.url) == "https://ops-bucket.s3.eu-west-1.amazonaws.com/batches/batch-0123abc/input.jsonl"
    assert put.headers["x-amz-content-sha256"] and "/s3/aws4_request" in put.headers["authorization"]
    assert str(create.url) == "https://bedrock.eu-west-1.amazonaws.com/model-invocation-job"
    assert "/eu-west-1/bedrock/aws4_request" in create.headers["authorization"]
    body = httpx.Response(200, content=create.content).json()
    assert body["modelId"] == "eu.anthropic.claude-sonnet-4-20250514-v1:0"  # a profile-only model's profile
    assert (body["clientRequestToken"], body["modelInvocationType"]) == ("batch-0123abc", "Converse")
    assert job_arn.endswith("/abcdefghijkl") and input_uri == "s3://ops-bucket/batches/batch-0123abc/input.jsonl"


def test_batch_settings_belong_to_a_bedrock_channel():
    role = "arn:aws:iam::123456789012:role/r"
    spec = {"name": "x", "models": ["*"], "batch": {"s3_uri": "s3://b-1/p", "role_arn": role}}
    with pytest.raises(ValueError, match="only a bedrock channel"):
        spec_model().model_validate({**spec, "protocol": "chat", "base_url": "http://c"})
    with pytest.raises(ValueError, match="role_arn"):
        spec_model().model_validate({**spec, "protocol": "bedrock", "batch": {"s3_uri": "s3://b-1/p",
                                                                              "role_arn": "role"}})
    made = channel_of(spec_model().model_validate({**spec, "protocol": "bedrock"}), KEYS)
    assert made.bedrock_batch == BedrockBatch(s3_uri="s3://b-1/p", role_arn=role)
    # Its jobs are signed for the key's Region: a channel whose region says otherwise is refused.
    with pytest.raises(ChannelsConfigError, match="batch: the key's Region"):
        channel_of(spec_model().model_validate({**spec, "protocol": "bedrock", "region": "us-west-2"}), KEYS)
