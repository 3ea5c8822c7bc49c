"""Gemini's batch mode, simulated under the content simulator (`/content/v1beta/...`).

Rules, each from its source:
- `POST /v1beta/models/{model}:batchGenerateContent`, body `{batch: {displayName, inputConfig,
  priority?}}`, `displayName` and `inputConfig` required (ai.google.dev/api/batch-mode, the
  `GenerateContentBatch` resource; python-genai `batches.py` `_CreateBatchJobParameters_to_mldev`
  writes `['batch','inputConfig']` and `['batch','displayName']`).
- Inline input `inputConfig.requests.requests[] = {request: GenerateContentRequest, metadata?}`
  (python-genai `_BatchJobSource_to_mldev`, `_InlinedRequest_to_mldev`); each request is checked as
  a generateContent body (the content simulator's own schema) and its total under 20 MB
  (ai.google.dev/gemini-api/docs/batch-mode: "total request size ... under 20MB"). `fileName`
  input (a Files API upload) is not simulated: refused with 400.
- The answer and `GET /v1beta/batches/{id}` are an Operation: `name: "batches/{id}"`,
  `metadata: {model, displayName, state, createTime, updateTime, endTime?, batchStats, output?}`,
  `done` (python-genai `_BatchJob_from_mldev` reads `name` and `metadata.*`). `batchStats`
  counts are int64 written as strings (proto3 JSON mapping of int64; the research notes cite
  a third-party binding's `successfulRequestCount`).
- States `BATCH_STATE_PENDING`, `_RUNNING`, `_SUCCEEDED`, `_FAILED`, `_CANCELLED`, `_EXPIRED`
  (python-genai `_transformers.t_job_state`).
- When done: `metadata.output.inlinedResponses.inlinedResponses[] = {response | error,
  metadata}` in the input's order (python-genai `_BatchJobDestination_from_mldev`,
  `types.BatchJobDestination`: "same order as the input requests"); the Operation's `response`
  holds the same output (an Operation's result, google/longrunning/operations.proto). A request
  refused is a `google.rpc.Status` whose `code` is the RPC code (`RPC_CODES`), not the HTTP status.
- `POST /v1beta/batches/{id}:cancel` (python-genai `batches.py` `'batches/{name}:cancel'`)
  answers `{}` (an `Empty`, the method's return type in the API reference).
- Unknown batch: 404 NOT_FOUND in Google's error envelope; no key: 401 as the other routes.

The sources do not say what a cancelled batch's output holds. This simulator keeps the responses
finished before the cancel, the case the gateway's billing must get right (it pays only lines
with a response). Each request is answered in-process by the content simulator's own
generateContent route, so its usage is the same request's synchronously. A batch runs at its first
retrieve and ends `GATEWAY_SIM_TASK_SECONDS` after its creation; `#batch=stall` in a request
stops it there (`BATCH_STATE_RUNNING`) until it is cancelled; a batch cancelled before it ran
runs nothing.
"""

from __future__ import annotations

import json
import time
import uuid
from typing import Any

import httpx
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from gateway.errors import InvalidRequest
from gateway.schemas.text.content import ContentRequest
from gateway.validation import parse_model
from gateway_local.simulators.openai_batch import STALL, task_seconds

clock = time.time  # tests replace this to move batches along without waiting
BATCHES: dict[str, dict[str, Any]] = {}
MAX_INLINE_BYTES = 20 * 1000 * 1000
_STATUSES = {400: "INVALID_ARGUMENT", 401: "UNAUTHENTICATED", 404: "NOT_FOUND"}
#: A status name -> its google.rpc.Code number: a batch's failed request is a `google.rpc.Status`
#: (`InlinedResponse.error`, python-genai `types.py`), whose `code` is the RPC code, not the HTTP
#: status (googleapis `google/rpc/code.proto`).
RPC_CODES = {"CANCELLED": 1, "UNKNOWN": 2, "INVALID_ARGUMENT": 3, "DEADLINE_EXCEEDED": 4, "NOT_FOUND": 5,
             "PERMISSION_DENIED": 7, "RESOURCE_EXHAUSTED": 8, "FAILED_PRECONDITION": 9, "INTERNAL": 13,
             "UNAVAILABLE": 14, "UNAUTHENTICATED": 16}


def _error(status: int, message: str) -> JSONResponse:
    return JSONResponse({"error": {"code": status, "message": message, "status": _STATUSES[status]}},
                        status_code=status)


def _key(request: Request) -> str:
    return request.headers.get("x-goog-api-key", "").strip() or request.query_params.get("key", "").strip()


def _time(seconds: float | None) -> str | None:
    return None if seconds is None else time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(seconds))


