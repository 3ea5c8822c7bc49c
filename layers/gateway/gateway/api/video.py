"""The video routes: the generic generation route of every family served there, and the epsilon
video routes. Each family's rules, prices and answers are its own (`gateway.tasks.families`);
this module parses a body, picks the family and hands the task to the engine.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from gateway.auth import Principal
from gateway.errors import InvalidRequest, NotFound
from gateway.multipart import event_body, event_header, form_from_event
from gateway.tasks import engine
from gateway.tasks.families import FAMILIES, families, family_of
from gateway.tasks.families.base import TaskFamily

GENERATIONS_ROUTE = "/v1/video/generations"
VIDEOS_ROUTE = "/v1/videos"


def _epsilon() -> Any:
    return family_of("epsilon")


def video_family(model: Any) -> TaskFamily:
    """The task family a model id belongs to, or a 400 naming the model."""
    family = next((family for family in families() if family.owns_model(model)), None)
    if family is None:
        raise InvalidRequest(f"model: {model!r} is not a model of any task family ({', '.join(FAMILIES)})",
                             param="model")
    return family


def generic_family(data: Any) -> TaskFamily:
    """The family of a `POST /v1/video/generations` body, by its model; a 400 naming the field."""
    if not isinstance(data, dict):
        raise InvalidRequest("request body must be a JSON object")
    if "model" not in data:
        raise InvalidRequest("model: is required", param="model")
    family = video_family(data["model"])
    if not family.generic_route:
        raise InvalidRequest(f"model: {family.name} tasks are created with {family.submit_route}", param="model")
    return family


def submit_generation(principal: Principal, body: bytes | str | None, base_url: str = "") -> dict[str, Any]:
    """POST /v1/video/generations: a task of the model's family. The gateway's public base URL
    is kept with it: the links a family signs for its results are built on it."""
    from gateway.validation import parse_json  # pydantic only on the routes that parse a body

    data = parse_json(body)
    family = generic_family(data)
    new = family.generic_task(data, GENERATIONS_ROUTE)
    if base_url:
        new = dataclasses.replace(new, public={**new.public, "base_url": base_url.rstrip("/")})
    return family.submit_answer(engine.submit(principal, new))


def kept_result(task_id: str, index: str, expires: str | None, signature: str | None) -> tuple[str, Any]:
    """GET /v1/video/results/{task_id}/{index}: a delta video, for whoever holds the signed link."""
    from gateway.tasks.families.delta import FAMILY as DELTA

    return DELTA.result(task_id, index, expires, signature)


def generation_result(principal: Principal, task_id: str | None) -> dict[str, Any]:
    """GET /v1/video/generations/result?taskid=: the generic result, from the task store only."""
    if not task_id or not task_id.strip():
        raise InvalidRequest("taskid: is required", param="taskid")
    task = engine.owned_task(principal, task_id)
    family = family_of(task.family)
    if not family.generic_route:
        raise NotFound(f"task '{task_id}' does not exist", param="taskid", code="task_not_found")
    return family.generic_answer(task)


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
    family = _epsilon()
    return family.submit_answer(engine.submit(principal, family.create_task(data, VIDEOS_ROUTE)))


LIST_LIMIT, MAX_LIST_LIMIT = 20, 100


def list_videos(principal: Principal, query: dict[str, str] | None) -> dict[str, Any]:
    """GET /v1/videos: the caller's epsilon videos, newest first (`order=asc`: oldest first),
    `limit` (1 to 100, default 20) per page, `after` the last id of the previous page."""
    from gateway.store.tasks import Task, TasksRepository

    query = query or {}
    limit = query.get("limit") or str(LIST_LIMIT)
    if not limit.isdigit() or not 1 <= int(limit) <= MAX_LIST_LIMIT:
        raise InvalidRequest(f"limit: must be an integer from 1 to {MAX_LIST_LIMIT}", param="limit")
    order = query.get("order") or "desc"
    if order not in ("asc", "desc"):
        raise InvalidRequest("order: must be asc or desc", param="order")
    newest_first, count = order == "desc", int(limit)
    cursor = None
    if query.get("after"):
        after = _epsilon().owned_video(principal, query["after"])  # someone else's id is a 404, as anywhere
        cursor = (int(after.created_at), after.task_id)

    # Ties inside one creation second are ordered by id, so a page boundary never skips or repeats
    # one: read until the page is full and the second being read is past the page's last one.
    def key(task: Task) -> tuple[int, str]:
        return int(task.created_at), task.task_id

    def beyond(k: tuple[int, str], edge: tuple[int, str]) -> bool:
        return k < edge if newest_first else k > edge

    picked: list[Task] = []
    for task in TasksRepository().by_owner(principal.user_id, family="epsilon", newest_first=newest_first,
                                           at_most=cursor[0] if cursor else None):
        if cursor and not beyond(key(task), cursor):
            continue
        if len(picked) > count and int(task.created_at) != int(picked[-1].created_at):
            break
        picked.append(task)
    picked.sort(key=key, reverse=newest_first)
    family = _epsilon()
    page = [family.query_answer(t) for t in picked[:count]]
    return {"object": "list", "data": page, "first_id": page[0]["id"] if page else None,
            "last_id": page[-1]["id"] if page else None, "has_more": len(picked) > count}


def get_video(principal: Principal, video_id: str) -> dict[str, Any]:
    family = _epsilon()
    return family.query_answer(family.owned_video(principal, video_id))


def video_content(principal: Principal, video_id: str, variant: str | None) -> tuple[str, Any]:
    """GET /videos/{videoId}/content?variant=: a redirect to a completed video's kept copy, or its
    bytes and their media type (`EpsilonFamily.content`)."""
    return _epsilon().content(principal, video_id, variant)
