"""Alpha upstream: five task operations polled at `<submit path>/<task id>`, and the custom
elements and voices, all behind a short-lived HS256 token signed from the channel's `access|secret`.

The token is signed with the standard library (`hmac`): PyJWT would import `cryptography` on a
cold start for one HMAC (bench/cold_start.py, docs/families.md "Alpha").
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import time
from collections.abc import Mapping
from typing import Any
from urllib.parse import quote

import httpx

from gateway.tasks.adapter import TaskSnapshot, join, object_at, read_json, unified
from gateway.tasks.families.alpha.errors import ERRORS, documented_status
from gateway.upstreams.errors import UpstreamError

#: operation -> the upstream's submit path (its query is `<path>/<task id>`).
OPERATIONS: Mapping[str, str] = {
    "text2video": "/v1/videos/text2video",
    "image2video": "/v1/videos/image2video",
    "omni-video": "/v1/videos/omni-video",
    "motion-control": "/v1/videos/motion-control",
    "omni-image": "/v1/images/omni-image",
}
#: kind of custom asset -> the upstream's path (a POST creates one, a GET lists them).
CUSTOM_PATHS: Mapping[str, str] = {
    "element": "/v1/general/custom-elements",
    "voice": "/v1/general/custom-voices",
}

STATUSES: Mapping[str, str] = {
    "submitted": "queued", "processing": "in_progress", "succeed": "succeeded", "failed": "failed",
}
TOKEN_SECONDS = 1800  # the upstream's own advice: a token lives 30 minutes
TOKEN_SKEW = 5  # valid from a few seconds ago, for clocks that differ a little


def _b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def bearer_token(api_key: str, now: float | None = None) -> str:
    """A fresh HS256 token `{iss: access, exp: now+1800, nbf: now-5}` signed with the secret of
    the channel key `access|secret`."""
    access, _, secret = api_key.partition("|")
    if not access or not secret:
        raise UpstreamError(401, "the alpha channel key must be 'access|secret'", retryable=True)
    now = int(time.time() if now is None else now)
    header = _b64url(json.dumps({"alg": "HS256", "typ": "JWT"}, separators=(",", ":")).encode())
    payload = _b64url(json.dumps({"iss": access, "exp": now + TOKEN_SECONDS, "nbf": now - TOKEN_SKEW},
                                 separators=(",", ":")).encode())
    signature = hmac.new(secret.encode(), f"{header}.{payload}".encode(), hashlib.sha256).digest()
    return f"{header}.{payload}.{_b64url(signature)}"


def _headers(api_key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {bearer_token(api_key)}"}


def _error_text(body: Any) -> str | None:
    if isinstance(body, dict) and body.get("code") not in (None, 0):
        return f"{body.get('code')}: {body.get('message') or 'no message'}"
    return None


def read_data(response: httpx.Response, *, retry_unreadable: bool) -> Any:
    """The `data` of a successful envelope `{code: 0, message, request_id, data}`; UpstreamError
    for an HTTP error or a non-zero code (the upstream's code and message in the text)."""
    body = read_json(response, _error_text, retry_unreadable=retry_unreadable, errors=ERRORS)
    if body.get("code") != 0:
        if ERRORS.codes(body):  # a documented code inside a 200: judged as Kling means it
            return_status = documented_status(body.get("code"))
            raise ERRORS.error(return_status, _error_text(body) or "the upstream refused", body)
        raise UpstreamError(502, _error_text(body) or "the upstream answered without code 0",
                            retryable=retry_unreadable)
    return body.get("data")


def _text(value: Any) -> str | None:
    return str(value) if isinstance(value, (str, int)) and not isinstance(value, bool) and value != "" else None


class AlphaAdapter:
    """`operation`: whose query path `build_poll` asks (each operation has its own)."""

    def __init__(self, operation: str = "text2video") -> None:
        self.operation = operation

    def for_operation(self, operation: str) -> AlphaAdapter:
        return self if operation == self.operation else AlphaAdapter(operation)

    def build_submit(self, base_url: str, api_key: str, upstream_model: str, request: dict) -> httpx.Request:
        """`request`: `{"operation": ..., "body": {...}}`; the body never holds the client's
        callback_url (the gateway sends its own callbacks once it has settled the charge)."""
        body = {**request["body"], "model_name": upstream_model}
        return httpx.Request("POST", join(base_url, OPERATIONS[request["operation"]]),
                             headers=_headers(api_key), json=body)

    def parse_submit(self, response: httpx.Response) -> str:
        data = read_data(response, retry_unreadable=False)
        task_id = data.get("task_id") if isinstance(data, dict) else None
        if not isinstance(task_id, str) or not task_id:
            raise UpstreamError(502, "upstream accepted the task without a task_id", retryable=False)
        return task_id

    def build_poll(self, base_url: str, api_key: str, upstream_task_id: str) -> httpx.Request:
        path = f"{OPERATIONS[self.operation]}/{quote(upstream_task_id, safe='')}"
        return httpx.Request("GET", join(base_url, path),
                             headers=_headers(api_key))

    def parse_poll(self, response: httpx.Response) -> TaskSnapshot:
        data = read_data(response, retry_unreadable=True)
        if not isinstance(data, dict):
            raise UpstreamError(502, "the upstream answered a query without data", retryable=True)
        word = str(data.get("task_status") or "")
        status = unified(STATUSES, word)
        message = str(data.get("task_status_msg") or "")
        result = object_at(data, "task_result")
        videos = [{"id": str(v.get("id") or ""), "url": v["url"], "duration": _text(v.get("duration")) or ""}
                  for v in result.get("videos") or [] if isinstance(v, dict) and isinstance(v.get("url"), str)]
        images = [{"index": int(i.get("index") or n), "url": i["url"]}
                  for n, i in enumerate(result.get("images") or []) if isinstance(i, dict)
                  and isinstance(i.get("url"), str)]
        urls = [v["url"] for v in videos] + [i["url"] for i in images]
        error = None
        if status == "failed":
            error = message or "the upstream task failed without a reason"
        details: dict[str, Any] = {"task_status_msg": message}
        if status == "succeeded":
            details.update(videos=videos, images=images)
        duration = videos[0]["duration"] if videos and videos[0]["duration"] else None
        return TaskSnapshot(status=status, upstream_status=word, progress=100 if status == "succeeded" else None,
                            result_urls=urls if status == "succeeded" else [], error=error, duration=duration,
                            raw=data, details=details)

    # --- custom elements and voices ------------------------------------------------------------

    def build_create_custom(self, base_url: str, api_key: str, kind: str, body: dict) -> httpx.Request:
        return httpx.Request("POST", join(base_url, CUSTOM_PATHS[kind]), headers=_headers(api_key), json=body)

    def parse_create_custom(self, response: httpx.Response, kind: str) -> dict[str, Any]:
        """The upstream's record of the new element or voice: with its `<kind>_id` when it made
        it at once, or a creation task (`task_id`, `task_status`) whose query names the id once
        it is made (custom voices, and the task-based elements, are made so: the upstream's API
        reference, "Create Custom Voice" answers `{task_id, task_status, ...}`)."""
        data = read_data(response, retry_unreadable=False)
        key = f"{kind}_id"
        if isinstance(data, dict) and _text(data.get(key)):
            return {**data, key: str(data[key]), "task_status": str(data.get("task_status") or "succeed")}
        if isinstance(data, dict) and _text(data.get("task_id")):
            return {"task_id": str(data["task_id"]), "task_status": str(data.get("task_status") or "submitted"),
                    **{k: data[k] for k in ("task_status_msg", "created_at", "updated_at") if k in data}}
        raise UpstreamError(502, f"the upstream created the {kind} without a {key} or a task_id", retryable=False)

    def build_query_custom(self, base_url: str, api_key: str, kind: str, task_id: str) -> httpx.Request:
        return httpx.Request("GET", join(base_url, f"{CUSTOM_PATHS[kind]}/{quote(task_id, safe='')}"),
                             headers=_headers(api_key))

    def parse_query_custom(self, response: httpx.Response, kind: str) -> dict[str, Any]:
        """Where a creation task stands: its `task_status` (and message), and once it succeeded
        the first of `task_result.<kind>s` (`voice_id`, `voice_name`, `trial_url`...)."""
        data = read_data(response, retry_unreadable=True)
        if not isinstance(data, dict):
            raise UpstreamError(502, f"the upstream answered a {kind} query without data", retryable=True)
        word = str(data.get("task_status") or "")
        found: dict[str, Any] = {"task_status": word, "task_status_msg": str(data.get("task_status_msg") or "")}
        if word == "succeed":
            made = [item for item in object_at(data, "task_result").get(f"{kind}s") or []
                    if isinstance(item, dict) and _text(item.get(f"{kind}_id"))]
            if not made:
                return {"task_status": "failed",
                        "task_status_msg": f"the upstream finished without a {kind}_id"}
            found.update({k: v for k, v in made[0].items() if isinstance(v, (str, int, float, bool))})
            found[f"{kind}_id"] = str(made[0][f"{kind}_id"])
        return found
