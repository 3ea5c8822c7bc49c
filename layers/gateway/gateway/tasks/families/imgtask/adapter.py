"""Imgtask upstream: submits under `/mj/submit/...` answered `{code, description, result, properties}`,
task records read many at a time (`POST /mj/task/list-by-condition {ids}`), the `mj-api-secret` header.

Two builds of the upstream exist (a channel's `variant`). The extended one takes `action` (by a
button's customId), `modal`, `shorten`, `insight-face/swap` and `image-seed`, and its records carry
`buttons`. The basic one, the open-source midjourney-proxy (github novicezk/midjourney-proxy,
`SubmitController` and `TaskController`), has only `imagine`, `change` (`{taskId, action: UPSCALE |
VARIATION | REROLL, index}`, on an IMAGINE, VARIATION, REROLL or BLEND task), `simple-change`,
`describe`, `blend`, `fetch` and `list-by-condition`, and its records have no buttons: the gateway
gives a finished grid the buttons `change` can run (U1-U4, V1-V4, reroll) and maps them back.

The upstream's `imageUrl` is on its own host and expires: a snapshot keeps it in `result_urls`
(never shown to a client); the gateway serves the bytes itself at `/imgtask/image/{id}`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote, urlsplit

import httpx

from gateway.tasks.adapter import TaskSnapshot, UpstreamError, join, object_at, read_json, unified
from gateway.tasks.families.imgtask.errors import ERRORS
from gateway.upstreams.errors import ACCOUNT

SECRET_HEADER = "mj-api-secret"

STATUSES: Mapping[str, str] = {
    "NOT_START": "submitted", "SUBMITTED": "queued", "MODAL": "queued", "IN_PROGRESS": "in_progress",
    "SUCCESS": "succeeded", "FAILURE": "failed", "CANCEL": "cancelled",
}
#: The upstream's submit codes.
SUBMITTED, EXISTS, QUEUED, QUEUE_FULL, BANNED, VALIDATION, NOT_FOUND, FAILURE = 1, 21, 22, 23, 24, 4, 3, 9
#: Properties of an upstream record the gateway shows (others may name the upstream's accounts).
SHOWN_PROPERTIES = ("finalPrompt", "finalZhPrompt")
#: Fields of an upstream record the family's answers show (kept in the task's `details`).
DETAIL_FIELDS = ("promptEn", "description", "startTime", "finishTime")


def _error_text(body: Any) -> str | None:
    if isinstance(body, dict):
        return body.get("description") or body.get("message") or body.get("error") or None
    return None


@dataclass
class SubmitAnswer:
    """What a submit answered when it took the task (code 1 or 22, or 21 waiting for a modal)."""

    task_id: str
    code: int
    description: str
    properties: dict[str, Any] = field(default_factory=dict)


def _headers(api_key: str) -> dict[str, str]:
    return {SECRET_HEADER: api_key}


class ImgtaskAdapter:
    def build_submit(self, base_url: str, api_key: str, upstream_model: str, request: dict) -> httpx.Request:
        """`request`: `{"path": "/mj/submit/<kind>" or "/mj/insight-face/swap", "body": {...}}`."""
        return httpx.Request("POST", join(base_url, request["path"]), headers=_headers(api_key), json=request["body"])

    def build_modal(self, base_url: str, api_key: str, upstream_task_id: str, modal: dict) -> httpx.Request:
        return httpx.Request("POST", join(base_url, "/mj/submit/modal"), headers=_headers(api_key),
                             json={**modal, "taskId": upstream_task_id})

    def parse_submit(self, response: httpx.Response) -> str:
        return self.parse_submit_answer(response).task_id

    def parse_submit_answer(self, response: httpx.Response, *, modal_expected: bool = False) -> SubmitAnswer:
        """The task the upstream took, or UpstreamError with the code the client is answered in `body`."""
        body = read_json(response, _error_text, retry_unreadable=False, errors=ERRORS)
        code, description = body.get("code"), str(body.get("description") or "")
        properties = object_at(body, "properties")
        result = body.get("result")
        if code in (SUBMITTED, QUEUED) or (code == EXISTS and modal_expected):
            if not isinstance(result, (str, int)) or isinstance(result, bool) or not str(result):
                raise UpstreamError(502, f"upstream took the task (code {code}) without an id", retryable=False)
            return SubmitAnswer(str(result), int(code), description, dict(properties))
        relayed = {"code": code, "properties": {k: v for k, v in properties.items() if k == "bannedWord"}}
        if code == QUEUE_FULL:
            raise UpstreamError(429, f"the upstream's queue is full: {description}", body=relayed)
        if code == BANNED:
            word = properties.get("bannedWord")
            raise UpstreamError(400, f"prompt: contains a banned word{f' ({word})' if word else ''}", retryable=False,
                                body=relayed)
        if code == EXISTS:
            raise UpstreamError(409, f"the upstream already has this task: {description}", retryable=False,
                                body=relayed)
        if ERRORS.fault(None, body) == ACCOUNT:  # no Discord account instance: the channel's, failed over
            raise UpstreamError(503, f"the upstream has no account to take the task: {description}", fault=ACCOUNT)
        if code in (VALIDATION, NOT_FOUND):
            raise UpstreamError(400 if code == VALIDATION else 404, f"the upstream refused the task: {description}",
                                retryable=False, body=relayed)
        # 9 (failure) or a code this adapter does not know: the upstream's own trouble; another channel may do.
        raise UpstreamError(502, f"the upstream failed to take the task (code {code}): {description}",
                            retryable=True, body={"code": FAILURE, "properties": {}})

    def build_poll(self, base_url: str, api_key: str, upstream_task_id: str) -> httpx.Request:
        return httpx.Request("GET", join(base_url, f"/mj/task/{quote(upstream_task_id, safe='')}/fetch"),
                             headers=_headers(api_key))

    def parse_poll(self, response: httpx.Response) -> TaskSnapshot:
        return self.snapshot(read_json(response, _error_text, retry_unreadable=True, errors=ERRORS))

    def build_list(self, base_url: str, api_key: str, upstream_task_ids: list[str]) -> httpx.Request:
        return httpx.Request("POST", join(base_url, "/mj/task/list-by-condition"), headers=_headers(api_key),
                             json={"ids": upstream_task_ids})

    def parse_list(self, response: httpx.Response) -> dict[str, TaskSnapshot]:
        """The snapshot of every record the upstream listed, by upstream id."""
        try:
            body = response.json()
        except ValueError:
            body = None
        if not response.is_success:
            raise ERRORS.error(response.status_code,
                               _error_text(body) or response.text[:300] or response.reason_phrase, body)
        if not isinstance(body, list):
            raise UpstreamError(502, "upstream listed tasks without a JSON array", retryable=True)
        return {str(record["id"]): self.snapshot(record) for record in body
                if isinstance(record, dict) and record.get("id") not in (None, "")}

    def build_image_seed(self, base_url: str, api_key: str, upstream_task_id: str) -> httpx.Request:
        return httpx.Request("GET", join(base_url, f"/mj/task/{quote(upstream_task_id, safe='')}/image-seed"),
                             headers=_headers(api_key))

    def parse_image_seed(self, response: httpx.Response) -> tuple[int, str, str]:
        body = read_json(response, _error_text, retry_unreadable=True, errors=ERRORS)
        code = body.get("code")
        return (int(code) if isinstance(code, int) else FAILURE, str(body.get("description") or ""),
                "" if body.get("result") is None else str(body["result"]))

    def build_image(self, base_url: str, api_key: str, image_url: str) -> httpx.Request:
        """The request for an image the upstream named; its secret goes only to its own host."""
        same_host = urlsplit(image_url).netloc == urlsplit(base_url).netloc
        return httpx.Request("GET", image_url, headers=_headers(api_key) if same_host else {})

    def snapshot(self, record: dict) -> TaskSnapshot:
        word = str(record.get("status") or "")
        status = unified(STATUSES, word)
        progress = _percent(record.get("progress"))
        if status == "succeeded":
            progress = 100
        image_url = record.get("imageUrl")
        error = None
        if status == "failed":
            error = str(record.get("failReason") or "the upstream task failed without a reason")
        elif status == "cancelled":
            error = str(record.get("failReason") or "the upstream cancelled the task")
        details: dict[str, Any] = {name: record[name] for name in DETAIL_FIELDS if record.get(name) not in (None, "")}
        properties = object_at(record, "properties")
        details["properties"] = {k: properties[k] for k in SHOWN_PROPERTIES if properties.get(k) not in (None, "")}
        details["buttons"] = [_button(b) for b in record.get("buttons") or []
                              if isinstance(b, dict) and b.get("customId")]
        return TaskSnapshot(status=status, upstream_status=word, progress=progress,
                            result_urls=[image_url] if isinstance(image_url, str) and image_url else [],
                            error=error, duration=None, raw=record, details=details)


BASIC, EXTENDED = "basic", "extended"
#: The record actions of a grid, which the basic build's `change` acts on.
GRID_ACTIONS = frozenset({"IMAGINE", "VARIATION", "REROLL", "BLEND"})
_CHANGE = re.compile(r"MJ::JOB::(upsample|variation|reroll)::([0-4])::[\w-]+(?:::SOLO)?")


def basic_change(custom_id: str, upstream_task_id: str) -> dict[str, Any] | None:
    """The basic build's `change` body for a button (U1-U4, V1-V4, reroll), or None for a
    button it cannot run (zoom, pan, a subtle or strong vary, custom zoom, vary region...)."""
    match = _CHANGE.fullmatch(custom_id)
    if match is None:
        return None
    kind, index = match[1], int(match[2])
    if kind == "reroll":
        return {"taskId": upstream_task_id, "action": "REROLL"} if index == 0 else None
    if not 1 <= index <= 4:
        return None
    return {"taskId": upstream_task_id, "action": "UPSCALE" if kind == "upsample" else "VARIATION", "index": index}


def basic_buttons(record: dict) -> list[dict[str, Any]]:
    """The buttons the basic build's `change` can run on a finished grid record (none on others),
    named as the extended build names them (the job's `messageHash`, else the record's id)."""
    if str(record.get("action") or "") not in GRID_ACTIONS or record.get("status") != "SUCCESS":
        return []
    properties = object_at(record, "properties")
    job = re.sub(r"[^\w-]", "", str(properties.get("messageHash") or record.get("id") or "job")) or "job"
    buttons = [{"customId": f"MJ::JOB::upsample::{n}::{job}", "emoji": "", "label": f"U{n}", "style": 2, "type": 2}
               for n in range(1, 5)]
    buttons.append({"customId": f"MJ::JOB::reroll::0::{job}::SOLO", "emoji": "🔄", "label": "", "style": 2,
                    "type": 2})
    buttons += [{"customId": f"MJ::JOB::variation::{n}::{job}", "emoji": "", "label": f"V{n}", "style": 2,
                 "type": 2} for n in range(1, 5)]
    return buttons


def _percent(value: Any) -> int | None:
    text = str(value).strip().rstrip("%") if value is not None else ""
    try:
        return max(0, min(100, int(float(text))))
    except ValueError:
        return None


def _button(button: dict) -> dict[str, Any]:
    def integer(value: Any, default: int) -> int:
        return value if isinstance(value, int) and not isinstance(value, bool) else default

    return {"customId": str(button["customId"]), "emoji": str(button.get("emoji") or ""),
            "label": str(button.get("label") or ""), "style": integer(button.get("style"), 2),
            "type": integer(button.get("type"), 2)}
