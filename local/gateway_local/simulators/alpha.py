"""Simulated alpha upstream: five task operations, submitted → processing → succeed over a few
seconds, custom elements and voices, and the result files, behind an HS256 bearer token.

Mounted at `/alpha`; every path here is relative to the mount. The token must be signed with
`SECRET` and name `ACCESS` as its issuer, inside its nbf..exp window (the gateway's simulator
channel key is `simulator|simulator-secret-of-at-least-32-bytes`); it is checked with PyJWT, independently of the
gateway's own signer. A task's state is computed from the time since it was submitted
(`GATEWAY_SIM_TASK_SECONDS`, default 3: submitted for the first third, then processing).
Faults, written anywhere in the prompt: `#fault=fail` (the task ends failed with a reason),
`#fault=reject` (the submit answers 400 with code 1201), `#fault=500` (500 with code 5000).
The mask rule of the spec: an image2video task whose static and dynamic masks differ in size,
or whose mask differs in aspect ratio from the image (PNG sizes, read from base64), or whose
mask URL contains `mismatch` (a URL cannot be measured here), ends failed. A base URL ending in
`/fault/<status>` answers every request with that status.

Motion control as the upstream's reference has it ("Motion Control": prompt, image_url,
video_url, keep_original_sound, character_orientation, mode; new-api's Kling documentation the
same): `character_orientation` and `mode` are required and there is no `duration` (a body
carrying one is refused here, code 1201: stricter than the API, so a gateway relaying a field
the API does not define is caught). The video lasts as long as the reference video, up to 30 s
(orientation `video`) or 10 s (`image`); the simulated reference video lasts `?seconds=N` of its
URL (default 7 s), and one longer than the orientation allows fails the task.
"""

from __future__ import annotations

import base64
import binascii
import os
import re
import struct
import time
import uuid

import jwt
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Mount, Route

from .provider_faults import with_provider_faults

clock = time.time  # tests replace this to move tasks along without waiting
ACCESS, SECRET = "simulator", "simulator-secret-of-at-least-32-bytes"
TASKS: dict[str, dict] = {}
CUSTOMS: dict[str, dict[str, dict]] = {"element": {}, "voice": {}}
VOICE_TASKS: dict[str, dict] = {}

MP4_BYTES = struct.pack(">I4s4sI4s4s", 24, b"ftyp", b"isom", 0x200, b"isom", b"mp41") + struct.pack(">I4s", 8, b"mdat")
PNG_BYTES = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==")
VIDEO_OPERATIONS = ("text2video", "image2video", "omni-video", "motion-control")
_HTTP = {1001: 401, 1002: 401, 1003: 401, 1004: 401, 1201: 400, 1203: 404, 5000: 500}


def task_seconds() -> float:
    return float(os.environ.get("GATEWAY_SIM_TASK_SECONDS", "3"))


def _envelope(data, code: int = 0, message: str = "SUCCEED", status: int | None = None) -> JSONResponse:
    return JSONResponse({"code": code, "message": message, "request_id": uuid.uuid4().hex, "data": data},
                        status_code=status or (200 if code == 0 else _HTTP.get(code, 400)))


def _unauthorized(request: Request) -> JSONResponse | None:
    scheme, _, token = request.headers.get("authorization", "").partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        return _envelope(None, 1001, "Authorization is empty")
    try:
        claims = jwt.decode(token.strip(), SECRET, algorithms=["HS256"], options={"require": ["iss", "exp", "nbf"]})
    except jwt.ExpiredSignatureError:
        return _envelope(None, 1004, "Authorization is expired")
    except jwt.ImmatureSignatureError:
        return _envelope(None, 1003, "Authorization is not yet valid")
    except jwt.InvalidTokenError as exc:
        return _envelope(None, 1002, f"Authorization is invalid: {exc}")
    if claims.get("iss") != ACCESS:
        return _envelope(None, 1002, "Authorization is invalid: unknown access key")
    return None


def _mount_url(request: Request) -> str:
    return f"{request.url.scheme}://{request.url.netloc}{request.scope.get('root_path', '')}"


def _png_size(value: str) -> tuple[int, int] | None:
    try:
        data = base64.b64decode(value + "=" * (-len(value) % 4))
    except (binascii.Error, ValueError):
        return None
    if data.startswith(b"\x89PNG\r\n\x1a\n") and len(data) >= 24:
        return struct.unpack(">II", data[16:24])
    return None


