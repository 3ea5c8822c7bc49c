"""Amazon Bedrock batch inference, as a `bedrock` channel's upstream runs a batch.

Operations from botocore's service model of `bedrock` (2023-04-20; signing name `bedrock`, the
control-plane host `bedrock.{region}.amazonaws.com`, not bedrock-runtime) and AWS's API reference
(API_CreateModelInvocationJob.html, API_GetModelInvocationJob.html, API_StopModelInvocationJob.html):

- Submit: the lines written to the channel's S3 location as JSONL records `{recordId, modelInput}`
  (AWS's batch-inference-data guide: `recordId` an 11-character alphanumeric string), each
  `modelInput` a Converse request body (`formats.convert_request`, as the channel's Converse
  calls build it), then `POST /model-invocation-job` with `jobName`, `roleArn`, `modelId` (a
  profile-only model as its inference profile, `upstreams.bedrock.profiled_id`),
  `inputDataConfig.s3InputDataConfig.s3Uri`, `outputDataConfig.s3OutputDataConfig.s3Uri`,
  `modelInvocationType: "Converse"` (the `ModelInvocationType` enum) and `clientRequestToken`,
  the gateway's batch id (`[a-zA-Z0-9]{1,256}(-*[a-zA-Z0-9]){0,256}`: its `_` written as `-`).
  The answer is `{jobArn}`.
- Poll: `GET /model-invocation-job/{jobIdentifier}` (the job id, the ARN's last part): `status`
  one of Submitted, Validating, Scheduled, InProgress, Stopping, Completed, PartiallyCompleted,
  Failed, Stopped, Expired (`ModelInvocationJobStatus`).
- Collect: `<output s3Uri>/<job id>/<input file name>.out` (batch-inference-results.html: one
  output JSONL per input file; for Converse jobs `modelOutput` is the Converse response body,
  "an error object replaces the modelOutput field" as `{errorCode, errorMessage}`), each record
  matched back by its recordId and converted to the client's dialect. A stopped or expired job
  has the records it processed (langchain4j#5797 reads them; Bedrock bills them).
- Cancel: `POST /model-invocation-job/{jobIdentifier}/stop`.

Every call (S3's too) is signed with SigV4 by botocore with the channel's own IAM keys
(`AK|SK|REGION`): the bucket and the job's role are the operator's, in the channel's account, so
the gateway's functions need no grant for them. A channel on the function's role or a Bedrock API
key runs no batches (an API key does not reach S3).
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any
from urllib.parse import quote, urlsplit

import httpx

from gateway.formats.convert import convert_request, convert_response
from gateway.routing.channel import BedrockBatch, Channel
from gateway.tasks.adapter import Sender, TaskSnapshot, poll, send
from gateway.tasks.adapter import submit as adapter_submit
from gateway.tasks.families.batch.lines import Line
from gateway.upstreams.bedrock import ERRORS, default_url, error_code, key_region, profiled_id, static_keys
from gateway.upstreams.errors import UpstreamError

#: The client's dialect of each batch endpoint (a Converse job answers chat, not embeddings).
DIALECTS = {"/v1/chat/completions": "chat", "/v1/responses": "responses"}
RUNNING = {"Submitted": "validating", "Validating": "validating", "Scheduled": "validating",
           "InProgress": "in_progress", "Stopping": "cancelling"}
ENDED = {"Completed": "completed", "PartiallyCompleted": "completed", "Failed": "failed", "Stopped": "cancelled",
         "Expired": "expired"}
INPUT_NAME = "input.jsonl"
_XML_FIELD = re.compile(r"<(Code|Message)>([^<]*)</\1>")


def min_records(channel: Channel) -> int | None:
    """The fewest lines a batch on the channel may have, or None when it runs no Bedrock batch
    inference: it must name its S3 location and role (`BedrockBatch`) and hold an IAM user's keys
    to sign with."""
    if channel.bedrock_batch is None or static_keys(channel.api_key) is None:
        return None
    return channel.bedrock_batch.min_records


def _settings(channel: Channel) -> BedrockBatch:
    if channel.bedrock_batch is None:
        raise UpstreamError(400, f"channel {channel.name} names no batch S3 location and role", retryable=True)
    return channel.bedrock_batch


def _region(api_key: str) -> str:
    return key_region(api_key) or "us-east-1"


def _signed(api_key: str, method: str, url: str, content: bytes, headers: dict[str, str], *,
            service: str) -> httpx.Request:
    from botocore.auth import S3SigV4Auth, SigV4Auth
    from botocore.awsrequest import AWSRequest
    from botocore.credentials import Credentials

    keys = static_keys(api_key)
    if keys is None:
        raise UpstreamError(403, "a bedrock channel runs batches with its own IAM keys (AK|SK|REGION)",
                            retryable=True)
    request = AWSRequest(method=method, url=url, data=content, headers=headers)
    signer = S3SigV4Auth if service == "s3" else SigV4Auth
    signer(Credentials(*keys), service, _region(api_key)).add_auth(request)  # per attempt: its timestamp
    return httpx.Request(method, url, content=content, headers=dict(request.headers.items()))


def _control(base_url: str, api_key: str, method: str, path: str, payload: dict[str, Any] | None) -> httpx.Request:
    """A signed control-plane request: to AWS's `bedrock.{region}` host for a channel on AWS's
    runtime host, else to the channel's own base URL (a proxy or a stand-in serving both)."""
    region = _region(api_key)
    root = base_url.rstrip("/")
    if root == default_url(region):
        root = f"https://bedrock.{region}.amazonaws.com"
    content = json.dumps(payload, separators=(",", ":")).encode() if payload is not None else b""
    return _signed(api_key, method, root + path, content,
                   {"content-type": "application/json", "accept": "application/json"}, service="bedrock")