def _operation(batch: dict[str, Any]) -> dict[str, Any]:
    results = batch["_results"]
    failed = sum(1 for result in results if "error" in result)
    ended = batch["_ended"] is not None
    metadata: dict[str, Any] = {
        "model": batch["model"], "displayName": batch["displayName"], "state": batch["state"],
        "createTime": _time(batch["_created"]), "updateTime": _time(batch["_updated"]),
        "batchStats": {"requestCount": str(len(batch["_requests"])),
                       "successfulRequestCount": str(len(results) - failed), "failedRequestCount": str(failed),
                       "pendingRequestCount": str(0 if ended else len(batch["_requests"]) - len(results))}}
    operation: dict[str, Any] = {"name": batch["name"], "metadata": metadata, "done": ended}
    if ended:
        metadata["endTime"] = _time(batch["_ended"])
        output = {"inlinedResponses": {"inlinedResponses": results}}
        metadata["output"] = output
        operation["response"] = output
    return operation


async def create(request: Request, model: str) -> Response:
    """`models/{model}:batchGenerateContent` (routed here by the content simulator's model route)."""
    if not _key(request):
        return _error(401, "Method doesn't allow unregistered callers. Please use an API key.")
    raw = await request.body()
    try:
        body = json.loads(raw)
    except ValueError:
        return _error(400, "Invalid JSON payload received.")
    batch = body.get("batch") if isinstance(body, dict) else None
    if not isinstance(batch, dict):
        return _error(400, "batch: is required")
    for field in ("displayName", "inputConfig"):
        if not batch.get(field):
            return _error(400, f"batch.{field}: is required")
    config = batch["inputConfig"]
    if not isinstance(config, dict) or "fileName" in config:
        return _error(400, "batch.inputConfig: only inline requests are simulated")
    requests = (config.get("requests") or {}).get("requests") if isinstance(config.get("requests"), dict) else None
    if not isinstance(requests, list) or not requests:
        return _error(400, "batch.inputConfig.requests.requests: must hold at least one request")
    if len(raw) >= MAX_INLINE_BYTES:
        return _error(400, "batch.inputConfig: inline requests must total under 20MB")
    for index, entry in enumerate(requests):
        inner = entry.get("request") if isinstance(entry, dict) else None
        if not isinstance(inner, dict):
            return _error(400, f"batch.inputConfig.requests.requests[{index}].request: is required")
        try:
            parse_model(ContentRequest, {k: v for k, v in inner.items() if k != "model"})
        except InvalidRequest as exc:
            return _error(400, f"batch.inputConfig.requests.requests[{index}].request: {exc.message}")
    name = "batches/" + uuid.uuid4().hex[:20]
    now = clock()
    found: dict[str, Any] = {
        "name": name, "model": f"models/{model}", "displayName": batch["displayName"],
        "state": "BATCH_STATE_PENDING", "_requests": requests, "_results": [], "_created": now, "_updated": now,
        "_ended": None, "_cancelled": False, "_stalled": False, "_ran": False, "_key": _key(request)}
    BATCHES[name] = found
    return JSONResponse(_operation(found))


async def _run(batch: dict[str, Any]) -> None:
    from gateway_local.simulators.content import routes_app  # the generateContent route, without faults

    batch["state"] = "BATCH_STATE_RUNNING"
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=routes_app), base_url="http://sim") as client:
        for entry in batch["_requests"]:
            if STALL in json.dumps(entry["request"]):
                batch["_stalled"] = True
                return
            inner = {k: v for k, v in entry["request"].items() if k != "model"}
            model = str(entry["request"].get("model") or batch["model"]).removeprefix("models/")
            answer = await client.post(f"/v1beta/models/{model}:generateContent", json=inner,
                                       headers={"x-goog-api-key": batch["_key"]})
            if answer.is_success:
                result: dict[str, Any] = {"response": answer.json()}
            else:
                error = answer.json().get("error") or {}
                result = {"error": {"code": RPC_CODES.get(str(error.get("status")), 2),
                                    "message": str(error.get("message") or "")}}
            if entry.get("metadata") is not None:
                result["metadata"] = entry["metadata"]
            batch["_results"].append(result)


def _end(batch: dict[str, Any], state: str) -> None:
    batch["state"], batch["_ended"] = state, clock()
    batch["_updated"] = batch["_ended"]


async def _advance(batch: dict[str, Any]) -> None:
    if batch["_ended"] is not None:
        return
    batch["_updated"] = clock()
    if batch["_cancelled"]:
        _end(batch, "BATCH_STATE_CANCELLED")
    elif not batch["_ran"]:
        batch["_ran"] = True
        await _run(batch)
    elif not batch["_stalled"] and clock() - batch["_created"] >= task_seconds():
        _end(batch, "BATCH_STATE_SUCCEEDED")


async def batch_route(request: Request) -> Response:
    """`GET /v1beta/batches/{id}` and `POST /v1beta/batches/{id}:cancel`."""
    if not _key(request):
        return _error(401, "Method doesn't allow unregistered callers. Please use an API key.")
    rest = str(request.path_params["rest"])
    name, _, action = rest.partition(":")
    batch = BATCHES.get(f"batches/{name}")
    if batch is None:
        return _error(404, f"Batch batches/{name} not found.")
    if request.method == "POST":
        if action != "cancel":
            return _error(404, f"batches/{rest}: unknown method")
        if batch["_ended"] is None:
            batch["_cancelled"] = True
        return JSONResponse({})
    if action:
        return _error(404, f"batches/{rest}: unknown method")
    await _advance(batch)
    return JSONResponse(_operation(batch))