def _mask_mismatch(body: dict) -> str | None:
    """Why the masks do not fit the image (the spec's rule 3), or None."""
    static = body.get("static_mask")
    dynamic = [m.get("mask") for m in body.get("dynamic_masks") or [] if isinstance(m, dict)]
    masks = [m for m in [static, *dynamic] if isinstance(m, str)]
    if any("mismatch" in m for m in masks if m.startswith("http")):
        return "the mask does not match the image"
    image = _png_size(body.get("image") or "") if not str(body.get("image", "")).startswith("http") else None
    sizes = [_png_size(m) for m in masks if not m.startswith("http")]
    for size in filter(None, sizes):
        if image and size[0] * image[1] != size[1] * image[0]:
            return "the mask's aspect ratio differs from the image's"
    static_size = _png_size(static) if isinstance(static, str) and not static.startswith("http") else None
    if static_size and any(s and s != static_size for s in sizes[1:]):
        return "the static mask's resolution differs from the dynamic masks'"
    return None


async def submit(request: Request) -> Response:
    if (refused := _unauthorized(request)) is not None:
        return refused
    operation = request.path_params.get("operation", "omni-image")
    if operation not in (*VIDEO_OPERATIONS, "omni-image"):
        return _envelope(None, 1203, f"No operation {operation}.", status=404)
    try:
        body = await request.json()
    except ValueError:
        return _envelope(None, 1201, "The request body is not valid JSON.")
    if not isinstance(body, dict) or not isinstance(body.get("model_name"), str):
        return _envelope(None, 1201, "model_name is required.")
    if "callback_url" in body:
        return _envelope(None, 1201, "callback_url would make this simulator call out; the gateway keeps it.")
    prompt = str(body.get("prompt") or "")
    found = re.search(r"#fault=(\w+)", prompt)
    fault = found[1] if found else None
    if fault == "reject":
        return _envelope(None, 1201, "Simulated rejection (#fault=reject).")
    if fault == "500":
        return _envelope(None, 5000, "Simulated internal error (#fault=500).")
    reason = _mask_mismatch(body) if operation == "image2video" else None
    duration = str(body.get("duration") or "5")
    if operation == "motion-control":
        why_refused, duration, reason = _motion_control(body)
        if why_refused is not None:
            return _envelope(None, 1201, why_refused)
    task_id = uuid.uuid4().hex[:18]
    now = clock()
    TASKS[task_id] = {"operation": operation, "created": now, "fault": fault, "reason": reason,
                      "duration": duration, "n": int(body.get("n") or 1)}
    return _envelope({"task_id": task_id, "task_status": "submitted", "task_info": {},
                      "created_at": int(now * 1000), "updated_at": int(now * 1000)})


def _motion_control(body: dict) -> tuple[str | None, str, str | None]:
    """(why the submit is refused, the video's seconds, why the task will fail) of a motion control."""
    if "duration" in body:
        return "duration is not a parameter of motion control: the reference video sets the length.", "", None
    for name, allowed in (("character_orientation", ("image", "video")), ("mode", ("std", "pro"))):
        if body.get(name) not in allowed:
            return f"{name} is required: one of {', '.join(allowed)}.", "", None
    found = re.search(r"[?&]seconds=(\d+)", str(body.get("video_url") or ""))
    seconds = int(found[1]) if found else 7
    longest = 30 if body["character_orientation"] == "video" else 10
    if seconds > longest:
        return None, "", f"the reference video lasts {seconds} s; at most {longest} s with this orientation"
    return None, str(seconds), None


def _status(task: dict) -> str:
    elapsed, total = clock() - task["created"], task_seconds()
    if elapsed < total / 3:
        return "submitted"
    if elapsed < total:
        return "processing"
    return "failed" if task["fault"] == "fail" or task["reason"] else "succeed"


async def get_task(request: Request) -> Response:
    if (refused := _unauthorized(request)) is not None:
        return refused
    task_id = request.path_params["task_id"]
    operation = request.path_params.get("operation", "omni-image")
    task = TASKS.get(task_id)
    if task is None or task["operation"] != operation:
        return _envelope(None, 1203, f"Task {task_id} not found.")
    status = _status(task)
    base = _mount_url(request)
    result: dict = {}
    if status == "succeed" and operation == "omni-image":
        result = {"result_type": "single", "images": [{"index": i, "url": f"{base}/files/{task_id}-{i}.png"}
                                                      for i in range(task["n"])]}
    elif status == "succeed":
        result = {"videos": [{"id": f"v-{task_id}", "url": f"{base}/files/{task_id}.mp4",
                              "watermark_url": f"{base}/files/{task_id}.mp4", "duration": task["duration"]}]}
    message = {"failed": task["reason"] or "Simulated generation failure (#fault=fail)."}.get(status, "")
    return _envelope({"task_id": task_id, "task_status": status, "task_status_msg": message, "task_info": {},
                      "task_result": result, "created_at": int(task["created"] * 1000),
                      "updated_at": int(clock() * 1000), "final_unit_deduction": "1" if status == "succeed" else "0"})


