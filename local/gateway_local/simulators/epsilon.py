"""Simulated epsilon upstream: video objects, queued → in_progress → completed, and their content.

Mounted at `/epsilon`; every path here is relative to the mount. A video's state is computed
from the time since it was submitted (`GATEWAY_SIM_TASK_SECONDS`, default 3: queued for the
first fifth, then in_progress with a rising progress). Faults, written anywhere in the prompt:
`#fault=fail` (the video ends failed with an error), `#fault=reject` (the submit answers 400),
`#fault=500` (the submit answers 500), `#fault=big` (the video's content is an MP4 of
`BIG_MP4_BYTES`, the size of a real 1080p clip of a few seconds: more than a buffered Lambda
answer carries). A base URL ending in `/fault/<status>` (e.g.
`/epsilon/fault/500`) answers every request with that status.
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

clock = time.time  # tests replace this to move videos along without waiting
VIDEOS: dict[str, dict] = {}

# Small, recognisable files: an ISO-BMFF header, a 1x1 lossless WebP and a bare JFIF header.
MP4_BYTES = struct.pack(">I4s4sI4s4s", 24, b"ftyp", b"isom", 0x200, b"isom", b"mp41") + struct.pack(">I4s", 8, b"mdat")
WEBP_BYTES = bytes.fromhex("524946461a000000574542505650384c0d0000002f00000010071011118888fe0700")
BIG_MP4_BYTES = 8 * 1024 * 1024
JPEG_BYTES = bytes.fromhex("ffd8ffe000104a46494600010100000100010000ffd9")
CONTENT = {"video": (MP4_BYTES, "video/mp4"), "thumbnail": (WEBP_BYTES, "image/webp"),
           "spritesheet": (JPEG_BYTES, "image/jpeg")}
SECONDS = ("4", "8", "12")
SIZES = ("720x1280", "1280x720", "1024x1792", "1792x1024")

_TYPES = {400: "invalid_request_error", 401: "invalid_request_error", 404: "invalid_request_error",
          409: "invalid_request_error", 429: "rate_limit_error"}


def task_seconds() -> float:
    return float(os.environ.get("GATEWAY_SIM_TASK_SECONDS", "3"))


def _error(status: int, message: str, *, param: str | None = None, code: str | None = None) -> JSONResponse:
    return JSONResponse({"error": {"message": message, "type": _TYPES.get(status, "server_error"), "param": param,
                                   "code": code}}, status_code=status)


def _authorized(request: Request) -> bool:
    scheme, _, token = request.headers.get("authorization", "").partition(" ")
    return scheme.lower() == "bearer" and bool(token.strip())


def _unauthorized() -> JSONResponse:
    return _error(401, "You didn't provide an API key. Send it as Authorization: Bearer <key>.")


async def create(request: Request) -> Response:
    if not _authorized(request):
        return _unauthorized()
    try:
        body = await request.json()
    except ValueError:
        return _error(400, "The request body is not valid JSON.")
    if not isinstance(body, dict) or not isinstance(body.get("prompt"), str) or not body["prompt"].strip():
        return _error(400, "Missing required parameter: 'prompt'.", param="prompt")
    seconds, size = body.get("seconds", "4"), body.get("size", "720x1280")
    if seconds not in SECONDS:
        return _error(400, f"Invalid value for 'seconds': must be one of {', '.join(SECONDS)}.", param="seconds")
    if size not in SIZES:
        return _error(400, f"Invalid value for 'size': must be one of {', '.join(SIZES)}.", param="size")
    found = re.search(r"#fault=(\w+)", body["prompt"])
    fault = found[1] if found else None
    if fault == "reject":
        return _error(400, "Simulated rejection (#fault=reject).", code="simulated_rejection")
    if fault == "500":
        return _error(500, "Simulated internal error (#fault=500).")
    video_id = f"video_{uuid.uuid4().hex}"
    VIDEOS[video_id] = {"model": str(body.get("model") or "epsilon-2"), "seconds": seconds, "size": size,
                        "created": clock(), "fault": fault}
    return JSONResponse(_video_object(video_id))


def _state(video: dict) -> tuple[str, int]:
    elapsed, total = clock() - video["created"], task_seconds()
    if elapsed >= total:
        return ("failed", 0) if video["fault"] == "fail" else ("completed", 100)
    if elapsed < total / 5:
        return "queued", 0
    return "in_progress", max(1, min(99, int(100 * elapsed / total)))


def _video_object(video_id: str) -> dict:
    video = VIDEOS[video_id]
    status, progress = _state(video)
    finished = int(video["created"] + task_seconds())
    return {
        "id": video_id, "object": "video", "created_at": int(video["created"]), "status": status,
        "completed_at": finished if status == "completed" else None,
        "error": {"code": "video_generation_failed", "message": "Simulated generation failure (#fault=fail)."}
        if status == "failed" else None,
        "expires_at": finished + 86400 if status == "completed" else None,
        "model": video["model"], "progress": progress, "remixed_from_video_id": None,
        "seconds": video["seconds"], "size": video["size"],
    }


async def retrieve(request: Request) -> Response:
    if not _authorized(request):
        return _unauthorized()
    video_id = request.path_params["video_id"]
    if video_id not in VIDEOS:
        return _error(404, f"Video with id '{video_id}' not found.", param="video_id", code="not_found")
    return JSONResponse(_video_object(video_id))


async def content(request: Request) -> Response:
    if not _authorized(request):
        return _unauthorized()
    video_id = request.path_params["video_id"]
    if video_id not in VIDEOS:
        return _error(404, f"Video with id '{video_id}' not found.", param="video_id", code="not_found")
    variant = request.query_params.get("variant", "video")
    if variant not in CONTENT:
        return _error(400, f"Invalid value for 'variant': must be one of {', '.join(CONTENT)}.", param="variant")
    status, _ = _state(VIDEOS[video_id])
    if status != "completed":
        return _error(409, f"Video is {status}; content is available once it is completed.",
                      code="video_not_ready")
    data, media_type = CONTENT[variant]
    if variant == "video" and VIDEOS[video_id]["fault"] == "big":
        data = MP4_BYTES[:24] + struct.pack(">I4s", 8 + BIG_MP4_BYTES, b"mdat") + bytes(BIG_MP4_BYTES)
    return Response(data, media_type=media_type)


async def fault_everything(request: Request) -> Response:
    status = request.path_params["status"]
    return _error(status, f"Simulated failure of every request (/fault/{status}).")


app = Starlette(routes=[
    Mount("/fault/{status:int}", routes=[Route("/{rest:path}", fault_everything, methods=["GET", "POST", "DELETE"])]),
    Route("/v1/videos", create, methods=["POST"]),
    Route("/v1/videos/{video_id}", retrieve, methods=["GET"]),
    Route("/v1/videos/{video_id}/content", content, methods=["GET"]),
])

# The provider's own refusals of the channel's key or account (`provider_faults`).
app = with_provider_faults(app, "openai")
