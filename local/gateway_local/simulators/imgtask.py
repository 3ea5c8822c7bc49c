"""Simulated imgtask upstream (the `/mj` protocol): image tasks that move along with the clock.

Mounted at `/imgtask`; every path here is relative to the mount. Every call needs a non-empty
`mj-api-secret` header. A submit answers `{code, description, result, properties}`. A task goes
NOT_START -> SUBMITTED -> IN_PROGRESS (progress rising) -> SUCCESS over `GATEWAY_SIM_TASK_SECONDS`
(default 3): a grid (imagine, variation, reroll, zoom, pan, blend) gets U1..U4, reroll and V1..V4;
an upscale gets vary, zoom, custom zoom, vary region and pan buttons. A custom zoom or vary region
answers 21 and waits in MODAL for `/mj/submit/modal`. Its image is a small PNG on this simulator,
and its image link dies after `GATEWAY_SIM_IMAGE_SECONDS` (default: never), as the real one's do.

Faults, written in the prompt: `#fault=big` (its image is a PNG of about 8 MB, the size of a
real grid's), `#fault=fail` (ends FAILURE with a reason), `#fault=stuck` (never
finishes), `#fault=queue` (the submit answers 23), `#fault=error` (it answers 9); `#queued` takes
the task with code 22 (queued). The word `forbidden` is banned (24, `properties.bannedWord`).

`/basic` (e.g. `/imgtask/basic/mj/...`) is the open-source midjourney-proxy (github
novicezk/midjourney-proxy: `SubmitController`, `TaskController`, `Task`): only `submit/imagine`,
`submit/change` (`{taskId, action: UPSCALE | VARIATION | REROLL, index}` on a finished IMAGINE,
VARIATION, REROLL or BLEND task; code 4 "action参数错误" otherwise), `submit/simple-change`
(`{content: "<id> U1"}`), `submit/describe`, `submit/blend`, `task/{id}/fetch` and
`task/list-by-condition`; any other path is Spring's 404 (`{timestamp, status: 404, error: "Not
Found", path}`). Its records carry `properties.messageHash` and no `buttons`.
"""

from __future__ import annotations

import hashlib
import itertools
import os
import re
import struct
import time
import zlib

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Mount, Route

from .provider_faults import with_provider_faults

clock = time.time  # tests replace this to move tasks along without waiting
TASKS: dict[str, dict] = {}
LIST_CALLS: list[list[str]] = []  # the ids of each list-by-condition call (tests count polls)
BANNED_WORDS = ("forbidden",)
_ids = itertools.count(1)


def task_seconds() -> float:
    return float(os.environ.get("GATEWAY_SIM_TASK_SECONDS", "3"))


BIG_IMAGE_BYTES = 8 * 1024 * 1024


def _chunk(kind: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)


def _png(seed: int) -> bytes:
    """A valid 2x2 RGB PNG whose colour depends on the task."""
    chunk = _chunk
    pixel = bytes([(seed * 37) % 256, (seed * 91) % 256, (seed * 53) % 256])
    raw = b"".join(b"\x00" + pixel * 2 for _ in range(2))
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", 2, 2, 8, 2, 0, 0, 0))
            + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b""))


def _answer(code: int, description: str, result: str | None = None, properties: dict | None = None) -> JSONResponse:
    return JSONResponse({"code": code, "description": description, "result": result, "properties": properties or {}})


def _authorized(request: Request) -> bool:
    return bool(request.headers.get("mj-api-secret", "").strip())


def _unauthorized() -> JSONResponse:
    return JSONResponse({"code": 401, "description": "mj-api-secret is missing or wrong"}, status_code=401)


def _mount_url(request: Request) -> str:
    return f"{request.url.scheme}://{request.url.netloc}{request.scope.get('root_path', '')}"


def _grid_buttons(job: str) -> list[dict]:
    buttons = [{"customId": f"MJ::JOB::upsample::{n}::{job}", "emoji": "", "label": f"U{n}", "style": 2, "type": 2}
               for n in range(1, 5)]
    buttons.append({"customId": f"MJ::JOB::reroll::0::{job}::SOLO", "emoji": "🔄", "label": "", "style": 2,
                    "type": 2})
    buttons += [{"customId": f"MJ::JOB::variation::{n}::{job}", "emoji": "", "label": f"V{n}", "style": 2,
                 "type": 2} for n in range(1, 5)]
    return buttons


