"""Beta upstream: an image task submitted to `/v1/<model>` with the `x-key` header; the answer
names a `polling_url`, possibly on another (regional) host, which is polled as given once the
channel allows it (`Channel.allows_poll_url`); `/v1/get_result?id=` on the base URL otherwise.

Result `{id, status, result, progress}`: `Pending`, `Ready` (`result.sample`, a signed link that
expires in about ten minutes), `Error`, `Request Moderated`, `Content Moderated`,
`Task not found`. Errors are FastAPI's `{"detail": <text or a list of {loc, msg}>}`.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from typing import Any
from urllib.parse import quote, urlsplit

import httpx

from gateway.tasks.adapter import Accepted, TaskSnapshot, UpstreamError, join, object_at, read_json, unified
from gateway.tasks.families.beta.errors import ERRORS

STATUSES: Mapping[str, str] = {
    "Pending": "in_progress", "Ready": "succeeded", "Error": "failed", "Request Moderated": "failed",
    "Content Moderated": "failed", "Task not found": "failed",
}
MODERATED = ("Request Moderated", "Content Moderated")

#: BFL's own API hosts: the global `api.bfl.ai` and its regional clusters (`api.eu.bfl.ai`,
#: `api.us.bfl.ai`, and the numbered ones a submit's `polling_url` names: `api.eu1.bfl.ai`,
#: `api.eu2.bfl.ai`, `api.us1.bfl.ai`...; BFL's API reference, "regional endpoints" and the
#: submit answer's `polling_url`). Nothing else: the channel's key goes to no other host.
BFL_HOST = re.compile(r"api(?:\.(?:eu|us)[0-9]{0,2})?\.bfl\.ai")


def _bfl_host(url: str) -> bool:
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        return False
    return (parts.scheme == "https" and port in (None, 443) and parts.username is None and parts.password is None
            and BFL_HOST.fullmatch(parts.hostname or "") is not None)


def documented_poll_url(base_url: str, polling_url: str) -> bool:
    """Whether a polling URL is one of BFL's own hosts, named to a channel whose base URL is
    BFL's too (https, default port, no credentials in it): the regional host a submit names is
    polled without the operator having to list it in `poll_hosts`."""
    return _bfl_host(base_url) and _bfl_host(polling_url)


def billed_megapixels(output_mp: Any) -> int | None:
    """The megapixels BFL bills for an image, from the `output_mp` its submit answer reports
    (rounded up to whole megapixels, as its pricing counts them); None when it reported none."""
    if isinstance(output_mp, bool) or not isinstance(output_mp, (int, float)) or output_mp < 0:
        return None
    return max(math.ceil(round(output_mp, 6)), 1)


def error_text(body: Any) -> str | None:
    detail = body.get("detail") if isinstance(body, dict) else None
    if isinstance(detail, list):
        return "; ".join(f"{'.'.join(str(p) for p in item.get('loc', ()) if p != 'body')}: {item.get('msg')}"
                         if isinstance(item, dict) else str(item) for item in detail) or None
    return str(detail) if detail else None


class BetaAdapter:
    def build_submit(self, base_url: str, api_key: str, upstream_model: str, request: dict) -> httpx.Request:
        return httpx.Request("POST", join(base_url, f"/v1/{quote(upstream_model, safe='')}"), json=request,
                             headers={"x-key": api_key, "accept": "application/json"})

    def parse_accepted(self, response: httpx.Response) -> Accepted:
        body = read_json(response, error_text, retry_unreadable=False, errors=ERRORS)
        task_id = body.get("id")
        if not isinstance(task_id, str) or not task_id:
            raise UpstreamError(502, "upstream accepted the task without an id", retryable=False)
        polling_url = body.get("polling_url")
        # What BFL says it charged at submit (`cost` in credits, `output_mp`): the settlement's figures.
        charged = {key: body[key] for key in ("cost", "input_mp", "output_mp")
                   if isinstance(body.get(key), (int, float)) and not isinstance(body.get(key), bool)}
        return Accepted(task_id, poll_url=polling_url if isinstance(polling_url, str) and polling_url else None,
                        details={"charged": charged} if charged else {})

    def parse_submit(self, response: httpx.Response) -> str:
        return self.parse_accepted(response).upstream_task_id

    def build_poll(self, base_url: str, api_key: str, upstream_task_id: str) -> httpx.Request:
        return httpx.Request("GET", join(base_url, "/v1/get_result"), params={"id": upstream_task_id},
                             headers={"x-key": api_key, "accept": "application/json"})

    def build_poll_url(self, polling_url: str, api_key: str) -> httpx.Request:
        """The upstream's own polling URL, as given (its query names the task)."""
        return httpx.Request("GET", polling_url, headers={"x-key": api_key, "accept": "application/json"})

    def parse_poll(self, response: httpx.Response) -> TaskSnapshot:
        body = read_json(response, error_text, retry_unreadable=True, errors=ERRORS)
        word = str(body.get("status") or "")
        status = unified(STATUSES, word)
        result = object_at(body, "result")
        sample = result.get("sample")
        urls = [sample] if status == "succeeded" and isinstance(sample, str) and sample else []
        progress = body.get("progress")
        progress = max(0, min(100, round(progress * 100))) if isinstance(progress, (int, float)) else None
        error = None
        details: dict[str, Any] = {}
        if status == "succeeded":
            progress = 100
            details["result"] = {k: v for k, v in result.items()
                                 if k != "sample" and isinstance(v, (str, int, float))}
        elif status == "failed":
            reasons = object_at(body, "details")
            details["details"] = reasons
            error = (f"{word}: {reasons}" if reasons else word) if word in MODERATED or word == "Task not found" \
                else (error_text(body) or str(reasons.get("error") or "") or "the upstream task failed")
        return TaskSnapshot(status=status, upstream_status=word, progress=progress, result_urls=urls, error=error,
                            duration=None, raw=body, details=details)
