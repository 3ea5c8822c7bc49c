"""Simulated delta upstream: `:predictLongRunning` operations that finish after a few seconds.

Mounted at `/delta`; every path here is relative to the mount. A task's state is computed from
the time since it was submitted (`GATEWAY_SIM_TASK_SECONDS`, default 3), so nothing runs in the
background. Faults, written anywhere in the prompt: `#fault=fail` (the operation ends with an
error), `#fault=fewer` (one video fewer than `sampleCount` asked, at least one), `#fault=inline`
(the videos come as `bytesBase64Encoded`, as Vertex AI answers without a `storageUri`), `#fault=reject`
(the submit answers 400), `#fault=500` (the submit answers 500). A base
URL ending in `/fault/<status>` (e.g. `/delta/fault/500`) answers every request with that status.

A video's `uri` is a Files API download link (`/v1beta/files/<id>:download?alt=media`, as the
Gemini API answers) that serves the bytes only with the API key, 403 without: new-api's
`controller/video_proxy.go` fetches a Gemini task's video with the channel's `x-goog-api-key` for
that reason, and the google-genai SDK's `files.download` sends its key. A video is kept two days
(ai.google.dev/gemini-api/docs/video: "Generated videos are stored on the server for 2 days"):
`GATEWAY_SIM_VIDEO_KEPT_SECONDS` (default 172800) after the operation is done, it answers 404.
"""

from __future__ import annotations

import base64
import os
import re
import struct
import time
import uuid

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Mount, Route

from .provider_faults import with_provider_faults

clock = time.time  # tests replace this to move tasks along without waiting
TASKS: dict[str, dict] = {}

# A tiny ISO-BMFF file (ftyp + empty mdat): enough for anything that sniffs the type.
MP4_BYTES = struct.pack(">I4s4sI4s4s", 24, b"ftyp", b"isom", 0x200, b"isom", b"mp41") + struct.pack(">I4s", 8, b"mdat")

_STATUS_WORDS = {400: "INVALID_ARGUMENT", 401: "UNAUTHENTICATED", 403: "PERMISSION_DENIED", 404: "NOT_FOUND",
                 429: "RESOURCE_EXHAUSTED",
                 500: "INTERNAL", 503: "UNAVAILABLE"}


def task_seconds() -> float:
    return float(os.environ.get("GATEWAY_SIM_TASK_SECONDS", "3"))


def _error(status: int, message: str) -> JSONResponse:
    return JSONResponse({"error": {"code": status, "message": message, "status": _STATUS_WORDS.get(status, "UNKNOWN")}},
                        status_code=status)


def _fault(prompt: str) -> str | None:
    match = re.search(r"#fault=(\w+)", prompt)
    return match[1] if match else None


def _mount_url(request: Request) -> str:
    # root_path holds the mount (/delta), which request.base_url leaves out.
    return f"{request.url.scheme}://{request.url.netloc}{request.scope.get('root_path', '')}"


def _authorized(request: Request) -> bool:
    return bool(request.headers.get("x-goog-api-key", "").strip() or request.query_params.get("key", "").strip())


async def submit(request: Request) -> Response:
    if not _authorized(request):
        return _error(401, "API key required in x-goog-api-key.")
    model, _, action = request.path_params["model_action"].rpartition(":")
    if action != "predictLongRunning" or not model:
        return _error(404, f"unknown method {request.path_params['model_action']!r}")
    try:
        body = await request.json()
    except ValueError:
        return _error(400, "request body is not JSON")
    instances = body.get("instances") if isinstance(body, dict) else None
    if not isinstance(instances, list) or not instances or not isinstance(instances[0], dict) \
            or not isinstance(instances[0].get("prompt"), str):
        return _error(400, "instances[0].prompt is required")
    image = instances[0].get("image")
    if isinstance(image, dict) and not image.get("bytesBase64Encoded"):
        return _error(400, "image is empty")
    prompt = instances[0]["prompt"]
    fault = _fault(prompt)
    if fault == "reject":
        return _error(400, "simulated rejection (#fault=reject)")
    if fault == "500":
        return _error(500, "simulated internal error (#fault=500)")
    parameters = body.get("parameters") if isinstance(body.get("parameters"), dict) else {}
    samples = parameters.get("sampleCount")
    count = samples if isinstance(samples, int) else 1
    task_id = uuid.uuid4().hex[:16]
    TASKS[task_id] = {"model": model, "created": clock(), "fault": fault, "count": max(1, min(4, count))}
    return JSONResponse({"name": f"models/{model}/operations/{task_id}"})


async def operation(request: Request) -> Response:
    if not _authorized(request):
        return _error(401, "API key required in x-goog-api-key.")
    model, task_id = request.path_params["model"], request.path_params["task_id"]
    task = TASKS.get(task_id)
    if task is None or task["model"] != model:
        return _error(404, f"operation {task_id} not found")
    name = f"models/{model}/operations/{task_id}"
    if clock() - task["created"] < task_seconds():
        return JSONResponse({"name": name, "done": False})
    if task["fault"] == "fail":
        return JSONResponse({"name": name, "done": True,
                             "error": {"code": 13, "message": "simulated generation failure (#fault=fail)"}})
    count = task["count"] - (task["fault"] == "fewer" and task["count"] > 1)
    samples = [{"video": {"uri": f"{_mount_url(request)}/v1beta/files/{task_id}-{n}:download?alt=media"}}
               for n in range(count)]
    if task["fault"] == "inline":
        samples = [{"video": {"bytesBase64Encoded": base64.b64encode(MP4_BYTES).decode(), "mimeType": "video/mp4"}}
                   for _ in range(count)]
    return JSONResponse({"name": name, "done": True, "response": {
        "@type": "type.googleapis.com/google.ai.generativelanguage.v1beta.PredictLongRunningResponse",
        "generateVideoResponse": {"generatedSamples": samples}}})


async def file(request: Request) -> Response:
    if not _authorized(request):
        return _error(403, "Method doesn't allow unregistered callers (callers without established identity). "
                      "Please use API Key or other form of API consumer identity to call this API.")
    match = re.fullmatch(r"(\w+)-\d+:download", request.path_params["name"])
    task = TASKS.get(match[1]) if match else None
    if task is None or request.query_params.get("alt") != "media":
        return _error(404, "file not found")
    kept = float(os.environ.get("GATEWAY_SIM_VIDEO_KEPT_SECONDS", "172800"))
    if clock() - task["created"] > task_seconds() + kept:
        return _error(404, "file not found (generated videos are kept two days)")
    return Response(MP4_BYTES, media_type="video/mp4")


async def fault_everything(request: Request) -> Response:
    status = request.path_params["status"]
    return _error(status, f"simulated failure of every request (/fault/{status})")


app = Starlette(routes=[
    Mount("/fault/{status:int}", routes=[Route("/{rest:path}", fault_everything, methods=["GET", "POST", "DELETE"])]),
    Route("/v1beta/models/{model_action}", submit, methods=["POST"]),
    Route("/v1beta/models/{model}/operations/{task_id}", operation, methods=["GET"]),
    Route("/v1beta/files/{name}", file, methods=["GET"]),
])

# The provider's own refusals of the channel's key or account (`provider_faults`).
app = with_provider_faults(app, "google")