def _json(response: httpx.Response, *, retry_unreadable: bool) -> dict[str, Any]:
    """The JSON object of a 2xx answer, else Bedrock's error by its `x-amzn-ErrorType` code."""
    try:
        body = response.json()
    except ValueError:
        body = None
    if not response.is_success:
        message = ((body.get("message") or body.get("Message")) if isinstance(body, dict) else None) \
            or response.text[:300] or response.reason_phrase
        code = error_code(body, response.headers)
        raise ERRORS.error(response.status_code, f"upstream answered {response.status_code} {code or ''}: {message}",
                           {"message": message, **({"__type": code} if code else {})})
    if not isinstance(body, dict):
        raise UpstreamError(502, f"upstream answered {response.status_code} without a JSON object",
                            retryable=retry_unreadable)
    return body


class ModelInvocationJobAdapter:
    """The task adapter's shape: CreateModelInvocationJob (its records already in S3) and
    GetModelInvocationJob, each signed with the channel's keys."""

    def build_submit(self, base_url: str, api_key: str, upstream_model: str, request: dict) -> httpx.Request:
        return _control(base_url, api_key, "POST", "/model-invocation-job", request)

    def parse_submit(self, response: httpx.Response) -> str:
        job_arn = _json(response, retry_unreadable=False).get("jobArn")
        if not isinstance(job_arn, str) or not job_arn:
            raise UpstreamError(502, "the upstream created the batch inference job without its jobArn",
                                retryable=False)
        return job_arn

    def build_poll(self, base_url: str, api_key: str, upstream_task_id: str) -> httpx.Request:
        return _control(base_url, api_key, "GET", f"/model-invocation-job/{_job_id(upstream_task_id)}", None)

    def parse_poll(self, response: httpx.Response) -> TaskSnapshot:
        job = _json(response, retry_unreadable=True)
        return TaskSnapshot(status="in_progress", upstream_status=str(job.get("status") or ""), progress=None,
                            result_urls=[], error=None, duration=None, raw=job)


ADAPTER = ModelInvocationJobAdapter()


def _bucket_key(uri: str) -> tuple[str, str]:
    parts = urlsplit(uri)
    return parts.netloc, parts.path.lstrip("/")


def _object_url(channel: Channel, uri: str) -> str:
    """An object's URL: path-style on the channel's `s3_endpoint`, else virtual-hosted on the
    Region's S3 (docs.aws.amazon.com/AmazonS3/latest/userguide/VirtualHosting.html)."""
    bucket, key = _bucket_key(uri)
    settings = _settings(channel)
    if settings.s3_endpoint:
        return f"{settings.s3_endpoint}/{bucket}/{quote(key, safe='/~')}"
    return f"https://{bucket}.s3.{_region(channel.api_key)}.amazonaws.com/{quote(key, safe='/~')}"


def _s3(http: Sender, channel: Channel, method: str, uri: str, content: bytes = b"") -> httpx.Response | None:
    """One S3 object call; None for a GET of an object that does not exist."""
    headers = {"content-type": "application/jsonl"} if method == "PUT" else {}
    # A PUT of the same bytes to the same key may be repeated: it is the same object.
    response = send(http, _signed(channel.api_key, method, _object_url(channel, uri), content, headers,
                                  service="s3"), repeatable=True)
    if response.is_success:
        return response
    found = dict(_XML_FIELD.findall(response.text))  # S3 answers errors in XML: <Error><Code>, <Message>
    if method == "GET" and response.status_code == 404 and found.get("Code", "NoSuchKey") == "NoSuchKey":
        return None
    retryable = response.status_code >= 500 or response.status_code in (408, 429)
    raise UpstreamError(response.status_code, f"S3 answered {response.status_code} {found.get('Code', '')}: "
                        f"{found.get('Message') or response.reason_phrase}", retryable=retryable)


def record_id(number: int) -> str:
    """A line's recordId: 11 alphanumeric characters (AWS's batch-inference-data guide), by its number."""
    return f"L{number:010d}"


