"""Amazon Bedrock batch inference, simulated under the bedrock simulator (`/bedrock/...`), with the
S3 bucket its jobs read and write (`/bedrock/s3/{bucket}/{key}`, path-style).

Rules, each from its source:
- The control plane's operations (botocore's service model of `bedrock`, 2023-04-20):
  CreateModelInvocationJob `POST /model-invocation-job`, GetModelInvocationJob
  `GET /model-invocation-job/{jobIdentifier}`, StopModelInvocationJob
  `POST /model-invocation-job/{jobIdentifier}/stop`, signed with SigV4 for the signing name
  `bedrock` (the runtime's checks, `rules.bedrock.signature_refusal`). A create's body is checked
  by botocore's validator against `CreateModelInvocationJobRequest` (required jobName, roleArn,
  modelId, inputDataConfig, outputDataConfig; the members' patterns are not checked by botocore,
  so the S3 URIs and the token are matched here against the model's `S3Uri` and
  `ModelInvocationIdempotencyToken` patterns). The answer is `{jobArn}`
  (`arn:aws:bedrock:{region}:{account}:model-invocation-job/[a-z0-9]{12}`); a job is found by its
  ARN or its 12-character id (`ModelInvocationJobIdentifier`). A create repeated with the same
  `clientRequestToken` answers the same job (the token's documentation: "a unique,
  case-sensitive identifier to ensure that the API request completes no more than one time").
- Input (docs.aws.amazon.com/bedrock/latest/userguide/batch-inference-data.html): JSONL records
  `{recordId, modelInput}` at the input URI; with `modelInvocationType: "Converse"` each
  `modelInput` is a Converse body (checked as the runtime's Converse is). A job with fewer
  records than the account's "Minimum number of records per batch inference job" quota
  (`MIN_RECORDS`; 100 by default here, users report 100 and 1,000: BAML#3036, langchain-aws#250)
  is refused with a ValidationException.
- Statuses (`ModelInvocationJobStatus`): Submitted, then InProgress at its first read, Completed
  `GATEWAY_SIM_TASK_SECONDS` after its creation; a stop makes it Stopping, then Stopped.
  `totalRecordCount`, `processedRecordCount`, `successRecordCount`, `errorRecordCount` as the
  job goes.
- Output (batch-inference-results.html): when the job ends, `<output s3Uri>/<job id>/<input
  file name>.out` holds `{recordId, modelInput, modelOutput}` per processed record ("for Converse
  jobs, the format matches the response body of the Converse API"), or `error: {errorCode,
  errorMessage}` in place of modelOutput, and `manifest.json.out` the counts. A stopped job keeps
  the records it processed (Bedrock bills them; langchain4j#5797 reads a stopped job's output).
- S3 (docs.aws.amazon.com/AmazonS3/latest/API/API_PutObject.html, API_GetObject.html): PUT and GET
  of an object, SigV4 for the signing name `s3` with the payload's SHA-256
  (`x-amz-content-sha256`, botocore's `S3SigV4Auth`); a missing object is 404 `NoSuchKey` in
  S3's XML error.

Each record is answered in-process by the simulator's own Converse route (signed with the
simulator's IAM user), so its usage is the same request's synchronously; `#batch=stall` in a
record stops the job there (InProgress) until it is stopped.
"""

from __future__ import annotations

import datetime
import functools
import hashlib
import json
import re
import time
import uuid
from typing import Any
from urllib.parse import quote, unquote, urlsplit

import httpx
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from gateway_local.simulators.openai_batch import STALL, task_seconds

from .rules import bedrock as rules

clock = time.time  # tests replace this to move jobs along without waiting
MIN_RECORDS = 100
ACCOUNT = "123456789012"
JOBS: dict[str, dict[str, Any]] = {}
OBJECTS: dict[tuple[str, str], bytes] = {}
_S3_URI = re.compile(r"^s3://[a-z0-9][-.a-z0-9]{1,61}[a-z0-9](?:/[-!_*'().a-z0-9A-Z]+(?:/[-!_*'().a-z0-9A-Z]+)*)?/?$")
_TOKEN = re.compile(r"^[a-zA-Z0-9]{1,256}(-*[a-zA-Z0-9]){0,256}$")
_ENDED = ("Completed", "PartiallyCompleted", "Failed", "Stopped", "Expired")


def _error(status: int, code: str, message: str) -> JSONResponse:
    from .bedrock import error

    return error(status, code, message)


