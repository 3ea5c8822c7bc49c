"""Simulated zeta upstream: content-generation tasks, queued → running → succeeded, over a few seconds.

Mounted at `/zeta`; every path here is relative to the mount. A task's state is computed from
the time since it was submitted (`GATEWAY_SIM_TASK_SECONDS`, default 3: queued for the first
third, then running). Faults, written anywhere in the prompt text: `#fault=fail` (the task ends
failed with a reason), `#fault=cancel` (it ends cancelled), `#fault=reject` (the submit answers
400), `#fault=500` (the submit answers 500). A base URL ending in `/fault/<status>` (e.g.
`/zeta/fault/500`) answers every request with that status.
"""

from __future__ import annotations

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

MP4_BYTES = struct.pack(">I4s4sI4s4s", 24, b"ftyp", b"isom", 0x200, b"isom", b"mp41") + struct.pack(">I4s", 8, b"mdat")
TASKS_PATH = "/api/v3/contents/generations/tasks"

_ERROR_WORDS = {400: ("InvalidParameter", "BadRequest"), 401: ("AuthenticationError", "Unauthorized"),
                404: ("ResourceNotFound", "NotFound"), 429: ("RateLimitExceeded", "TooManyRequests"),
                500: ("InternalServiceError", "InternalServerError")}


def task_seconds() -> float:
    return float(os.environ.get("GATEWAY_SIM_TASK_SECONDS", "3"))


def _error(status: int, message: str) -> JSONResponse:
    code, kind = _ERROR_WORDS.get(status, ("InternalServiceError", "InternalServerError"))
    return JSONResponse({"error": {"code": code, "message": message, "type": kind}}, status_code=status)


def _authorized(request: Request) -> bool:
    scheme, _, token = request.headers.get("authorization", "").partition(" ")
    return scheme.lower() == "bearer" and bool(token.strip())


def _mount_url(request: Request) -> str:
    return f"{request.url.scheme}://{request.url.netloc}{request.scope.get('root_path', '')}"


def _command(prompt: str, *names: str) -> str | None:
    match = re.search(rf"(?<!\S)--(?:{'|'.join(names)})\s+(\S+)", prompt)
    return match[1] if match else None


async def submit(request: Request) -> Response:
    if not _authorized(request):
        return _error(401, "The API key in the Authorization header is missing or invalid.")
    try:
        body = await request.json()
    except ValueError:
        return _error(400, "The request body is not valid JSON.")
    content = body.get("content") if isinstance(body, dict) else None
    if not isinstance(body.get("model") if isinstance(body, dict) else None, str) \
            or not isinstance(content, list) or not content:
        return _error(400, "The parameter `model` and a non-empty `content` are required.")
    prompt = " ".join(item.get("text", "") for item in content if isinstance(item, dict) and item.get("type") == "text")
    found = re.search(r"#fault=(\w+)", prompt)
    fault = found[1] if found else None
    if fault == "reject":
        return _error(400, "Simulated rejection (#fault=reject).")
    if fault == "500":
        return _error(500, "Simulated internal error (#fault=500).")
    duration = _command(prompt, "duration", "dur")
    task_id = f"cgt-{uuid.uuid4().hex[:20]}"
    TASKS[task_id] = {"model": body["model"], "created": clock(), "fault": fault,
                      "duration": int(duration) if duration and duration.isdigit() else 5,
                      "resolution": _command(prompt, "rs", "resolution") or "720p"}
    return JSONResponse({"id": task_id})


def _status(task: dict) -> str:
    elapsed, total = clock() - task["created"], task_seconds()
    if elapsed < total / 3:
        return "queued"
    if elapsed < total:
        return "running"
    return {"fail": "failed", "cancel": "cancelled"}.get(task["fault"], "succeeded")


async def get_task(request: Request) -> Response:
    if not _authorized(request):
        return _error(401, "The API key in the Authorization header is missing or invalid.")
    task_id = request.path_params["task_id"]
    task = TASKS.get(task_id)
    if task is None:
        return _error(404, f"The specified task {task_id} is not found.")
    status = _status(task)
    answer = {"id": task_id, "model": task["model"], "status": status, "created_at": int(task["created"]),
              "updated_at": int(clock()), "duration": task["duration"], "resolution": task["resolution"],
              "framespersecond": 24, "seed": 42}
    if status == "succeeded":
        answer["content"] = {"video_url": f"{_mount_url(request)}/files/{task_id}.mp4"}
        tokens = task["duration"] * 21600  # about what the upstream counts per second of 720p
        answer["usage"] = {"completion_tokens": tokens, "total_tokens": tokens}
    elif status == "failed":
        answer["error"] = {"code": "OutputVideoSensitiveContentDetected",
                           "message": "Simulated generation failure (#fault=fail)."}
    return JSONResponse(answer)


async def file(request: Request) -> Response:
    match = re.fullmatch(r"(cgt-\w+)\.mp4", request.path_params["name"])
    if not match or match[1] not in TASKS:
        return _error(404, "The file is not found.")
    return Response(MP4_BYTES, media_type="video/mp4")


async def fault_everything(request: Request) -> Response:
    status = request.path_params["status"]
    return _error(status, f"Simulated failure of every request (/fault/{status}).")


app = Starlette(routes=[
    Mount("/fault/{status:int}", routes=[Route("/{rest:path}", fault_everything, methods=["GET", "POST", "DELETE"])]),
    Route(TASKS_PATH, submit, methods=["POST"]),
    Route(TASKS_PATH + "/{task_id}", get_task, methods=["GET"]),
    Route("/files/{name}", file, methods=["GET"]),
])

# The provider's own refusals of the channel's key or account (`provider_faults`).
app = with_provider_faults(app, "ark")
