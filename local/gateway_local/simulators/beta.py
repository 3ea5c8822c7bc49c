"""Simulated beta upstream: image tasks, Pending → Ready over a few seconds, with a polling URL
on another host name and result links that expire.

Mounted at `/beta`; every path here is relative to the mount. Checks `x-key` (401
`{"detail": ...}`). A submit to `/v1/<model>` answers `{id, polling_url, cost, input_mp,
output_mp}`; the polling URL names the other local host name (`localhost` for `127.0.0.1` and
the other way round) and a path of its own (`/regional/v1/get_result?id=`), as the upstream names
a regional host: a gateway that polls it must have been told that host is allowed. `/v1/get_result?id=`
answers too. A task is Pending for `GATEWAY_SIM_TASK_SECONDS` (default 3), then Ready with
`result.sample`, a link to the image that serves for `SAMPLE_SECONDS` and then answers 403, as the
upstream's signed links do. Faults, written anywhere in the prompt: `#fault=reject` (the submit
answers 400), `#fault=credits` (402), `#fault=fail` (the task ends `Error`),
`#fault=moderate-request` / `#fault=moderate-content` (it ends `Request Moderated` / `Content
Moderated`), `#fault=never` (it stays Pending), `#fault=strange` (a status word the protocol does
not have). An unknown id answers `Task not found`.
"""

from __future__ import annotations

import base64
import math
import os
import re
import time
import uuid

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from gateway_local.simulators.images import picture_for

clock = time.time  # tests replace this to move tasks along without waiting
TASKS: dict[str, dict] = {}
SAMPLE_SECONDS = 600  # the upstream's links expire in about ten minutes
# A 16x16 baseline JPEG (an orange square with a dark diagonal).
JPEG_BYTES = base64.b64decode(
    "/9j/4AAQSkZJRgABAQAAAQABAAD/2wBDAAYEBQYFBAYGBQYHBwYIChAKCgkJChQODwwQFxQYGBcUFhYaHSUfGhsjHBYWICwgIyYnKSopGR8t"
    "MC0oMCUoKSj/2wBDAQcHBwoIChMKChMoGhYaKCgoKCgoKCgoKCgoKCgoKCgoKCgoKCgoKCgoKCgoKCgoKCgoKCgoKCgoKCgoKCgoKCj/wAAR"
    "CAAQABADASIAAhEBAxEB/8QAHwAAAQUBAQEBAQEAAAAAAAAAAAECAwQFBgcICQoL/8QAtRAAAgEDAwIEAwUFBAQAAAF9AQIDAAQRBRIhMUEG"
    "E1FhByJxFDKBkaEII0KxwRVS0fAkM2JyggkKFhcYGRolJicoKSo0NTY3ODk6Q0RFRkdISUpTVFVWV1hZWmNkZWZnaGlqc3R1dnd4eXqDhIWG"
    "h4iJipKTlJWWl5iZmqKjpKWmp6ipqrKztLW2t7i5usLDxMXGx8jJytLT1NXW19jZ2uHi4+Tl5ufo6erx8vP09fb3+Pn6/8QAHwEAAwEBAQEB"
    "AQEBAQAAAAAAAAECAwQFBgcICQoL/8QAtREAAgECBAQDBAcFBAQAAQJ3AAECAxEEBSExBhJBUQdhcRMiMoEIFEKRobHBCSMzUvAVYnLRChYk"
    "NOEl8RcYGRomJygpKjU2Nzg5OkNERUZHSElKU1RVVldYWVpjZGVmZ2hpanN0dXZ3eHl6goOEhYaHiImKkpOUlZaXmJmaoqOkpaanqKmqsrO0"
    "tba3uLm6wsPExcbHyMnK0tPU1dbX2Nna4uPk5ebn6Onq8vP09fb3+Pn6/9oADAMBAAIRAxEAPwCD/kF/9g//ANJ//tf/AKD/ALv3dCis/wD5"
    "Bf8A2D//AEn/APtf/oP+7934X4vU+0+H0P/Z")
_OTHER_HOST = {"127.0.0.1": "localhost", "localhost": "127.0.0.1"}


def task_seconds() -> float:
    return float(os.environ.get("GATEWAY_SIM_TASK_SECONDS", "3"))


def _detail(status: int, detail) -> JSONResponse:
    return JSONResponse({"detail": detail}, status_code=status)


def _unauthorized(request: Request) -> JSONResponse | None:
    if not request.headers.get("x-key", "").strip():
        return _detail(401, "Not authenticated: send the x-key header")
    return None