def _upscale_buttons(job: str) -> list[dict]:
    def button(custom_id: str, label: str, emoji: str = "", style: int = 2) -> dict:
        return {"customId": custom_id, "emoji": emoji, "label": label, "style": style, "type": 2}

    return [button(f"MJ::JOB::low_variation::1::{job}::SOLO", "Vary (Subtle)", "🪄"),
            button(f"MJ::JOB::high_variation::1::{job}::SOLO", "Vary (Strong)", "🪄"),
            button(f"MJ::Inpaint::1::{job}::SOLO", "Vary (Region)", "🖌️"),
            button(f"MJ::Outpaint::50::1::{job}::SOLO", "Zoom Out 2x", "🔍", 3),
            button(f"MJ::CustomZoom::{job}", "Custom Zoom", "🔍"),
            *(button(f"MJ::JOB::pan_{side}::1::{job}::SOLO", "", arrow)
              for side, arrow in (("left", "⬅️"), ("right", "➡️"), ("up", "⬆️"), ("down", "⬇️")))]


def _new_task(action: str, prompt: str, *, status: str = "NOT_START", parent: str | None = None) -> str:
    task_id = str(1_700_000_000_000 + next(_ids))
    fault = re.search(r"#fault=(\w+)", prompt)
    TASKS[task_id] = {"id": task_id, "action": action, "prompt": prompt, "created": clock(),
                      "fault": fault[1] if fault else None, "status": status, "parent": parent,
                      "job": hashlib.sha1(task_id.encode()).hexdigest()[:32]}
    return task_id


def _refusal(prompt: str) -> JSONResponse | None:
    if re.search(r"#fault=queue", prompt):
        return _answer(23, "Queue is full, please try again later", properties={"numberOfQueues": 5})
    if re.search(r"#fault=error", prompt):
        return _answer(9, "Simulated failure (#fault=error)")
    for word in BANNED_WORDS:
        if re.search(rf"\b{word}\b", prompt, re.I):
            return _answer(24, "Banned prompt", properties={"promptEn": prompt, "bannedWord": word})
    return None


async def _json(request: Request) -> dict | None:
    try:
        body = await request.json()
    except ValueError:
        return None
    return body if isinstance(body, dict) else None


async def submit(request: Request) -> Response:
    if not _authorized(request):
        return _unauthorized()
    body = await _json(request)
    kind = request.path_params["kind"]
    if body is None:
        return _answer(4, "request body must be a JSON object")
    if kind == "imagine" or kind == "shorten":
        prompt = body.get("prompt")
        if not isinstance(prompt, str) or not prompt.strip():
            return _answer(4, "prompt cannot be empty")
        refusal = _refusal(prompt)
        if refusal is not None:
            return refusal
        task_id = _new_task(kind.upper(), prompt)
        if "#queued" in prompt:
            return _answer(22, "In queue, there are 2 tasks ahead", task_id, {"numberOfQueues": 2})
        return _answer(1, "Submit success", task_id)
    if kind == "blend":
        images = body.get("base64Array")
        if not isinstance(images, list) or not 2 <= len(images) <= 5:
            return _answer(4, "base64List parameter error")
        return _answer(1, "Submit success", _new_task("BLEND", ""))
    if kind == "describe":
        if not isinstance(body.get("base64"), str):
            return _answer(4, "base64 parameter error")
        return _answer(1, "Submit success", _new_task("DESCRIBE", ""))
    if kind == "action":
        return _action(body)
    if kind == "modal":
        task = TASKS.get(str(body.get("taskId")))
        if task is None:
            return _answer(3, "task not found")
        if task["status"] != "MODAL":
            return _answer(4, "the task is not waiting for a modal")
        prompt = str(body.get("prompt") or "")
        refusal = _refusal(prompt)
        if refusal is not None:
            return refusal
        fault = re.search(r"#fault=(\w+)", prompt)
        task.update(status="NOT_START", created=clock(), prompt=prompt or task["prompt"],
                    fault=fault[1] if fault else None)
        return _answer(1, "Submit success", task["id"])
    return JSONResponse({"code": 404, "description": f"no submit {kind}"}, status_code=404)


