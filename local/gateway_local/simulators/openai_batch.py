"""OpenAI's Files and Batch API, simulated under the chat simulator (`/chat/v1/files`, `/chat/v1/batches`).

Rules, from openai-python (`types/file_object.py`, `file_create_params.py`, `batch_create_params.py`,
`types/batch.py`, `batch_request_counts.py`) and openai-openapi (`BatchRequestInput`,
`BatchRequestOutput`, the 404 `No such File object`): a file is uploaded as multipart `file` and
`purpose`; a batch takes `input_file_id` (a `batch` file), `endpoint`, `completion_window: "24h"`;
each line's `url` must be the endpoint and every line one model, else the batch is `failed` with
`errors.data[{code, message, param, line}]`.

Each line is answered by the chat simulator's own route in-process (the same body gives the same
answer and usage as a synchronous request). A batch runs its lines at its first retrieve, then
reads `in_progress` until `GATEWAY_SIM_TASK_SECONDS` (default 3) after its creation, then
`completed` with its output file (2xx lines) and error file (the others). Directive, in a line's
text: `#batch=stall`: the batch runs the lines before it and waits there (`in_progress`) until it
is cancelled; a cancel then ends it `cancelled` with the lines done so far in its output.
"""

from __future__ import annotations

import json
import os
import time
import uuid
from typing import Any

import httpx
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

clock = time.time  # tests replace this to move batches along without waiting
FILES: dict[str, dict[str, Any]] = {}
BATCHES: dict[str, dict[str, Any]] = {}
ENDPOINTS = ("/v1/responses", "/v1/chat/completions", "/v1/embeddings", "/v1/completions", "/v1/moderations")
STALL = "#batch=stall"


def task_seconds() -> float:
    return float(os.environ.get("GATEWAY_SIM_TASK_SECONDS", "3"))


def _error(status: int, message: str, param: str | None = None, code: str | None = None) -> JSONResponse:
    return JSONResponse({"error": {"message": message, "type": "invalid_request_error", "param": param,
                                   "code": code}}, status_code=status)


def _unauthorized(request: Request) -> JSONResponse | None:
    header = request.headers.get("authorization", "")
    if not header.startswith("Bearer ") or not header[7:].strip():
        return _error(401, "You didn't provide an API key. Send it as 'Authorization: Bearer <key>'.",
                      code="invalid_api_key")
    return None


def _file_object(stored: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in stored.items() if k != "data"}


def _new_file(data: bytes, filename: str, purpose: str) -> dict[str, Any]:
    file_id = "file-" + uuid.uuid4().hex[:24]
    stored: dict[str, Any] = {"id": file_id, "object": "file", "bytes": len(data),
              "created_at": int(clock()), "filename": filename, "purpose": purpose, "status": "processed",
              "expires_at": None, "status_details": None, "data": data}
    FILES[file_id] = stored
    return stored


async def create_file(request: Request) -> Response:
    if (refused := _unauthorized(request)) is not None:
        return refused
    form = await request.form()
    upload, purpose = form.get("file"), form.get("purpose")
    if purpose not in ("assistants", "batch", "fine-tune", "vision", "user_data", "evals"):
        return _error(400, f"Invalid value for 'purpose': {purpose!r}.", "purpose")
    if upload is None or isinstance(upload, str):
        return _error(400, "Missing required parameter: 'file'.", "file")
    return JSONResponse(_file_object(_new_file(await upload.read(), upload.filename or "file", str(purpose))))


def _file(file_id: str) -> dict[str, Any] | None:
    return FILES.get(file_id)


async def get_file(request: Request) -> Response:
    if (refused := _unauthorized(request)) is not None:
        return refused
    stored = _file(str(request.path_params["file_id"]))
    if stored is None:
        return _error(404, f"No such File object: {request.path_params['file_id']}", "id")
    return JSONResponse(_file_object(stored))


async def file_content(request: Request) -> Response:
    if (refused := _unauthorized(request)) is not None:
        return refused
    stored = _file(str(request.path_params["file_id"]))
    if stored is None:
        return _error(404, f"No such File object: {request.path_params['file_id']}", "id")
    return Response(stored["data"], media_type="application/octet-stream")


async def delete_file(request: Request) -> Response:
    if (refused := _unauthorized(request)) is not None:
        return refused
    stored = FILES.pop(request.path_params["file_id"], None)
    if stored is None:
        return _error(404, f"No such File object: {request.path_params['file_id']}", "id")
    return JSONResponse({"id": stored["id"], "object": "file", "deleted": True})


def _validation_errors(lines: list[Any], endpoint: str) -> list[dict[str, Any]]:
    errors: list[dict[str, Any]] = []
    seen: set[str] = set()
    models: set[str] = set()
    for number, line in enumerate(lines, start=1):
        if not isinstance(line, dict):
            errors.append({"code": "invalid_json_line", "message": "This line is not parseable as valid JSON.",
                           "param": None, "line": number})
            continue
        if line.get("url") != endpoint:
            errors.append({"code": "invalid_url", "message": "URL provided for this request does not match the "
                           "batch endpoint", "param": "url", "line": number})
        if line.get("custom_id") in seen:
            errors.append({"code": "duplicate_custom_id", "message": "custom_id must be unique", "param": "custom_id",
                           "line": number})
        seen.add(str(line.get("custom_id")))
        models.add(str((line.get("body") or {}).get("model")))
        if len(models) > 1:
            errors.append({"code": "mismatched_model", "message": "each input file can only include requests to a "
                           "single model", "param": "body.model", "line": number})
            models = {next(iter(models))}
    return errors


