"""Video: the delta, zeta and epsilon families on the task engine, and their public answers.

The rules of each request live in `schemas/video.py`, the upstream words in the adapters'
status tables; this module turns a validated request into a `NewTask` and a stored task into
the answer of the spec (the delta / zeta submit answers, the generic result, the epsilon video
object). The content of an epsilon video is relayed from the upstream once it is complete.
"""

from __future__ import annotations

from typing import Any

import httpx

from gateway.auth import Principal
from gateway.errors import Conflict, InvalidRequest, NotFound, PayloadTooLarge, UpstreamFailed
from gateway.multipart import event_body, event_header, form_from_event
from gateway.tasks import engine
from gateway.tasks.adapters import GENERIC_TASK_STATUS, UpstreamRejected
from gateway.tasks.adapters.delta import SUBMIT_TASK_STATUS
from gateway.tasks.adapters.epsilon import CONTENT_VARIANTS, PUBLIC_STATUS, EpsilonAdapter
from gateway.tasks.adapters.zeta import PUBLIC_SUBMIT_STATUS
from gateway.tasks.callbacks import UnsafeCallback, check_url

GENERATIONS_ROUTE = "/v1/video/generations"
VIDEOS_ROUTE = "/v1/videos"
GENERIC_FAMILIES = ("delta", "zeta")
# A buffered Lambda answer is at most 6 MB after base64 (4/3): what is left for the bytes.
MAX_CONTENT_BYTES = 6 * 1024 * 1024 * 3 // 4 - 64 * 1024
_EPSILON = EpsilonAdapter()


def submit_generation(principal: Principal, body: bytes | str | None) -> dict[str, Any]:
    """POST /v1/video/generations: a delta or a zeta task, by the model's family."""
    # pydantic only on the routes that parse a body (queries and callbacks need none of it)
    from gateway.schemas.video import DeltaVideoRequest, ZetaVideoRequest, parse_generation_request
    from gateway.validation import parse_json

    request = parse_generation_request(parse_json(body))
    if isinstance(request, DeltaVideoRequest):
        task = engine.submit(principal, engine.NewTask(
            family="delta", model=request.model, upstream_request=request.upstream_body(),
            billable_seconds=request.billable_seconds, sample_count=request.sample_count, route=GENERATIONS_ROUTE,
            duration=str(request.parameters.durationSeconds)))
        return {"task_id": task["task_id"], "task_status": SUBMIT_TASK_STATUS, "message": ""}
    assert isinstance(request, ZetaVideoRequest)
    if request.callback_url is not None:
        try:
            check_url(request.callback_url, resolve=False)
        except UnsafeCallback as exc:
            raise InvalidRequest(f"callback_url: {exc}", param="callback_url") from None
    task = engine.submit(principal, engine.NewTask(
        family="zeta", model=request.model, upstream_request=request.upstream_body(),
        billable_seconds=request.billable_seconds, sample_count=request.sample_count, route=GENERATIONS_ROUTE,
        callback_url=request.callback_url, duration=str(request.duration)))
    return {"taskId": task["task_id"], "status": PUBLIC_SUBMIT_STATUS[engine.SUBMITTED]}


def generation_result(principal: Principal, task_id: str | None) -> dict[str, Any]:
    """GET /v1/video/generations/result?taskid=: the generic result, from the task store only."""
    if not task_id or not task_id.strip():
        raise InvalidRequest("taskid: is required", param="taskid")
    task = engine.owned_task(principal, task_id)
    if task["family"] not in GENERIC_FAMILIES:
        raise NotFound(f"task '{task_id}' does not exist", param="taskid", code="task_not_found")
    return generic_result(task)


def generic_result(task: dict[str, Any]) -> dict[str, Any]:
    urls = list(task.get("result_urls") or [])
    return {
        "task_id": task["task_id"], "video_result": urls[0] if urls else "", "video_results": urls,
        "video_id": task["task_id"], "task_status": GENERIC_TASK_STATUS[task["status"]],
        "message": task.get("error") or "", "duration": str(task.get("duration") or ""),
    }


def video_request_data(event: dict[str, Any]) -> Any:
    """The body of POST /v1/videos: JSON, or the multipart form the openai SDK sends."""
    from gateway.validation import parse_json

    if (event_header(event, "content-type") or "").lower().startswith("multipart/form-data"):
        form = form_from_event(event)
        if form.files:
            name = next(iter(form.files))
            raise InvalidRequest(f"{name}: file inputs are not supported; an epsilon video is made from the prompt",
                                 param=name)
        return dict(form.fields)
    return parse_json(event_body(event))


def create_video(principal: Principal, data: Any) -> dict[str, Any]:
    """POST /v1/videos: an epsilon video; the video object with progress 0."""
    from gateway.schemas.video import EpsilonVideoRequest
    from gateway.validation import parse_model

    request = parse_model(EpsilonVideoRequest, data)
    task = engine.submit(principal, engine.NewTask(
        family="epsilon", model=request.model, upstream_request=request.upstream_body(),
        billable_seconds=request.billable_seconds, sample_count=1, route=VIDEOS_ROUTE, id_prefix="video_",
        duration=request.seconds, public={"seconds": request.seconds, "size": request.size}))
    return video_object(task)