def _action(body: dict) -> Response:
    parent = TASKS.get(str(body.get("taskId")))
    custom_id = body.get("customId")
    if parent is None:
        return _answer(3, "task not found")
    if _status(parent)[0] != "SUCCESS" or not isinstance(custom_id, str):
        return _answer(4, "the task has no such button")
    if custom_id not in {b["customId"] for b in _buttons(parent)}:
        return _answer(4, "customId not found on the task")
    actions = (("upsample", "UPSCALE"), ("variation", "VARIATION"), ("reroll", "IMAGINE"), ("Outpaint", "ZOOM"),
               ("CustomZoom", "ZOOM"), ("pan_", "PAN"), ("Inpaint", "VARIATION"))
    action = next((action for pattern, action in actions if pattern in custom_id), "VARIATION")
    modal = "CustomZoom" in custom_id or "Inpaint" in custom_id
    task_id = _new_task(action, parent["prompt"], status="MODAL" if modal else "NOT_START", parent=parent["id"])
    if modal:
        return _answer(21, "Waiting for window confirm", task_id, {"finalPrompt": parent["prompt"], "remix": True})
    return _answer(1, "Submit success", task_id)


def _buttons(task: dict) -> list[dict]:
    if task["action"] in ("UPSCALE",):
        return _upscale_buttons(task["job"])
    if task["action"] in ("DESCRIBE", "SHORTEN", "SWAP_FACE"):
        return []
    return _grid_buttons(task["job"])


def _status(task: dict) -> tuple[str, int]:
    if task["status"] == "MODAL":
        return "MODAL", 0
    elapsed, total = clock() - task["created"], task_seconds()
    if elapsed < total * 0.1:
        return "NOT_START", 0
    if elapsed < total * 0.25:
        return "SUBMITTED", 0
    if elapsed < total or task["fault"] == "stuck":
        return "IN_PROGRESS", min(99, int((elapsed - total * 0.25) / (total * 0.75) * 100)) // 10 * 10
    if task["fault"] == "fail":
        return "FAILURE", 0
    return "SUCCESS", 100


def _record(task: dict, request: Request) -> dict:
    if task.get("basic"):
        return _basic_record(task, request)
    status, progress = _status(task)
    created_ms = int(task["created"] * 1000)
    record = {"id": task["id"], "action": task["action"], "status": status, "progress": f"{progress}%",
              "prompt": task["prompt"], "promptEn": task["prompt"], "description": "/imagine " + task["prompt"],
              "state": None, "submitTime": created_ms, "startTime": None, "finishTime": None, "imageUrl": None,
              "failReason": None, "properties": {"finalPrompt": task["prompt"], "discordInstanceId": "sim-account-1"},
              "buttons": []}
    if status in ("IN_PROGRESS", "SUCCESS", "FAILURE"):
        record["startTime"] = created_ms + int(task_seconds() * 250)
    if status == "SUCCESS":
        record.update(finishTime=created_ms + int(task_seconds() * 1000), buttons=_buttons(task),
                      imageUrl=f"{_mount_url(request)}/attachments/{task['id']}/grid_{task['job']}.png")
    elif status == "FAILURE":
        record.update(finishTime=created_ms + int(task_seconds() * 1000),
                      failReason="Simulated failure (#fault=fail): the job was rejected")
    return record


async def fetch(request: Request) -> Response:
    if not _authorized(request):
        return _unauthorized()
    task = TASKS.get(request.path_params["task_id"])
    if task is None:
        return JSONResponse({"code": 3, "description": "task not found"}, status_code=404)
    return JSONResponse(_record(task, request))


async def list_by_condition(request: Request) -> Response:
    if not _authorized(request):
        return _unauthorized()
    body = await _json(request)
    ids = body.get("ids") if body else None
    if not isinstance(ids, list):
        return JSONResponse({"code": 4, "description": "ids must be an array"}, status_code=400)
    LIST_CALLS.append([str(i) for i in ids])
    return JSONResponse([_record(TASKS[str(i)], request) for i in ids if str(i) in TASKS])


async def image_seed(request: Request) -> Response:
    if not _authorized(request):
        return _unauthorized()
    task = TASKS.get(request.path_params["task_id"])
    if task is None:
        return _answer(3, "task not found")
    if _status(task)[0] != "SUCCESS":
        return _answer(4, "the task has not finished")
    return _answer(1, "success", str(int(task["job"][:8], 16) % 4294967295))


async def attachment(request: Request) -> Response:
    task = TASKS.get(request.path_params["task_id"])
    lifetime = float(os.environ.get("GATEWAY_SIM_IMAGE_SECONDS", "0"))
    if task is None or _status(task)[0] != "SUCCESS" or request.path_params["name"] != f"grid_{task['job']}.png":
        return Response(b"not found", status_code=404, media_type="text/plain")
    if lifetime and clock() - task["created"] - task_seconds() > lifetime:
        return Response(b"this link has expired", status_code=404, media_type="text/plain")
    image = _png(int(task["id"]) % 1000)
    if task["fault"] == "big":  # the size of a real grid's PNG: more than a buffered Lambda answer carries
        image = image[:-12] + _chunk(b"tEXt", b"Comment\x00" + b"x" * BIG_IMAGE_BYTES) + image[-12:]
    return Response(image, media_type="image/png")


