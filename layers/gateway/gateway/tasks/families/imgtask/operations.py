"""The imgtask operations behind `functions/imgtask`: each route's rules, then the engine.

A refused submit (any 4xx) holds nothing and stores nothing: every rule is checked before the
engine reserves. Another user's task, or a task of another family, is answered as unknown.
"""

from __future__ import annotations

import time
from typing import Any

import httpx
from pydantic import BaseModel

from gateway.auth import Principal
from gateway.errors import InvalidRequest, NotFound, PayloadTooLarge, UpstreamFailed
from gateway.imagetypes import IMAGE_MEDIA_TYPES, detect_image_type
from gateway.multipart import MAX_BINARY_ANSWER_BYTES
from gateway.routing.outbound import sync_client
from gateway.store.results import ResultsStore
from gateway.store.tasks import Task
from gateway.tasks import engine, kept, links
from gateway.tasks.callbacks import CallbackFailed, UnsafeCallback, check_url
from gateway.tasks.engine import NewTask
from gateway.tasks.families.imgtask import FAMILY, MODAL, image_path, model_of
from gateway.tasks.families.imgtask.adapter import BASIC, basic_change
from gateway.tasks.families.imgtask.images import read_image_at
from gateway.tasks.families.imgtask.schema import (
    TASK_ID,
    ActionRequest,
    BlendRequest,
    DescribeRequest,
    ImagineRequest,
    ModalRequest,
    ShortenRequest,
    SwapFaceRequest,
    button_action,
)
from gateway.upstreams.errors import UpstreamError
from gateway.validation import parse_json, parse_model

MAX_LIST_IDS = 100
ROUTE = "/imgtask/submit/"

#: Submit kind -> (request model, upstream path, record action, priced action).
_SIMPLE_SUBMITS: dict[str, tuple[type, str, str, str]] = {
    "imagine": (ImagineRequest, "/mj/submit/imagine", "IMAGINE", "imagine"),
    "blend": (BlendRequest, "/mj/submit/blend", "BLEND", "blend"),
    "describe": (DescribeRequest, "/mj/submit/describe", "DESCRIBE", "describe"),
    "shorten": (ShortenRequest, "/mj/submit/shorten", "SHORTEN", "shorten"),
    "insight-face/swap": (SwapFaceRequest, "/mj/insight-face/swap", "SWAP_FACE", "swap-face"),
}
SWAP = "insight-face/swap"  # the one submit outside /imgtask/submit/
SUBMIT_KINDS = (*_SIMPLE_SUBMITS, "action", "modal")


