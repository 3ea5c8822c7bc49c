"""Simulated gamma upstream: asynchronous video synthesis, PENDING → RUNNING → SUCCEEDED over a few seconds.

Mounted at `/gamma`; every path here is relative to the mount. Checks `Authorization: Bearer`
(401 `InvalidApiKey`) and `X-DashScope-Async: enable` (403 `AccessDenied`, as the upstream
answers a synchronous call to an asynchronous-only service). A task's state follows the time
since its submit (`GATEWAY_SIM_TASK_SECONDS`, default 3: PENDING for the first third). Faults,
written anywhere in `input.prompt`: `#fault=reject` (the submit answers 400 `DataInspectionFailed`),
`#fault=throttle` (429 `Throttling`), `#fault=fail` (the task ends FAILED with `output.code`),
`#fault=cancel` (it ends CANCELED), `#fault=never` (it stays RUNNING), `#fault=strange` (it
reports a status word the protocol does not have). An unknown id answers 200 `UNKNOWN`.

Rules of the real API (DashScope's Wan video-synthesis reference; new-api's
relay/channel/task/ali `AliVideoParameters`/`AliUsage`): a text-to-video model (`*t2v*`) reads
`parameters.size` (`W*H` of its table; any other is a 400 InvalidParameter) and ignores
`parameters.resolution`, rendering its default 1920*1080; an image-to-video model reads
`resolution` (default 1080P). A finished task reports `usage` `{video_duration, video_count}`
with the size rendered (`video_ratio`, text-to-video) or its tier (`SR`, image-to-video).
"""

from __future__ import annotations

import os
import re
import time
import uuid

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from gateway_local.simulators.zeta import MP4_BYTES

from .provider_faults import with_provider_faults

clock = time.time  # tests replace this to move tasks along without waiting
TASKS: dict[str, dict] = {}
SUBMIT_PATH = "/api/v1/services/aigc/video-generation/video-synthesis"
#: Wan text-to-video sizes (DashScope's reference, the `size` table).
T2V_SIZES = ("832*480", "480*832", "624*624", "1280*720", "720*1280", "960*960", "1088*832", "832*1088",
             "1920*1080", "1080*1920", "1440*1440", "1632*1248", "1248*1632")


def task_seconds() -> float:
    return float(os.environ.get("GATEWAY_SIM_TASK_SECONDS", "3"))


def _error(status: int, code: str, message: str) -> JSONResponse:
    return JSONResponse({"request_id": str(uuid.uuid4()), "code": code, "message": message}, status_code=status)


def _unauthorized(request: Request) -> JSONResponse | None:
    scheme, _, token = request.headers.get("authorization", "").partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        return _error(401, "InvalidApiKey", "Invalid API-key provided.")
    return None


def _time(seconds: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(seconds)) + f".{int(seconds * 1000) % 1000:03d}"


async def submit(request: Request) -> Response:
    if (refused := _unauthorized(request)) is not None:
        return refused
    if request.headers.get("x-dashscope-async") != "enable":
        return _error(403, "AccessDenied", "current user api does not support synchronous calls.")
    try:
        body = await request.json()
    except ValueError:
        return _error(400, "InvalidParameter", "The request body is not valid JSON.")
    inputs = body.get("input") if isinstance(body, dict) else None
    if not isinstance(body.get("model") if isinstance(body, dict) else None, str) or not isinstance(inputs, dict):
        return _error(400, "InvalidParameter", "Field required: model and input.")
    found = re.search(r"#fault=(\w+)", str(inputs.get("prompt") or ""))
    fault = found[1] if found else None
    if fault == "reject":
        return _error(400, "DataInspectionFailed", "Input data may contain inappropriate content (#fault=reject).")
    if fault == "throttle":
        return _error(429, "Throttling", "Requests rate limit exceeded (#fault=throttle).")
    parameters = body.get("parameters") if isinstance(body.get("parameters"), dict) else {}
    text_to_video = "t2v" in body["model"]
    size = parameters.get("size", "1920*1080") if text_to_video else None
    if text_to_video and size not in T2V_SIZES:
        return _error(400, "InvalidParameter", f"The size {size!r} is not supported.")
    task_id = str(uuid.uuid4())
    TASKS[task_id] = {"created": clock(), "fault": fault, "prompt": inputs.get("prompt") or "",
                      "duration": int(parameters.get("duration") or 5), "size": size,
                      "resolution": None if text_to_video else str(parameters.get("resolution") or "1080P")}
    return JSONResponse({"request_id": str(uuid.uuid4()), "output": {"task_id": task_id, "task_status": "PENDING"}})


def _status(task: dict) -> str:
    elapsed, total = clock() - task["created"], task_seconds()
    if elapsed < total / 3:
        return "PENDING"
    if elapsed < total or task["fault"] == "never":
        return "RUNNING"
    return {"fail": "FAILED", "cancel": "CANCELED", "strange": "SUSPENDED"}.get(task["fault"], "SUCCEEDED")


async def get_task(request: Request) -> Response:
    if (refused := _unauthorized(request)) is not None:
        return refused
    task_id = request.path_params["task_id"]
    task = TASKS.get(task_id)
    if task is None:
        return JSONResponse({"request_id": str(uuid.uuid4()), "output": {"task_id": task_id, "task_status": "UNKNOWN"}})
    status = _status(task)
    output = {"task_id": task_id, "task_status": status, "submit_time": _time(task["created"])}
    if status != "PENDING":
        output["scheduled_time"] = _time(task["created"] + task_seconds() / 3)
    answer: dict = {"request_id": str(uuid.uuid4()), "output": output}
    if status == "SUCCEEDED":
        output.update(end_time=_time(task["created"] + task_seconds()), orig_prompt=task["prompt"],
                      actual_prompt=task["prompt"], video_url=f"{request.url.scheme}://{request.url.netloc}"
                      f"{request.scope.get('root_path', '')}/files/{task_id}.mp4")
        answer["usage"] = {"video_duration": task["duration"], "video_count": 1}
        if task["size"] is not None:
            answer["usage"]["video_ratio"] = task["size"]
        else:
            answer["usage"]["SR"] = int(task["resolution"].rstrip("Pp"))
    elif status == "FAILED":
        output.update(end_time=_time(task["created"] + task_seconds()), code="InternalError.Algo",
                      message="Simulated generation failure (#fault=fail).")
    return JSONResponse(answer)


async def file(request: Request) -> Response:
    match = re.fullmatch(r"([0-9a-f-]{36})\.mp4", request.path_params["name"])
    if not match or match[1] not in TASKS:
        return _error(404, "NotFound", "The file is not found.")
    return Response(MP4_BYTES, media_type="video/mp4")


app = Starlette(routes=[
    Route(SUBMIT_PATH, submit, methods=["POST"]),
    Route("/api/v1/tasks/{task_id}", get_task, methods=["GET"]),
    Route("/files/{name}", file, methods=["GET"]),
])

# The provider's own refusals of the channel's key or account (`provider_faults`).
app = with_provider_faults(app, "dashscope")