def _s3_error(status: int, code: str, message: str) -> Response:
    return Response(f'<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>{code}</Code><Message>{message}'
                    "</Message></Error>", status_code=status, media_type="application/xml")


async def _signed(request: Request, service: str) -> tuple[bytes, str | None] | Response:
    """(the body, the signing Region) of a request signed by a known key, else its refusal."""
    raw_path = request.scope.get("raw_path") or request.url.path.encode()
    encoded = raw_path.decode("latin-1")
    body = await request.body()
    headers = {k.lower(): v for k, v in request.headers.items()}
    url = f"{request.url.scheme}://{headers.get('host', '')}{encoded}"
    refused = rules.signature_refusal(request.method, url, headers, body, datetime.datetime.now(datetime.UTC),
                                      service_name=service)
    if refused:
        return _s3_error(403, "SignatureDoesNotMatch", refused[1]) if service == "s3" else _error(403, *refused)
    return body, rules.signing_region(headers)


def _split(uri: str) -> tuple[str, str]:
    parts = urlsplit(uri)
    return parts.netloc, parts.path.lstrip("/")


async def s3_object(request: Request) -> Response:
    """PUT and GET `/s3/{bucket}/{key}`."""
    checked = await _signed(request, "s3")
    if isinstance(checked, Response):
        return checked
    body, _ = checked
    key = (str(request.path_params["bucket"]), unquote(str(request.path_params["key"])))
    if request.method == "PUT":
        OBJECTS[key] = body
        return Response(status_code=200, headers={"ETag": '"' + hashlib.md5(body).hexdigest() + '"'})
    if key not in OBJECTS:
        return _s3_error(404, "NoSuchKey", "The specified key does not exist.")
    return Response(OBJECTS[key], media_type="application/octet-stream")


def _public(job: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in job.items() if not k.startswith("_")}


@functools.cache
def _control_plane() -> Any:
    import botocore.session

    return botocore.session.get_session().get_service_model("bedrock")


async def create(request: Request) -> Response:
    checked = await _signed(request, "bedrock")
    if isinstance(checked, Response):
        return checked
    raw, region = checked
    try:
        body = json.loads(raw)
    except ValueError:
        return _error(400, "SerializationException", "Could not parse the request body as JSON.")
    from botocore.validate import ParamValidator

    shape = _control_plane().operation_model("CreateModelInvocationJob").input_shape
    report = ParamValidator().validate(body, shape)
    if report.has_errors():
        return _error(400, "ValidationException", report.generate_report())
    token = body.get("clientRequestToken")
    if token is not None and not _TOKEN.match(token):
        return _error(400, "ValidationException", "1 validation error detected: Value at 'clientRequestToken' "
                      "failed to satisfy constraint: Member must satisfy regular expression pattern")
    for existing in JOBS.values():
        if token is not None and existing["clientRequestToken"] == token:
            return JSONResponse({"jobArn": existing["jobArn"]})
    input_uri = body["inputDataConfig"].get("s3InputDataConfig", {}).get("s3Uri", "")
    output_uri = body["outputDataConfig"].get("s3OutputDataConfig", {}).get("s3Uri", "")
    for name, uri in (("inputDataConfig.s3InputDataConfig.s3Uri", input_uri),
                      ("outputDataConfig.s3OutputDataConfig.s3Uri", output_uri)):
        if not _S3_URI.match(uri):
            return _error(400, "ValidationException", f"{name}: not an S3 URI")
    data = OBJECTS.get(_split(input_uri))
    if data is None:
        return _error(400, "ValidationException", f"The provided S3 input location {input_uri} does not exist.")
    records = []
    for raw_record in data.split(b"\n"):
        if raw_record.strip():
            record = json.loads(raw_record)
            if not isinstance(record, dict) or not isinstance(record.get("modelInput"), dict):
                return _error(400, "ValidationException", "Each record is {recordId, modelInput}.")
            records.append(record)
    if len(records) < MIN_RECORDS:
        return _error(400, "ValidationException", f"The input file contains {len(records)} records, fewer than the "
                      f"minimum of {MIN_RECORDS} records per batch inference job.")
    job_id = uuid.uuid4().hex[:12]
    now = clock()
    job: dict[str, Any] = {
        "jobArn": f"arn:aws:bedrock:{region or 'us-east-1'}:{ACCOUNT}:model-invocation-job/{job_id}",
        "jobName": body["jobName"], "modelId": body["modelId"], "clientRequestToken": token,
        "roleArn": body["roleArn"], "status": "Submitted", "submitTime": _time(now),
        "inputDataConfig": body["inputDataConfig"], "outputDataConfig": body["outputDataConfig"],
        "modelInvocationType": body.get("modelInvocationType") or "InvokeModel",
        "totalRecordCount": len(records), "processedRecordCount": 0, "successRecordCount": 0,
        "errorRecordCount": 0, "_records": records, "_results": [], "_created": now, "_ran": False,
        "_stalled": False, "_stop": False}
    JOBS[job_id] = job
    return JSONResponse({"jobArn": job["jobArn"]})