def _new_task(request: Any, *, upstream: dict[str, Any], action: str, priced: str, route: str, base_url: str,
              prompt: str, **engine_fields: Any) -> NewTask:
    public = {"action": action, "prompt": prompt, "state": request.state, "base_url": base_url,
              "submitTime": time.time_ns() // 1_000_000}
    return NewTask(family=FAMILY.name, model=model_of(priced), upstream_request=upstream, route=route,
                   quantities={"calls": 1}, callback_url=request.notifyHook, callback_field="notifyHook",
                   public={k: v for k, v in public.items() if v is not None}, **engine_fields)


def submit(principal: Principal, kind: str, body: str | bytes | None, base_url: str) -> dict[str, Any]:
    """POST /imgtask/submit/<kind> (and /imgtask/insight-face/swap): the submit answer."""
    if kind not in SUBMIT_KINDS:
        raise NotFound(f"no route for POST /imgtask/submit/{kind}", code="route_not_found")
    if kind == "action":
        return _action(principal, parse_model(ActionRequest, parse_json(body)), base_url)
    if kind == "modal":
        return _modal(principal, parse_model(ModalRequest, parse_json(body)))
    model, path, action, priced = _SIMPLE_SUBMITS[kind]
    request: BaseModel = parse_model(model, parse_json(body))
    upstream = request.model_dump(exclude_none=True, exclude={"notifyHook", "state"})
    new = _new_task(request, upstream={"path": path, "body": upstream, **_basic_form(kind, path, upstream)},
                    action=action, priced=priced,
                    route=ROUTE + kind if kind != SWAP else "/imgtask/" + SWAP, base_url=base_url,
                    prompt=getattr(request, "prompt", "") or "")
    return FAMILY.submit_answer(engine.submit(principal, new))


#: Submits the basic (open-source) midjourney-proxy has; the others need an extended channel.
_BASIC_SUBMITS = ("imagine", "blend", "describe")
_NEEDS = {"shorten": "shorten", SWAP: "face swap"}


def _basic_form(kind: str, path: str, body: dict[str, Any]) -> dict[str, Any]:
    """`basic`: the request as the basic build takes it (None: it cannot run it), and `needs`,
    what a refusal names (the family's `usable_channels`)."""
    if kind not in _BASIC_SUBMITS:
        return {"basic": None, "needs": _NEEDS.get(kind, kind)}
    if body.get("botType") == "NIJI_JOURNEY":
        return {"basic": None, "needs": "botType NIJI_JOURNEY"}
    return {"basic": {"path": path, "body": {k: v for k, v in body.items() if k != "botType"}}}


def _action(principal: Principal, request: ActionRequest, base_url: str) -> dict[str, Any]:
    parent = owned(principal, request.taskId, param="taskId")
    if FAMILY.public_status(parent) != "SUCCESS":
        raise InvalidRequest(f"taskId: task '{parent.task_id}' is {FAMILY.public_status(parent)}; an action needs a "
                             "task in SUCCESS", param="taskId")
    if request.customId not in {button.get("customId") for button in parent.details.get("buttons") or []}:
        raise InvalidRequest(f"customId: is not one of the buttons of task '{parent.task_id}'", param="customId")
    what = button_action(request.customId)
    change = basic_change(request.customId, parent.upstream_task_id) if what.modal is None else None
    new = _new_task(request, upstream={"path": "/mj/submit/action",
                                       "body": {"taskId": parent.upstream_task_id, "customId": request.customId},
                                       "basic": {"path": "/mj/submit/change", "body": change} if change else None,
                                       "needs": f"the button {request.customId}"},
                    action=what.action, priced=what.price, route=ROUTE + "action", base_url=base_url,
                    prompt=str(parent.public.get("prompt") or ""), parent_id=parent.task_id, channel=parent.channel)
    if what.modal is None:
        return FAMILY.submit_answer(engine.submit(principal, new))
    if new.callback_url is not None:  # checked now: the modal's completion must not fail on it later
        try:
            check_url(new.callback_url, resolve=False)
        except UnsafeCallback as exc:
            raise InvalidRequest(f"notifyHook: {exc}", param="notifyHook") from None
    new.public["customId"] = request.customId
    return FAMILY.submit_answer(engine.park(principal, new, what.modal))


def _modal(principal: Principal, request: ModalRequest) -> dict[str, Any]:
    parked = owned(principal, request.taskId, param="taskId")
    if FAMILY.public_status(parked) != MODAL:
        raise InvalidRequest(f"taskId: task '{parked.task_id}' is {FAMILY.public_status(parked)}, not waiting for a "
                             "modal", param="taskId")
    prompt = (request.prompt or "").strip()
    if parked.waiting_for == "CustomZoom" and not prompt:
        raise InvalidRequest("prompt: is required for a custom zoom (the prompt with its --zoom value)", param="prompt")
    if parked.waiting_for == "Inpaint" and request.maskBase64 is None:
        raise InvalidRequest("maskBase64: is required for a region vary (the mask of the region)", param="maskBase64")
    parent = engine.tasks().get(parked.parent_id or "")
    if parent is None:
        raise NotFound(f"taskId: the task '{parked.task_id}' acts on no longer exists", param="taskId")
    modal = {"prompt": prompt, **({"maskBase64": request.maskBase64} if request.maskBase64 else {})}
    new = NewTask(family=FAMILY.name, model=parked.model,
                  upstream_request={"path": "/mj/submit/action", "modal": modal,
                                    "body": {"taskId": parent.upstream_task_id,
                                             "customId": parked.public.get("customId")},
                                    "basic": None, "needs": "a modal"},
                  route=ROUTE + "modal", quantities=dict(parked.quantities), callback_url=parked.callback_url,
                  callback_field="notifyHook", public={"prompt": prompt or parked.public.get("prompt", "")},
                  parent_id=parked.parent_id, channel=parked.channel)
    return FAMILY.submit_answer(engine.submit(principal, new, parked=parked))


# ---------------------------------------------------------------------------------------------
# Reads
# ---------------------------------------------------------------------------------------------

def _visible(principal: Principal, task: Task) -> bool:
    return task.owner_id == str(principal.user_id) and task.family == FAMILY.name


def owned(principal: Principal, task_id: Any, *, param: str = "id") -> Task:
    """The caller's imgtask task; anybody else's, another family's or an unknown one is a 404."""
    task = None
    if isinstance(task_id, str) and TASK_ID.fullmatch(task_id):
        task = engine.tasks().get(task_id)
    if task is None or not _visible(principal, task):
        raise NotFound(f"{param}: task '{task_id}' does not exist", param=param, code="task_not_found")
    return task


def fetch(principal: Principal, task_id: str, base_url: str) -> dict[str, Any]:
    """GET /imgtask/task/{id}/fetch: the task record."""
    return FAMILY.record(owned(principal, task_id), base_url)


def list_by_condition(principal: Principal, body: str | bytes | None, base_url: str) -> list[dict[str, Any]]:
    """POST /imgtask/task/list-by-condition {ids}: the caller's records, in the order asked."""
    data = parse_json(body)
    ids = data.get("ids") if isinstance(data, dict) else None
    if not isinstance(ids, list):
        raise InvalidRequest("ids: is required and must be an array of task ids", param="ids")
    if len(ids) > MAX_LIST_IDS:
        raise InvalidRequest(f"ids: at most {MAX_LIST_IDS} task ids per call", param="ids")
    for index, task_id in enumerate(ids):
        if not isinstance(task_id, str):
            raise InvalidRequest(f"ids[{index}]: must be a task id string", param=f"ids[{index}]")
    found = engine.tasks().get_many([task_id for task_id in ids if TASK_ID.fullmatch(task_id)])
    # Unknown ids, other users' and other families' tasks are left out.
    return [FAMILY.record(found[task_id], base_url) for task_id in dict.fromkeys(ids)
            if task_id in found and _visible(principal, found[task_id])]


def image_seed(principal: Principal, task_id: str) -> dict[str, Any]:
    """GET /imgtask/task/{id}/image-seed: the seed of a finished task's image, from its channel."""
    task = owned(principal, task_id)
    status = FAMILY.public_status(task)
    if status != "SUCCESS":
        raise InvalidRequest(f"id: task '{task.task_id}' is {status}; its seed exists once it is SUCCESS", param="id")
    try:
        channel = engine.channel_named(task.channel)
        if FAMILY.variant(channel) == BASIC:
            raise InvalidRequest(f"id: the seed of task '{task.task_id}' is not available: its channel runs the "
                                 "basic (open-source) midjourney-proxy, which has no image-seed", param="id",
                                 code="not_supported_by_upstream")
        answer = sync_client.send(
            FAMILY.adapter.build_image_seed(channel.base_url, channel.api_key, task.upstream_task_id))
        code, description, result = FAMILY.adapter.parse_image_seed(answer)
    except UpstreamError as exc:
        raise UpstreamFailed(f"the upstream could not give the seed: {exc.message}") from None
    except httpx.HTTPError as exc:
        raise UpstreamFailed(f"the upstream seed request failed: {type(exc).__name__}") from None
    if code != 1:
        raise UpstreamFailed(f"the upstream could not give the seed (code {code}): {description}")
    return {"code": 1, "description": description or "success", "result": result}


def _read_image(task: Task) -> httpx.Response:
    return read_image_at(sync_client, engine.channel_named(task.channel), task.result_urls[0])


def image(principal: Principal | None, task_id: str, *, expires: str | None = None,
          signature: str | None = None) -> tuple[str, Any]:
    """GET /imgtask/image/{id}: a finished task's image, for its owner (`principal`) or for a
    valid signed link (`principal` None): ("redirect", a presigned S3 link) to the kept copy, else
    ("bytes", (data, media type)) relayed from the upstream."""
    if not TASK_ID.fullmatch(task_id or ""):
        raise InvalidRequest("id: must be an integer (a task id)", param="id")
    task: Task | None
    if principal is not None:
        task = owned(principal, task_id)
    else:
        task = engine.tasks().get(task_id) if links.valid(image_path(task_id), expires, signature) else None
        if task is None or task.family != FAMILY.name:
            raise NotFound(f"id: the link to task '{task_id}' is invalid or expired; fetch the task for a new one",
                           param="id", code="link_invalid")
    if FAMILY.public_status(task) != "SUCCESS" or not task.result_urls:
        raise NotFound(f"id: task '{task_id}' has no image (it is {FAMILY.public_status(task)})", param="id",
                       code="image_not_found")
    store = ResultsStore()
    if store.enabled and store.exists(kept.key(FAMILY.name, task_id, 0)):
        return "redirect", store.presigned(kept.key(FAMILY.name, task_id, 0))
    try:
        answer = _read_image(task)
    except UnsafeCallback:
        raise UpstreamFailed("the upstream named an image address the gateway does not read") from None
    except (UpstreamError, CallbackFailed, httpx.HTTPError) as exc:  # the channel gone, DNS, transport
        raise UpstreamFailed(f"the image could not be read from the upstream: {type(exc).__name__}") from None
    if answer.status_code in (403, 404, 410):
        raise NotFound(f"id: the upstream no longer has the image of task '{task_id}' (its image links expire)",
                       param="id", code="image_expired")
    if not answer.is_success:
        raise UpstreamFailed(f"the upstream answered {answer.status_code} for the image")
    if len(answer.content) > MAX_BINARY_ANSWER_BYTES:
        raise PayloadTooLarge(f"the image is {len(answer.content)} bytes, more than the {MAX_BINARY_ANSWER_BYTES} "
                              "bytes a Lambda response can carry", code="image_too_large", status=502)
    kind = detect_image_type(answer.content[:64])
    declared = answer.headers.get("content-type", "").split(";")[0].strip().lower()
    if kind is None and not declared.startswith("image/"):
        raise UpstreamFailed("the upstream's image address did not answer an image")
    return "bytes", (answer.content, IMAGE_MEDIA_TYPES[kind] if kind else declared)
