"""Simulated zeta upstream: content-generation tasks, queued → running → succeeded, over a few seconds.

Mounted at `/zeta`; every path here is relative to the mount. A task's state is computed from
the time since it was submitted (`GATEWAY_SIM_TASK_SECONDS`, default 3: queued for the first
third, then running). Faults, written anywhere in the prompt text: `#fault=fail` (the task ends
failed with a reason), `#fault=cancel` (it ends cancelled), `#fault=expire` (it ends `expired`,
as a task that outlived its `execution_expires_after` does), `#fault=reject` (the submit answers
400), `#fault=500` (the submit answers 500). A base URL ending in `/fault/<status>` (e.g.
`/zeta/fault/500`) answers every request with that status.

Rules of the real API it enforces (Ark's content-generation reference, "create a video
generation task" / "query a video generation task"; new-api's relay/channel/task/doubao
`ContentItem`/`MediaURL` and `responseTask`):
- an `image_url` item carries `image_url: {url}` only, `url` an http(s) link or a
  `data:image/<format>;base64,` URL (any other key is a 400 InvalidParameter);
- a finished task reports `usage.completion_tokens` = width x height x fps x duration / 1024
  (Ark's pricing page: "tokens = (width x height x frames per second x duration) / 1024"), with
  the `resolution`, `ratio`, `duration` and `framespersecond` it rendered: the resolution's
  default is 1080p for the pro model and 720p for lite, the ratio's 16:9 (`adaptive` renders
  16:9 here: the simulator does not measure images).
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


#: Ark's output sizes of Seedance 1.0 (width, height) per resolution and ratio (its video
#: generation reference, "resolution / ratio" table).
PIXELS: dict[str, dict[str, tuple[int, int]]] = {
    "480p": {"16:9": (864, 480), "4:3": (736, 544), "1:1": (640, 640), "3:4": (544, 736), "9:16": (480, 864),
             "21:9": (960, 416)},
    "720p": {"16:9": (1248, 704), "4:3": (1120, 832), "1:1": (960, 960), "3:4": (832, 1120),
             "9:16": (704, 1248), "21:9": (1504, 640)},
    "1080p": {"16:9": (1920, 1088), "4:3": (1664, 1248), "1:1": (1440, 1440), "3:4": (1248, 1664),
              "9:16": (1088, 1920), "21:9": (2176, 928)},
}
FPS = 24


def _bad_image_item(content: list) -> str | None:
    """Why an image item is not Ark's `{type: image_url, image_url: {url}}`, or None."""
    for index, item in enumerate(content):
        if not isinstance(item, dict) or item.get("type") != "image_url":
            continue
        image = item.get("image_url")
        url = image.get("url") if isinstance(image, dict) else None
        if not isinstance(image, dict) or set(image) != {"url"} or not isinstance(url, str) \
                or not url.startswith(("http://", "https://", "data:image/")):
            return (f"The parameter `content[{index}].image_url` specified in the request is not valid: "
                    "it must be an object with `url`, a link or a data URL of an image.")
    return None


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
    if (bad := _bad_image_item(content)) is not None:
        return _error(400, bad)
    prompt = " ".join(item.get("text", "") for item in content if isinstance(item, dict) and item.get("type") == "text")
    found = re.search(r"#fault=(\w+)", prompt)
    fault = found[1] if found else None
    if fault == "reject":
        return _error(400, "Simulated rejection (#fault=reject).")
    if fault == "500":
        return _error(500, "Simulated internal error (#fault=500).")
    duration = _command(prompt, "duration", "dur")
    task_id = f"cgt-{uuid.uuid4().hex[:20]}"
    ratio = _command(prompt, "ratio")
    TASKS[task_id] = {"model": body["model"], "created": clock(), "fault": fault,
                      "duration": int(duration) if duration and duration.isdigit() else 5,
                      "resolution": (_command(prompt, "rs", "resolution")
                                     or ("1080p" if "pro" in body["model"] else "720p")).lower(),
                      "ratio": ratio if ratio in PIXELS["720p"] else "16:9"}
    return JSONResponse({"id": task_id})


def _status(task: dict) -> str:
    elapsed, total = clock() - task["created"], task_seconds()
    if elapsed < total / 3:
        return "queued"
    if elapsed < total:
        return "running"
    return {"fail": "failed", "cancel": "cancelled", "expire": "expired"}.get(task["fault"], "succeeded")


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
              "ratio": task["ratio"], "framespersecond": FPS, "seed": 42}
    if status == "succeeded":
        answer["content"] = {"video_url": f"{_mount_url(request)}/files/{task_id}.mp4"}
        width, height = PIXELS.get(task["resolution"], PIXELS["720p"])[task["ratio"]]
        tokens = width * height * FPS * task["duration"] // 1024
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
