"""Anthropic's Message Batches, simulated under the messages simulator (`/messages/v1/messages/batches`).

Rules, from anthropic-sdk-python (`types/messages/batch_create_params.py`: `requests` 1..100,000,
each `{custom_id, params}`, `custom_id` matching `^[a-zA-Z0-9_-]{1,64}$` and unique;
`message_batch.py`; `message_batch_request_counts.py`; `message_batch_individual_response.py` and
the `succeeded` / `errored` / `canceled` / `expired` results; `resources/messages/batches.py`:
`results()` GETs the absolute `results_url`): a bad request list is a 400 in Anthropic's
envelope; `request_counts` other than `processing` stay 0 until the batch has ended; times are
RFC 3339 strings.

Each request is answered in-process by the messages simulator's own route, so its usage is the
same request's synchronously. A batch runs its requests at its first retrieve and ends
`GATEWAY_SIM_TASK_SECONDS` (default 3) after its creation. `#batch=stall` in a request's text stops
it there (`in_progress`) until it is cancelled; a cancel ends it with the rest `canceled`.
"""

from __future__ import annotations

import json
import re
import time
import uuid
from typing import Any

import httpx
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from gateway_local.simulators.openai_batch import STALL, task_seconds

clock = time.time  # tests replace this to move batches along without waiting
BATCHES: dict[str, dict[str, Any]] = {}
CUSTOM_ID = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
MAX_REQUESTS = 100_000


def _error(status: int, message: str, kind: str = "invalid_request_error") -> JSONResponse:
    return JSONResponse({"type": "error", "error": {"type": kind, "message": message}}, status_code=status)


def _unauthorized(request: Request) -> JSONResponse | None:
    if not request.headers.get("x-api-key") and not request.headers.get("authorization"):
        return _error(401, "x-api-key header is required", "authentication_error")
    return None


def _time(seconds: float | None) -> str | None:
    return None if seconds is None else time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(seconds))


def _counts(batch: dict[str, Any]) -> dict[str, int]:
    if batch["_ended"] is None:
        return {"processing": len(batch["_requests"]), "succeeded": 0, "errored": 0, "canceled": 0, "expired": 0}
    kinds = [result["result"]["type"] for result in batch["_results"]]
    return {"processing": 0, **{k: kinds.count(k) for k in ("succeeded", "errored", "canceled", "expired")}}


def _batch_object(batch: dict[str, Any]) -> dict[str, Any]:
    ended = batch["_ended"] is not None
    return {"id": batch["id"], "type": "message_batch",
            "processing_status": "ended" if ended else ("canceling" if batch["_cancel"] else "in_progress"),
            "request_counts": _counts(batch), "ended_at": _time(batch["_ended"]),
            "created_at": _time(batch["_created"]), "expires_at": _time(batch["_created"] + 86400),
            "archived_at": None, "cancel_initiated_at": _time(batch["_cancel"]),
            "results_url": f"{batch['_origin']}/v1/messages/batches/{batch['id']}/results" if ended else None}


async def create_batch(request: Request) -> Response:
    if (refused := _unauthorized(request)) is not None:
        return refused
    body = await request.json()
    requests = body.get("requests") if isinstance(body, dict) else None
    if not isinstance(requests, list) or not 1 <= len(requests) <= MAX_REQUESTS:
        return _error(400, f"requests: must hold 1 to {MAX_REQUESTS} requests")
    seen: set[str] = set()
    for index, entry in enumerate(requests):
        custom_id = entry.get("custom_id") if isinstance(entry, dict) else None
        if not isinstance(custom_id, str) or not CUSTOM_ID.match(custom_id):
            return _error(400, f"requests.{index}.custom_id: String should match pattern '^[a-zA-Z0-9_-]{{1,64}}$'")
        if custom_id in seen:
            return _error(400, f"requests.{index}.custom_id: duplicate custom_id '{custom_id}'")
        seen.add(custom_id)
        if not isinstance(entry.get("params"), dict):
            return _error(400, f"requests.{index}.params: Field required")
    origin = str(request.url).split("/v1/messages/batches")[0]
    batch_id = "msgbatch_" + uuid.uuid4().hex[:24]
    batch: dict[str, Any] = {"id": batch_id, "_requests": requests, "_results": [], "_created": clock(),
             "_ended": None, "_cancel": None, "_stalled": False, "_ran": False, "_origin": origin,
             "_headers": {k: v for k, v in request.headers.items() if k in ("x-api-key", "anthropic-version",
                                                                            "authorization")}}
    BATCHES[batch_id] = batch
    return JSONResponse(_batch_object(batch))


async def _run(batch: dict[str, Any]) -> None:
    from gateway_local.simulators.messages import routes_app  # the messages route, without provider faults

    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=routes_app), base_url="http://sim") as client:
        for entry in batch["_requests"]:
            if STALL in json.dumps(entry["params"]):
                batch["_stalled"] = True
                return
            answer = await client.post("/v1/messages", json=entry["params"], headers=batch["_headers"])
            body = answer.json()
            result = {"type": "succeeded", "message": body} if answer.is_success else \
                {"type": "errored", "error": body}
            batch["_results"].append({"custom_id": entry["custom_id"], "result": result})


def _end(batch: dict[str, Any], rest: str) -> None:
    done = {result["custom_id"] for result in batch["_results"]}
    batch["_results"] += [{"custom_id": entry["custom_id"], "result": {"type": rest}}
                          for entry in batch["_requests"] if entry["custom_id"] not in done]
    batch["_ended"] = clock()


async def _advance(batch: dict[str, Any]) -> None:
    if batch["_ended"] is not None:
        return
    if not batch["_ran"]:
        batch["_ran"] = True
        await _run(batch)
    elif batch["_cancel"] is not None:
        _end(batch, "canceled")
    elif not batch["_stalled"] and clock() - batch["_created"] >= task_seconds():
        _end(batch, "expired")


def _found(request: Request) -> dict[str, Any] | JSONResponse:
    batch = BATCHES.get(str(request.path_params["batch_id"]))
    return batch if batch is not None else _error(404, "Batch not found", "not_found_error")


async def get_batch(request: Request) -> Response:
    if (refused := _unauthorized(request)) is not None:
        return refused
    batch = _found(request)
    if isinstance(batch, JSONResponse):
        return batch
    await _advance(batch)
    return JSONResponse(_batch_object(batch))


async def cancel_batch(request: Request) -> Response:
    if (refused := _unauthorized(request)) is not None:
        return refused
    batch = _found(request)
    if isinstance(batch, JSONResponse):
        return batch
    if batch["_ended"] is None and batch["_cancel"] is None:
        batch["_cancel"] = clock()
    return JSONResponse(_batch_object(batch))


async def results(request: Request) -> Response:
    if (refused := _unauthorized(request)) is not None:
        return refused
    batch = _found(request)
    if isinstance(batch, JSONResponse):
        return batch
    if batch["_ended"] is None:
        return _error(400, f"Batch {batch['id']} has not ended processing yet")
    data = "".join(json.dumps(result) + "\n" for result in batch["_results"])
    return Response(data, media_type="application/binary")


routes = [
    Route("/v1/messages/batches", create_batch, methods=["POST"]),
    Route("/v1/messages/batches/{batch_id}", get_batch, methods=["GET"]),
    Route("/v1/messages/batches/{batch_id}/cancel", cancel_batch, methods=["POST"]),
    Route("/v1/messages/batches/{batch_id}/results", results, methods=["GET"]),
]