def _batch_object(batch: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in batch.items() if not k.startswith("_")}


async def create_batch(request: Request) -> Response:
    if (refused := _unauthorized(request)) is not None:
        return refused
    body = await request.json()
    stored = _file(str(body.get("input_file_id")))
    if stored is None or stored["purpose"] != "batch":
        return _error(400, f"Invalid 'input_file_id': '{body.get('input_file_id')}'.", "input_file_id")
    if body.get("endpoint") not in ENDPOINTS:
        return _error(400, f"Invalid value for 'endpoint': {body.get('endpoint')!r}.", "endpoint")
    if body.get("completion_window") != "24h":
        return _error(400, "Invalid value for 'completion_window': only '24h' is supported.", "completion_window")
    lines = []
    for raw in stored["data"].split(b"\n"):
        if raw.strip():
            try:
                lines.append(json.loads(raw))
            except ValueError:
                lines.append(None)
    now = int(clock())
    errors = _validation_errors(lines, body["endpoint"])
    batch: dict[str, Any] = {
        "id": "batch_" + uuid.uuid4().hex[:24], "object": "batch", "endpoint": body["endpoint"],
        "errors": {"object": "list", "data": errors} if errors else None, "input_file_id": stored["id"],
        "completion_window": "24h", "status": "failed" if errors else "validating", "output_file_id": None,
        "error_file_id": None, "created_at": now, "in_progress_at": None, "expires_at": now + 86400,
        "finalizing_at": None, "completed_at": None, "failed_at": now if errors else None, "expired_at": None,
        "cancelling_at": None, "cancelled_at": None,
        "request_counts": {"total": len(lines), "completed": 0, "failed": 0}, "metadata": body.get("metadata"),
        "_lines": lines, "_results": [], "_key": request.headers["authorization"],
    }
    BATCHES[batch["id"]] = batch
    return JSONResponse(_batch_object(batch))


async def _run(batch: dict[str, Any]) -> None:
    """Answers the lines up to a stall (each through the chat simulator's own route, in-process)."""
    from gateway_local.simulators.chat import routes_app  # the chat routes, without provider faults

    transport = httpx.ASGITransport(app=routes_app)
    async with httpx.AsyncClient(transport=transport, base_url="http://simulator") as client:
        for line in batch["_lines"][len(batch["_results"]):]:
            if STALL in json.dumps(line):
                batch["_stalled"] = True
                return
            answer = await client.post(line["url"], json=line["body"],
                                       headers={"authorization": batch["_key"]})
            try:
                body = answer.json()
            except ValueError:
                body = {"error": {"message": answer.text[:200]}}
            batch["_results"].append({
                "id": "batch_req_" + uuid.uuid4().hex[:24], "custom_id": line["custom_id"],
                "response": {"status_code": answer.status_code, "request_id": uuid.uuid4().hex, "body": body},
                "error": None})


def _end(batch: dict[str, Any], status: str) -> None:
    now = int(clock())
    done = [r for r in batch["_results"] if 200 <= r["response"]["status_code"] < 300]
    failed = [r for r in batch["_results"] if r not in done]
    for name, lines in (("output_file_id", done), ("error_file_id", failed)):
        if lines:
            data = "".join(json.dumps(line) + "\n" for line in lines).encode()
            batch[name] = _new_file(data, "batch_output.jsonl", "batch_output")["id"]
    batch["request_counts"] = {"total": len(batch["_lines"]), "completed": len(done), "failed": len(failed)}
    batch["status"] = status
    batch["finalizing_at"] = batch["finalizing_at"] or now
    batch[f"{status}_at"] = now


async def _advance(batch: dict[str, Any]) -> None:
    if batch["status"] == "validating":
        batch["status"], batch["in_progress_at"] = "in_progress", int(clock())
        await _run(batch)
    elif batch["status"] == "cancelling":
        _end(batch, "cancelled")
    elif batch["status"] == "in_progress" and not batch.get("_stalled") and \
            clock() - batch["created_at"] >= task_seconds():
        _end(batch, "completed")


async def get_batch(request: Request) -> Response:
    if (refused := _unauthorized(request)) is not None:
        return refused
    batch = BATCHES.get(request.path_params["batch_id"])
    if batch is None:
        return _error(404, f"No batch found with id '{request.path_params['batch_id']}'.", "batch_id")
    await _advance(batch)
    return JSONResponse(_batch_object(batch))


async def cancel_batch(request: Request) -> Response:
    if (refused := _unauthorized(request)) is not None:
        return refused
    batch = BATCHES.get(request.path_params["batch_id"])
    if batch is None:
        return _error(404, f"No batch found with id '{request.path_params['batch_id']}'.", "batch_id")
    if batch["status"] in ("validating", "in_progress", "finalizing"):
        batch["status"], batch["cancelling_at"] = "cancelling", int(clock())
    elif batch["status"] != "cancelling":
        return _error(409, f"Cannot cancel a batch with status '{batch['status']}'.", code="batch_not_cancellable")
    return JSONResponse(_batch_object(batch))


routes = [
    Route("/v1/files", create_file, methods=["POST"]),
    Route("/v1/files/{file_id}", get_file, methods=["GET"]),
    Route("/v1/files/{file_id}", delete_file, methods=["DELETE"]),
    Route("/v1/files/{file_id}/content", file_content, methods=["GET"]),
    Route("/v1/batches", create_batch, methods=["POST"]),
    Route("/v1/batches/{batch_id}", get_batch, methods=["GET"]),
    Route("/v1/batches/{batch_id}/cancel", cancel_batch, methods=["POST"]),
]