async def create_custom(request: Request) -> Response:
    if (refused := _unauthorized(request)) is not None:
        return refused
    kind = "element" if request.url.path.endswith("custom-elements") else "voice"
    try:
        body = await request.json()
    except ValueError:
        return _envelope(None, 1201, "The request body is not valid JSON.")
    required = {"element": ("model_name", "element_name", "element_frontal_image"),
                "voice": ("voice_name", "voice_url")}[kind]
    missing = [name for name in required if not isinstance(body, dict) or not body.get(name)]
    if missing:
        return _envelope(None, 1201, f"{missing[0]} is required.")
    if kind == "voice":
        # "Create Custom Voice" (the upstream's API reference): voice_name at most 20 characters;
        # the voice is made by a task: the answer is `{task_id, task_status, ...}`, and the query
        # `GET /v1/general/custom-voices/{task_id}` names `task_result.voices[].voice_id` once made.
        if len(str(body["voice_name"])) > 20:
            return _envelope(None, 1201, "voice_name must be at most 20 characters.")
        task_id = uuid.uuid4().hex[:18]
        now = clock()
        VOICE_TASKS[task_id] = {"created": now, "voice_name": body["voice_name"],
                                "voice_id": f"v-{uuid.uuid4().hex[:12]}"}
        return _envelope({"task_id": task_id, "task_status": "submitted", "task_info": {},
                          "created_at": int(now * 1000), "updated_at": int(now * 1000)})
    record = {**body, f"{kind}_id": f"{kind[0]}-{uuid.uuid4().hex[:12]}", "status": "succeed"}
    CUSTOMS[kind][record[f"{kind}_id"]] = record
    return _envelope(record)


async def get_voice_task(request: Request) -> Response:
    if (refused := _unauthorized(request)) is not None:
        return refused
    task_id = request.path_params["task_id"]
    task = VOICE_TASKS.get(task_id)
    if task is None:
        return _envelope(None, 1203, f"Task {task_id} not found.")
    status = _status({**task, "fault": None, "reason": None})
    result: dict = {}
    if status == "succeed":
        voice = {"voice_id": task["voice_id"], "voice_name": task["voice_name"],
                 "trial_url": f"{_mount_url(request)}/files/{task_id}.mp4", "owned_by": "user"}
        CUSTOMS["voice"].setdefault(task["voice_id"], voice)
        result = {"voices": [voice]}
    return _envelope({"task_id": task_id, "task_status": status, "task_status_msg": "", "task_info": {},
                      "task_result": result, "created_at": int(task["created"] * 1000),
                      "updated_at": int(clock() * 1000)})


async def list_custom(request: Request) -> Response:
    if (refused := _unauthorized(request)) is not None:
        return refused
    kind = "element" if request.url.path.endswith("custom-elements") else "voice"
    return _envelope(list(CUSTOMS[kind].values()))


async def file(request: Request) -> Response:
    match = re.fullmatch(r"(\w+?)(?:-\d+)?\.(mp4|png)", request.path_params["name"])
    if not match or (match[1] not in TASKS and match[1] not in VOICE_TASKS):
        return _envelope(None, 1203, "The file is not found.")
    return Response(MP4_BYTES if match[2] == "mp4" else PNG_BYTES,
                    media_type="video/mp4" if match[2] == "mp4" else "image/png")


async def fault_everything(request: Request) -> Response:
    status = request.path_params["status"]
    return _envelope(None, 5000 if status >= 500 else 1201, f"Simulated failure of every request (/fault/{status}).",
                     status=status)


app = Starlette(routes=[
    Mount("/fault/{status:int}", routes=[Route("/{rest:path}", fault_everything, methods=["GET", "POST"])]),
    Route("/v1/videos/{operation:str}", submit, methods=["POST"]),
    Route("/v1/videos/{operation:str}/{task_id}", get_task, methods=["GET"]),
    Route("/v1/images/omni-image", submit, methods=["POST"]),
    Route("/v1/images/omni-image/{task_id}", get_task, methods=["GET"]),
    Route("/v1/general/custom-elements", create_custom, methods=["POST"]),
    Route("/v1/general/custom-elements", list_custom, methods=["GET"]),
    Route("/v1/general/custom-voices", create_custom, methods=["POST"]),
    Route("/v1/general/custom-voices", list_custom, methods=["GET"]),
    Route("/v1/general/custom-voices/{task_id}", get_voice_task, methods=["GET"]),
    Route("/files/{name}", file, methods=["GET"]),
])

# The provider's own refusals of the channel's key or account (`provider_faults`).
app = with_provider_faults(app, "kling")
