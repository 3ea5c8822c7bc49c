"""What the alpha routes do (`functions/alpha/app.py` only adapts the HTTP event): submit a
task of an operation, read one from the task store, create and read custom elements and voices.
Every answer is the `data` of the upstream's envelope, which `envelope` wraps."""

from __future__ import annotations

from typing import Any

from gateway.auth import Principal
from gateway.errors import InvalidRequest
from gateway.tasks import engine
from gateway.tasks.families import family_of
from gateway.tasks.families.alpha import customs

SUCCEED = "SUCCEED"
#: The route of each operation (for the ledger and the query routes).
ROUTES = {
    "text2video": "/alpha/v1/videos/text2video",
    "image2video": "/alpha/v1/videos/image2video",
    "omni-video": "/alpha/v1/videos/omni-video",
    "motion-control": "/alpha/v1/videos/motion-control",
    "omni-image": "/alpha/v1/images/omni-image",
}
#: Which tasks each query route shows: text2video's also shows image2video's, since the spec
#: names no image2video query.
QUERY_OPERATIONS = {
    "text2video": ("text2video", "image2video"),
    "image2video": ("image2video",),
    "omni-video": ("omni-video",),
    "motion-control": ("motion-control",),
    "omni-image": ("omni-image",),
}


def _family() -> Any:
    return family_of("alpha")


def envelope(data: Any, request_id: str) -> dict[str, Any]:
    return {"code": 0, "message": SUCCEED, "request_id": request_id, "data": data}


def submit(principal: Principal, operation: str, body: str | bytes | None) -> dict[str, Any]:
    from gateway.validation import parse_json  # pydantic only where a body is parsed

    family = _family()
    return family.submit_answer(engine.submit(principal, family.new_task(operation, parse_json(body),
                                                                         ROUTES[operation])))


def query(principal: Principal, operation: str, task_id: str, model_header: str | None = None,
          *, header_required: bool = False) -> dict[str, Any]:
    """One of the caller's tasks of the operations the route shows (the text2video query also
    takes the spec's required `model` header)."""
    if header_required and not (model_header or "").strip():
        raise InvalidRequest("model: the header is required (the model of the task)", param="model")
    family = _family()
    return family.query_answer(family.owned(principal, task_id, QUERY_OPERATIONS[operation]))


def general_query(principal: Principal, path_id: str, taskid: str | None) -> dict[str, Any]:
    """`GET /alpha/v1/video/{task_id}?taskid=`: any of the caller's alpha tasks. `taskid` is
    required by the spec and names the task; the path must name the same one."""
    if not taskid or not taskid.strip():
        raise InvalidRequest("taskid: is required", param="taskid")
    if path_id.strip() != taskid.strip():
        raise InvalidRequest(f"taskid: {taskid!r} is not the task of the path ({path_id!r})", param="taskid")
    family = _family()
    return family.query_answer(family.owned(principal, taskid))


def create_custom(principal: Principal, kind: str, body: str | bytes | None) -> dict[str, Any]:
    from gateway.validation import parse_json

    return customs.create(principal, kind, parse_json(body))


def list_custom(principal: Principal, kind: str, model_name: str | None) -> list[dict[str, Any]]:
    return customs.list_own(principal, kind, model_name)


def get_custom(principal: Principal, kind: str, asset_id: str, model_name: str | None) -> dict[str, Any]:
    return customs.get_own(principal, kind, asset_id, model_name)