LIST_LIMIT, MAX_LIST_LIMIT = 20, 100


def list_videos(principal: Principal, query: dict[str, str] | None) -> dict[str, Any]:
    """GET /v1/videos: the caller's epsilon videos, newest first (`order=asc`: oldest first),
    `limit` (1 to 100, default 20) per page, `after` the last id of the previous page."""
    from gateway.store.tasks import TasksRepository

    query = query or {}
    limit = query.get("limit") or str(LIST_LIMIT)
    if not limit.isdigit() or not 1 <= int(limit) <= MAX_LIST_LIMIT:
        raise InvalidRequest(f"limit: must be an integer from 1 to {MAX_LIST_LIMIT}", param="limit")
    order = query.get("order") or "desc"
    if order not in ("asc", "desc"):
        raise InvalidRequest("order: must be asc or desc", param="order")
    newest_first, limit = order == "desc", int(limit)
    cursor = None
    if query.get("after"):
        after = _owned_video(principal, query["after"])  # someone else's id is a 404, as anywhere
        cursor = (int(after["created_at"]), after["task_id"])

    # Ties inside one creation second are ordered by id, so a page boundary never skips or repeats
    # one: read until the page is full and the second being read is past the page's last one.
    def key(task: dict[str, Any]) -> tuple[int, str]:
        return int(task["created_at"]), task["task_id"]

    def beyond(k: tuple[int, str], edge: tuple[int, str]) -> bool:
        return k < edge if newest_first else k > edge

    picked: list[dict[str, Any]] = []
    for task in TasksRepository().by_owner(principal.user_id, family="epsilon", newest_first=newest_first,
                                           at_most=cursor[0] if cursor else None):
        if cursor and not beyond(key(task), cursor):
            continue
        if len(picked) > limit and int(task["created_at"]) != int(picked[-1]["created_at"]):
            break
        picked.append(task)
    picked.sort(key=key, reverse=newest_first)
    page = [video_object(t) for t in picked[:limit]]
    return {"object": "list", "data": page, "first_id": page[0]["id"] if page else None,
            "last_id": page[-1]["id"] if page else None, "has_more": len(picked) > limit}


def get_video(principal: Principal, video_id: str) -> dict[str, Any]:
    return video_object(_owned_video(principal, video_id))


def _owned_video(principal: Principal, video_id: str) -> dict[str, Any]:
    task = engine.owned_task(principal, video_id)
    if task["family"] != "epsilon":
        raise NotFound(f"video '{video_id}' does not exist", param="video_id", code="video_not_found")
    return task


def video_object(task: dict[str, Any]) -> dict[str, Any]:
    public = task.get("public") or {}
    status = PUBLIC_STATUS[task["status"]]
    error = None
    if status == "failed":
        error = {"code": "video_generation_failed", "message": task.get("error") or "the video failed"}
    return {
        "id": task["task_id"], "object": "video", "created_at": int(task["created_at"]), "status": status,
        "completed_at": int(task["completed_at"]) if status == "completed" and task.get("completed_at") else None,
        "error": error, "expires_at": None, "model": task["model"],
        "progress": int(task.get("progress") or 0), "remixed_from_video_id": None,
        "seconds": str(public.get("seconds", task.get("duration") or "")), "size": public.get("size", ""),
    }


def video_content(principal: Principal, video_id: str, variant: str | None) -> tuple[bytes, str]:
    """GET /videos/{videoId}/content?variant=: the bytes of a completed video, and their media type."""
    variant = variant or "video"
    if variant not in CONTENT_VARIANTS:
        raise InvalidRequest(f"variant: must be one of {', '.join(CONTENT_VARIANTS)}", param="variant")
    task = _owned_video(principal, video_id)
    if task["status"] != "succeeded":
        status = PUBLIC_STATUS[task["status"]]
        raise Conflict(f"video '{video_id}' is {status}; its content exists once it is completed"
                       + (" (it failed, so it never will)" if status == "failed" else ""),
                       param="video_id", code="video_not_ready")
    try:
        channel = engine.channel_named(task["channel"])
        answer = engine.http_client().send(_EPSILON.build_content(channel.base_url, channel.api_key,
                                                                  task["upstream_task_id"], variant))
    except UpstreamRejected as exc:
        raise UpstreamFailed(exc.message) from None
    except httpx.HTTPError as exc:
        raise UpstreamFailed(f"the upstream content request failed: {type(exc).__name__}") from None
    if answer.status_code == 404:
        raise NotFound(f"the upstream no longer has the {variant} of video '{video_id}'", code="content_not_found")
    if not answer.is_success:
        raise UpstreamFailed(f"the upstream answered {answer.status_code} for the video content")
    if len(answer.content) > MAX_CONTENT_BYTES:
        raise PayloadTooLarge(f"the {variant} is {len(answer.content)} bytes, more than the {MAX_CONTENT_BYTES} "
                              "bytes a Lambda response can carry", code="content_too_large", status=502)
    media_type = answer.headers.get("content-type", "").split(";")[0].strip() or CONTENT_VARIANTS[variant]
    return answer.content, media_type


def callback_payload(task: dict[str, Any]) -> dict[str, Any]:
    """The body of a task's callback: what its family's query endpoint answers."""
    return video_object(task) if task["family"] == "epsilon" else generic_result(task)
