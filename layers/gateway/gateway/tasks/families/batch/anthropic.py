"""Anthropic's Message Batches, as a `messages` channel's upstream runs a batch
(anthropic-sdk-python `resources/messages/batches.py`; `types/messages/batch_create_params.py`,
`message_batch.py`, `message_batch_individual_response.py`, `message_batch_*_result.py`).

Submit: each line's body converted to a messages request (`formats.convert_request`, the
channel's upstream model) under the custom id `l<line>` (Anthropic's ids match
`^[a-zA-Z0-9_-]{1,64}$`, an OpenAI custom_id need not), `POST /v1/messages/batches`. Poll:
`GET /v1/messages/batches/{id}` (`processing_status`: in_progress, canceling, ended). Collect: the
results JSONL (its `results_url`, only on a host the channel vouches for), each result converted
back to the client's dialect: `succeeded` → 200 with the converted message, `errored` → the
error's status, `canceled` / `expired` → never run. Cancel: `POST .../{id}/cancel`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

import httpx

from gateway.formats.convert import convert_request, convert_response
from gateway.routing.channel import Channel
from gateway.tasks.adapter import Sender, TaskSnapshot, join, poll, read_json, send
from gateway.tasks.adapter import submit as adapter_submit
from gateway.tasks.families.batch.lines import Line
from gateway.upstreams.errors import UpstreamError
from gateway.upstreams.messages import ANTHROPIC_VERSION, ERRORS

#: The client's dialect of each batch endpoint (embeddings have no messages equivalent).
DIALECTS = {"/v1/chat/completions": "chat", "/v1/responses": "responses"}
#: An errored result's `error.type` -> the HTTP status the upstream answers it with (Anthropic's errors page).
ERROR_STATUS = {"invalid_request_error": 400, "authentication_error": 401, "permission_error": 403,
                "not_found_error": 404, "request_too_large": 413, "rate_limit_error": 429, "api_error": 500,
                "overloaded_error": 529}


def _headers(api_key: str) -> dict[str, str]:
    return {"x-api-key": api_key, "anthropic-version": ANTHROPIC_VERSION}


def _error_text(body: Any) -> str | None:
    error = body.get("error") if isinstance(body, dict) else None
    return str(error.get("message")) if isinstance(error, dict) and error.get("message") else None


def _json(response: httpx.Response, *, retry_unreadable: bool) -> dict[str, Any]:
    return read_json(response, _error_text, retry_unreadable=retry_unreadable, errors=ERRORS)


def _base(base_url: str) -> str:
    return base_url.removesuffix("/v1")


class MessageBatchesAdapter:
    """The task adapter's shape: the batch's create (its requests already converted) and retrieve."""

    def build_submit(self, base_url: str, api_key: str, upstream_model: str, request: dict) -> httpx.Request:
        return httpx.Request("POST", join(_base(base_url), "/v1/messages/batches"), headers=_headers(api_key),
                             json={"requests": request["requests"]})

    def parse_submit(self, response: httpx.Response) -> str:
        batch_id = _json(response, retry_unreadable=False).get("id")
        if not isinstance(batch_id, str) or not batch_id:
            raise UpstreamError(502, "the upstream created the message batch without an id", retryable=False)
        return batch_id

    def build_poll(self, base_url: str, api_key: str, upstream_task_id: str) -> httpx.Request:
        return httpx.Request("GET", join(_base(base_url), f"/v1/messages/batches/{upstream_task_id}"),
                             headers=_headers(api_key))

    def parse_poll(self, response: httpx.Response) -> TaskSnapshot:
        batch = _json(response, retry_unreadable=True)
        return TaskSnapshot(status="in_progress", upstream_status=str(batch.get("processing_status") or ""),
                            progress=None, result_urls=[], error=None, duration=None, raw=batch)


ADAPTER = MessageBatchesAdapter()


def submit(http: Sender, channel: Channel, upstream_model: str, data: bytes, endpoint: str,
           batch_id: str) -> tuple[str, str]:
    """Converts and sends the lines; (the upstream's batch id, "" as no file is uploaded)."""
    dialect = DIALECTS.get(endpoint)
    if dialect is None:
        raise UpstreamError(400, f"a messages channel cannot run a batch of {endpoint}", retryable=True)
    requests = []
    for number, raw in enumerate(data.split(b"\n"), start=1):
        if raw.strip():
            line = json.loads(raw)
            params = convert_request(line["body"], source=dialect, target="messages", model=upstream_model,
                                     stream=False)
            params.pop("stream", None)
            requests.append({"custom_id": f"l{number}", "params": params})
    batch_id = adapter_submit(http, ADAPTER, channel.base_url, channel.api_key, upstream_model,
                              {"requests": requests})
    return batch_id, ""


def retrieve(http: Sender, channel: Channel, batch_id: str) -> dict[str, Any]:
    return poll(http, ADAPTER, channel.base_url, channel.api_key, batch_id).raw


def cancel(http: Sender, channel: Channel, batch_id: str) -> dict[str, Any]:
    request = httpx.Request("POST", join(_base(channel.base_url), f"/v1/messages/batches/{batch_id}/cancel"),
                            headers=_headers(channel.api_key))
    return _json(send(http, request, repeatable=True), retry_unreadable=True)


def progress(batch: dict[str, Any], cancel_requested: bool) -> tuple[str, str | None]:
    """(the upstream's `processing_status`, OpenAI's final status once the batch has ended, else None)."""
    word = str(batch.get("processing_status") or "")
    if word != "ended":
        return word, None
    counts = batch.get("request_counts") or {}
    if cancel_requested or counts.get("canceled"):
        return word, "cancelled"
    return word, "expired" if counts.get("expired") else "completed"


def collect(http: Sender, channel: Channel, batch: dict[str, Any], lines: Sequence[Line], endpoint: str,
            model: str) -> list[dict[str, Any]]:
    """The ended batch's results by the client's ids: ours are the lines' numbers (`l<n>`); when
    the input file was deleted meanwhile the lines keep the upstream's ids."""
    numbered = {f"l{line.number}": line.custom_id for line in lines} if lines else None
    return results(http, channel, batch, numbered, endpoint, model)


def results(http: Sender, channel: Channel, batch: dict[str, Any], custom_ids: Mapping[str, str] | None,
            endpoint: str, model: str) -> list[dict[str, Any]]:
    """The ended batch's results as OpenAI output lines (`custom_ids`: our `l<line>` -> the
    client's; None: the upstream's ids as they are)."""
    url = batch.get("results_url")
    if not isinstance(url, str) or not url or not channel.allows_poll_url(url):
        url = join(_base(channel.base_url), f"/v1/messages/batches/{batch['id']}/results")
    response = send(http, httpx.Request("GET", url, headers={**_headers(channel.api_key),
                                                             "accept": "application/binary"}), repeatable=True)
    if not response.is_success:
        _json(response, retry_unreadable=True)  # raises the upstream's error
    found: list[dict[str, Any]] = []
    for raw in response.content.split(b"\n"):
        if not raw.strip():
            continue
        entry = json.loads(raw)
        custom_id = (str(entry.get("custom_id")) if custom_ids is None
                     else custom_ids.get(str(entry.get("custom_id"))))
        result = entry.get("result") or {}
        if custom_id is None:
            continue
        kind = result.get("type")
        if kind == "succeeded":
            body = convert_response(result["message"], source="messages", target=DIALECTS[endpoint], model=model)
            found.append({"custom_id": custom_id, "response": {"status_code": 200, "body": body}})
        elif kind == "errored":
            error = (result.get("error") or {}).get("error") or {}
            status = ERROR_STATUS.get(str(error.get("type")), 500)
            found.append({"custom_id": custom_id, "response": {"status_code": status, "body": {
                "error": {"message": str(error.get("message") or "the request failed"),
                          "type": str(error.get("type") or "api_error"), "param": None, "code": None}}}})
        else:  # canceled, expired: never run, answered as the batch's end says
            found.append({"custom_id": custom_id, "response": None,
                          "error": {"code": "batch_expired" if kind == "expired" else "batch_cancelled",
                                    "message": f"This request was not executed: it was {kind}."}})
    return found