def _time(seconds: float) -> str:
    return datetime.datetime.fromtimestamp(seconds, datetime.UTC).isoformat().replace("+00:00", "Z")


async def _run(job: dict[str, Any]) -> None:
    """Each record through the simulator's own Converse route, in-process, signed as its IAM user."""
    from botocore.auth import SigV4Auth
    from botocore.awsrequest import AWSRequest
    from botocore.credentials import Credentials

    from .bedrock import app

    job["status"] = "InProgress"
    model = job["modelId"]
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://sim") as client:
        for record in job["_records"]:
            if STALL in json.dumps(record["modelInput"]):
                job["_stalled"] = True
                return
            url = f"http://sim/model/{quote(model, safe='')}/converse"
            content = json.dumps(record["modelInput"]).encode()
            signed = AWSRequest(method="POST", url=url, data=content, headers={"content-type": "application/json"})
            SigV4Auth(Credentials(rules.ACCESS_KEY, rules.SECRET_KEY), "bedrock", "us-east-1").add_auth(signed)
            answer = await client.post(url, content=content, headers=dict(signed.headers.items()))
            result: dict[str, Any] = {"recordId": record.get("recordId"), "modelInput": record["modelInput"]}
            if answer.is_success:
                result["modelOutput"] = answer.json()
                job["successRecordCount"] += 1
            else:
                result["error"] = {"errorCode": answer.status_code,
                                   "errorMessage": str(answer.json().get("message") or "")}
                job["errorRecordCount"] += 1
            job["processedRecordCount"] += 1
            job["_results"].append(result)


def _end(job: dict[str, Any], status: str) -> None:
    """The job's end: its output and manifest written where its output configuration says."""
    job["status"], job["endTime"] = status, _time(clock())
    output = job["outputDataConfig"]["s3OutputDataConfig"]["s3Uri"].rstrip("/")
    name = job["inputDataConfig"]["s3InputDataConfig"]["s3Uri"].rstrip("/").rsplit("/", 1)[-1]
    job_id = job["jobArn"].rsplit("/", 1)[-1]
    bucket, prefix = _split(f"{output}/{job_id}")
    OBJECTS[(bucket, f"{prefix}/{name}.out")] = "".join(json.dumps(r) + "\n" for r in job["_results"]).encode()
    OBJECTS[(bucket, f"{prefix}/manifest.json.out")] = json.dumps(
        {k: job[k] for k in ("totalRecordCount", "processedRecordCount", "successRecordCount",
                             "errorRecordCount")}).encode()


async def _advance(job: dict[str, Any]) -> None:
    if job["status"] in _ENDED:
        return
    job["lastModifiedTime"] = _time(clock())
    if job["_stop"]:
        if job["status"] == "Stopping":
            _end(job, "Stopped")
        else:
            job["status"] = "Stopping"
    elif not job["_ran"]:
        job["_ran"] = True
        await _run(job)
    elif not job["_stalled"] and clock() - job["_created"] >= task_seconds():
        _end(job, "Completed")


def _job(identifier: str) -> dict[str, Any] | None:
    return JOBS.get(unquote(identifier).rsplit("/", 1)[-1])


async def job_route(request: Request) -> Response:
    """GET `/model-invocation-job/{id}` and POST `/model-invocation-job/{id}/stop`."""
    checked = await _signed(request, "bedrock")
    if isinstance(checked, Response):
        return checked
    identifier = str(request.path_params["identifier"])
    job = _job(identifier)
    if job is None:
        return _error(404, "ResourceNotFoundException", f"The specified job {identifier} could not be found.")
    if request.method == "POST":
        if job["status"] in _ENDED:
            return _error(409, "ConflictException", f"The job is {job['status']} and cannot be stopped.")
        job["_stop"] = True
        return JSONResponse({})
    await _advance(job)
    return JSONResponse(_public(job))