def _mount(request: Request, *, other_host: bool = False) -> str:
    host = request.url.hostname or "127.0.0.1"
    if other_host:
        host = _OTHER_HOST.get(host, "localhost")
    port = f":{request.url.port}" if request.url.port else ""
    return f"{request.url.scheme}://{host}{port}{request.scope.get('root_path', '')}"


async def submit(request: Request) -> Response:
    if (refused := _unauthorized(request)) is not None:
        return refused
    try:
        body = await request.json()
    except ValueError:
        return _detail(400, "The request body is not valid JSON.")
    prompt = body.get("prompt") if isinstance(body, dict) else None
    if not isinstance(prompt, str) or not prompt:
        return _detail(422, [{"loc": ["body", "prompt"], "msg": "Field required", "type": "missing"}])
    found = re.search(r"#fault=([\w-]+)", prompt)
    fault = found[1] if found else None
    if fault == "reject":
        return _detail(400, "Simulated rejection (#fault=reject).")
    if fault == "credits":
        return _detail(402, "Insufficient credits (#fault=credits).")
    width, height = body.get("width", 1024), body.get("height", 768)
    for name, side in (("width", width), ("height", height)):
        # BFL's FLUX.2 reference: width and height are integers, multiples of 16, at least 64.
        if not isinstance(side, int) or isinstance(side, bool) or side < 64 or side % 16:
            return _detail(422, [{"loc": ["body", name], "msg": "must be an integer multiple of 16, at least 64",
                                  "type": "value_error"}])
    task_id = str(uuid.uuid4())
    TASKS[task_id] = {"created": clock(), "fault": fault, "prompt": prompt, "seed": body.get("seed", 42),
                      "format": body.get("output_format") or "jpeg", "model": request.path_params["model"]}
    megapixels = round(width * height / 1_000_000, 2)
    # BFL's FLUX.2 [pro] rate, in credits (0.01 USD): 3 for the first megapixel, 1.5 for each
    # further one, rounded up (bfl.ai/pricing); charged now, at submit, whatever happens after.
    cost = 3.0 + 1.5 * (max(math.ceil(width * height / 1_000_000), 1) - 1)
    return JSONResponse({"id": task_id, "polling_url": f"{_mount(request, other_host=True)}/regional/v1/get_result"
                         f"?id={task_id}", "cost": cost, "input_mp": 0.0, "output_mp": megapixels})


def _status(task: dict) -> str:
    if clock() - task["created"] < task_seconds() or task["fault"] == "never":
        return "Pending"
    return {"fail": "Error", "moderate-request": "Request Moderated", "moderate-content": "Content Moderated",
            "strange": "Throttled"}.get(task["fault"], "Ready")


async def get_result(request: Request) -> Response:
    if (refused := _unauthorized(request)) is not None:
        return refused
    task_id = request.query_params.get("id", "")
    task = TASKS.get(task_id)
    if task is None:
        return JSONResponse({"id": task_id, "status": "Task not found", "result": None, "progress": None})
    status = _status(task)
    answer: dict = {"id": task_id, "status": status, "result": None, "progress": None}
    if status == "Pending":
        answer["progress"] = round(min((clock() - task["created"]) / task_seconds(), 0.99), 2)
    elif status == "Ready":
        expires = int(task["created"] + task_seconds() + SAMPLE_SECONDS)
        answer["result"] = {"sample": f"{_mount(request)}/files/{task_id}.{task['format']}?se={expires}",
                            "prompt": task["prompt"], "seed": task["seed"], "start_time": task["created"],
                            "end_time": task["created"] + task_seconds(), "duration": task_seconds()}
    elif status == "Error":
        answer["details"] = {"error": "Simulated generation failure (#fault=fail)."}
    elif "Moderated" in status:
        answer["details"] = {"moderation_reasons": ["Simulated moderation"]}
    return JSONResponse(answer)


async def file(request: Request) -> Response:
    match = re.fullmatch(r"([0-9a-f-]{36})\.(jpeg|png)", request.path_params["name"])
    expires = request.query_params.get("se", "")
    if not match or match[1] not in TASKS:
        return _detail(404, "Not found")
    if not expires.isdigit() or clock() > int(expires):
        return _detail(403, "Request has expired")
    if match[2] == "png":
        return Response(picture_for(match[1]), media_type="image/png")
    return Response(JPEG_BYTES, media_type="image/jpeg")


app = Starlette(routes=[
    Route("/v1/get_result", get_result, methods=["GET"]),
    Route("/regional/v1/get_result", get_result, methods=["GET"]),
    Route("/v1/{model}", submit, methods=["POST"]),
    Route("/files/{name}", file, methods=["GET"]),
])