def _job_id(job_arn: str) -> str:
    return job_arn.rsplit("/", 1)[-1]


def submit(http: Sender, channel: Channel, upstream_model: str, data: bytes, endpoint: str,
           batch_id: str) -> tuple[str, str]:
    """Writes the records to S3 and creates the job; (the job's ARN, the input's S3 URI)."""
    dialect = DIALECTS.get(endpoint)
    if dialect is None:
        raise UpstreamError(400, f"a bedrock channel cannot run a batch of {endpoint}", retryable=True)
    settings = _settings(channel)
    records = []
    for number, raw in enumerate(data.split(b"\n"), start=1):
        if raw.strip():
            line = json.loads(raw)
            body = convert_request(line["body"], source=dialect, target="converse", model=upstream_model,
                                   stream=False)
            records.append(json.dumps({"recordId": record_id(number), "modelInput": body}, separators=(",", ":"),
                                      ensure_ascii=False))
    token = batch_id.replace("_", "-")
    where = f"{settings.s3_uri}/{token}"
    input_uri = f"{where}/{INPUT_NAME}"
    _s3(http, channel, "PUT", input_uri, ("\n".join(records) + "\n").encode())
    model_id = profiled_id(upstream_model, _region(channel.api_key), channel.global_profiles)
    job_arn = adapter_submit(http, ADAPTER, channel.base_url, channel.api_key, model_id, {
        "jobName": token[:63], "roleArn": settings.role_arn, "clientRequestToken": token, "modelId": model_id,
        "modelInvocationType": "Converse",
        "inputDataConfig": {"s3InputDataConfig": {"s3Uri": input_uri, "s3InputFormat": "JSONL"}},
        "outputDataConfig": {"s3OutputDataConfig": {"s3Uri": f"{where}/output/"}}})
    return job_arn, input_uri


def retrieve(http: Sender, channel: Channel, job_arn: str) -> dict[str, Any]:
    return poll(http, ADAPTER, channel.base_url, channel.api_key, job_arn).raw


def cancel(http: Sender, channel: Channel, job_arn: str) -> dict[str, Any]:
    request = _control(channel.base_url, channel.api_key, "POST", f"/model-invocation-job/{_job_id(job_arn)}/stop",
                       None)
    return _json(send(http, request, repeatable=True), retry_unreadable=True)


def progress(job: dict[str, Any], cancel_requested: bool) -> tuple[str, str | None]:
    """(the word OpenAI shows while it runs, OpenAI's final status once the job has ended, else None)."""
    status = str(job.get("status") or "")
    if status in ENDED:
        return status, ENDED[status]
    return RUNNING.get(status, "in_progress"), None


def collect(http: Sender, channel: Channel, job: dict[str, Any], lines: Sequence[Line], endpoint: str,
            model: str) -> list[dict[str, Any]]:
    """The ended job's records as OpenAI output lines, by the client's ids (our recordIds are the
    lines' numbers; without the input file, deleted meanwhile, the recordIds are kept as ids)."""
    by_record = {record_id(line.number): line.custom_id for line in lines} if lines else None
    output = ((job.get("outputDataConfig") or {}).get("s3OutputDataConfig") or {}).get("s3Uri")
    source = ((job.get("inputDataConfig") or {}).get("s3InputDataConfig") or {}).get("s3Uri")
    if not isinstance(output, str) or not isinstance(source, str):
        return []
    name = source.rstrip("/").rsplit("/", 1)[-1]
    response = _s3(http, channel, "GET", f"{output.rstrip('/')}/{_job_id(str(job.get('jobArn') or ''))}/{name}.out")
    if response is None:  # a job that failed before it wrote anything
        return []
    dialect = DIALECTS.get(endpoint, "chat")
    found: list[dict[str, Any]] = []
    for raw in response.content.split(b"\n"):
        if not raw.strip():
            continue
        try:
            record = json.loads(raw)
        except ValueError:
            raise UpstreamError(502, "the job's output holds a line that is not JSON", retryable=True) from None
        recorded = str(record.get("recordId") or "") if isinstance(record, dict) else ""
        custom_id = recorded if by_record is None else by_record.get(recorded)
        if not custom_id:
            continue
        if isinstance(record.get("modelOutput"), dict):
            body = convert_response(record["modelOutput"], source="converse", target=dialect, model=model)
            found.append({"custom_id": custom_id, "response": {"status_code": 200, "body": body}})
        elif isinstance(record.get("error"), dict):
            error = record["error"]
            code = error.get("errorCode")
            status = code if isinstance(code, int) and 400 <= code < 600 else 500
            found.append({"custom_id": custom_id, "response": {"status_code": status, "body": {
                "error": {"message": str(error.get("errorMessage") or "the request failed"),
                          "type": "upstream_error", "param": None, "code": None}}}})
    return found