async def swap(request: Request) -> Response:
    if not _authorized(request):
        return _unauthorized()
    body = await _json(request)
    if body is None or not isinstance(body.get("sourceBase64"), str) or not isinstance(body.get("targetBase64"), str):
        return _answer(4, "sourceBase64 and targetBase64 are required")
    return _answer(1, "Submit success", _new_task("SWAP_FACE", ""))


# --- the basic build: the open-source midjourney-proxy -----------------------------------------

def _basic_record(task: dict, request: Request) -> dict:
    """A record of the open-source build: its `Task` fields, `properties.messageHash`, no buttons."""
    record = _record({**task, "basic": False}, request)
    record.pop("buttons", None)
    record["properties"] = {"finalPrompt": task["prompt"], "messageHash": task["job"]}
    return record


def _spring_404(request: Request) -> JSONResponse:
    return JSONResponse({"timestamp": "2026-01-01T00:00:00.000+00:00", "status": 404, "error": "Not Found",
                         "path": request.url.path}, status_code=404)


async def basic_submit(request: Request) -> Response:
    if not _authorized(request):
        return _unauthorized()
    kind = request.path_params["kind"]
    if kind not in ("imagine", "change", "simple-change", "describe", "blend"):
        return _spring_404(request)
    body = await _json(request)
    if body is None:
        return _answer(4, "request body must be a JSON object")
    if kind == "simple-change":
        found = re.fullmatch(r"\s*(\d+)\s+(?:([UV])([1-4])|(R))\s*", str(body.get("content") or ""))
        if found is None:
            return _answer(4, "content参数错误")
        body = {"taskId": found[1], "action": "REROLL" if found[4] else {"U": "UPSCALE", "V": "VARIATION"}[found[2]],
                **({} if found[4] else {"index": int(found[3])})}
        kind = "change"
    if kind == "change":
        return _basic_change(body)
    answer = await submit(request)
    if answer.status_code == 200:
        import json

        made = json.loads(bytes(answer.body))
        if made.get("result") in TASKS:
            TASKS[made["result"]]["basic"] = True
    return answer


def _basic_change(body: dict) -> Response:
    if not str(body.get("taskId") or "").strip():
        return _answer(4, "taskId不能为空")
    action, index = body.get("action"), body.get("index")
    if action not in ("UPSCALE", "VARIATION", "REROLL"):
        return _answer(4, "action参数错误")
    if action != "REROLL" and index not in (1, 2, 3, 4):
        return _answer(4, "index参数错误")
    parent = TASKS.get(str(body["taskId"]))
    if parent is None:
        return _answer(3, "关联任务不存在或已失效")
    if _status(parent)[0] != "SUCCESS":
        return _answer(4, "关联任务状态错误")
    if parent["action"] not in ("IMAGINE", "VARIATION", "REROLL", "BLEND"):
        return _answer(4, "关联任务不允许执行变化")
    task_id = _new_task(action, parent["prompt"], parent=parent["id"])
    TASKS[task_id]["basic"] = True
    return _answer(1, "Submit success", task_id)


basic_app = Starlette(routes=[
    Route("/mj/submit/{kind}", basic_submit, methods=["POST"]),
    Route("/mj/task/list-by-condition", list_by_condition, methods=["POST"]),
    Route("/mj/task/{task_id}/fetch", fetch, methods=["GET"]),
    Route("/attachments/{task_id}/{name}", attachment, methods=["GET"]),
    Route("/{rest:path}", _spring_404, methods=["GET", "POST"]),
])


app = Starlette(routes=[
    Mount("/basic", app=basic_app),
    Route("/mj/submit/{kind}", submit, methods=["POST"]),
    Route("/mj/insight-face/swap", swap, methods=["POST"]),
    Route("/mj/task/list-by-condition", list_by_condition, methods=["POST"]),
    Route("/mj/task/{task_id}/fetch", fetch, methods=["GET"]),
    Route("/mj/task/{task_id}/image-seed", image_seed, methods=["GET"]),
    Route("/attachments/{task_id}/{name}", attachment, methods=["GET"]),
])

# The provider's own refusals of the channel's key or account (`provider_faults`).
app = with_provider_faults(app, "midjourney-proxy")
