"""Gemini's batch mode (the Gemini Developer API), as a `content` channel's upstream runs a batch.

Wire shapes from googleapis/python-genai (`batches.py`: `_CreateBatchJobParameters_to_mldev`,
`_BatchJobSource_to_mldev`, `_InlinedRequest_to_mldev`, `_BatchJob_from_mldev`,
`_BatchJobDestination_from_mldev`, `_InlinedResponse_from_mldev`; `_transformers.py`
`t_job_state`, `t_recv_batch_job_destination`) and ai.google.dev/api/batch-mode:

- Submit: `POST /v1beta/models/{model}:batchGenerateContent` with `{batch: {displayName,
  inputConfig: {requests: {requests: [{request: GenerateContentRequest, metadata: {key}}]}}}}`.
  Each line's body is converted to a GenerateContentRequest (`formats.convert_request`, the
  channel's upstream model) under the key `l<line number>`. Inline requests are limited to 20 MB
  in all (the batch-mode guide); a larger batch is refused here, as input through Gemini's Files
  API is not built. The answer is an Operation whose `name` is the batch's (`batches/{id}`).
- Poll: `GET /v1beta/batches/{id}`: the Operation, its `metadata.state` one of
  `BATCH_STATE_PENDING`, `_RUNNING`, `_SUCCEEDED`, `_FAILED`, `_CANCELLED`, `_EXPIRED`.
- Collect: `metadata.output.inlinedResponses.inlinedResponses[]` (what the SDK reads; the
  Operation's `response` holds the same when done), each `{response?, error?, metadata?}`, in the
  input's order ("same order as the input requests", `types.BatchJobDestination`) and keyed by the
  metadata we sent. A response is converted back to the client's dialect with status 200; an
  error is a `google.rpc.Status`, answered with its code's HTTP status (googleapis
  `google/rpc/code.proto`).
- Cancel: `POST /v1beta/batches/{id}:cancel`.

Vertex AI channels have batch prediction jobs instead, fed from Cloud Storage or BigQuery: they
do not run batches here (the family leaves them out).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any
from urllib.parse import quote

import httpx

from gateway.formats.convert import convert_request, convert_response
from gateway.routing.channel import Channel
from gateway.tasks.adapter import Sender, TaskSnapshot, join, poll, read_json, send
from gateway.tasks.adapter import submit as adapter_submit
from gateway.tasks.families.batch.lines import Line
from gateway.upstreams.content import ERRORS
from gateway.upstreams.errors import UpstreamError

#: The client's dialect of each batch endpoint (embeddings run on a chat channel only).
DIALECTS = {"/v1/chat/completions": "chat", "/v1/responses": "responses"}
#: "The total request size for inline requests must be under 20MB" (ai.google.dev batch mode guide).
MAX_INLINE_BYTES = 20 * 1000 * 1000
#: The batch's state on the wire -> the word OpenAI's batch shows while it runs, or once it ended.
RUNNING = {"BATCH_STATE_PENDING": "validating", "BATCH_STATE_RUNNING": "in_progress"}
ENDED = {"BATCH_STATE_SUCCEEDED": "completed", "BATCH_STATE_FAILED": "failed",
         "BATCH_STATE_CANCELLED": "cancelled", "BATCH_STATE_EXPIRED": "expired"}
#: google.rpc.Code -> its HTTP status (the mapping written in googleapis `google/rpc/code.proto`).
RPC_STATUS = {1: 499, 2: 500, 3: 400, 4: 504, 5: 404, 6: 409, 7: 403, 8: 429, 9: 400, 10: 409, 11: 400,
              12: 501, 13: 500, 14: 503, 15: 500, 16: 401}


def _headers(api_key: str) -> dict[str, str]:
    return {"x-goog-api-key": api_key}


def _error_text(body: Any) -> str | None:
    error = body.get("error") if isinstance(body, dict) else None
    return str(error.get("message")) if isinstance(error, dict) and error.get("message") else None


def _json(response: httpx.Response, *, retry_unreadable: bool) -> dict[str, Any]:
    return read_json(response, _error_text, retry_unreadable=retry_unreadable, errors=ERRORS)


def _batch_path(name: str) -> str:
    """`/v1beta/batches/{id}` of the batch's resource name (`batches/{id}`)."""
    return "/v1beta/batches/" + quote(name.removeprefix("batches/"), safe="")


class GeminiBatchAdapter:
    """The task adapter's shape: the batch's create (its requests already converted) and retrieve."""

    def build_submit(self, base_url: str, api_key: str, upstream_model: str, request: dict) -> httpx.Request:
        model = quote(upstream_model.removeprefix("models/"), safe="")
        return httpx.Request("POST", join(base_url, f"/v1beta/models/{model}:batchGenerateContent"),
                             headers=_headers(api_key), json={"batch": request})

    def parse_submit(self, response: httpx.Response) -> str:
        name = _json(response, retry_unreadable=False).get("name")
        if not isinstance(name, str) or not name.startswith("batches/"):
            raise UpstreamError(502, "the upstream created the batch without its name", retryable=False)
        return name

    def build_poll(self, base_url: str, api_key: str, upstream_task_id: str) -> httpx.Request:
        return httpx.Request("GET", join(base_url, _batch_path(upstream_task_id)), headers=_headers(api_key))

    def parse_poll(self, response: httpx.Response) -> TaskSnapshot:
        batch = _json(response, retry_unreadable=True)
        return TaskSnapshot(status="in_progress", upstream_status=_state(batch), progress=None, result_urls=[],
                            error=None, duration=None, raw=batch)


ADAPTER = GeminiBatchAdapter()


def _state(batch: dict[str, Any]) -> str:
    metadata = batch.get("metadata")
    return str(metadata.get("state") or "") if isinstance(metadata, dict) else ""


def submit(http: Sender, channel: Channel, upstream_model: str, data: bytes, endpoint: str,
           batch_id: str) -> tuple[str, str]:
    """Converts and sends the lines inline; (the batch's name, "" as no file is uploaded)."""
    dialect = DIALECTS.get(endpoint)
    if dialect is None:
        raise UpstreamError(400, f"a content channel cannot run a batch of {endpoint}", retryable=True)
    model = "models/" + upstream_model.removeprefix("models/")
    requests = []
    for number, raw in enumerate(data.split(b"\n"), start=1):
        if raw.strip():
            line = json.loads(raw)
            body = convert_request(line["body"], source=dialect, target="content", model=upstream_model,
                                   stream=False)
            requests.append({"request": {**body, "model": model}, "metadata": {"key": f"l{number}"}})
    batch = {"displayName": "gateway batch", "inputConfig": {"requests": {"requests": requests}}}
    if len(json.dumps(batch, separators=(",", ":"), ensure_ascii=False).encode()) >= MAX_INLINE_BYTES:
        raise UpstreamError(400, "the batch is over Gemini's 20 MB of inline requests (its Files API input is "
                                 "not built): split it into smaller files", retryable=True)
    return adapter_submit(http, ADAPTER, channel.base_url, channel.api_key, upstream_model, batch), ""


def retrieve(http: Sender, channel: Channel, batch_id: str) -> dict[str, Any]:
    return poll(http, ADAPTER, channel.base_url, channel.api_key, batch_id).raw


def cancel(http: Sender, channel: Channel, batch_id: str) -> dict[str, Any]:
    request = httpx.Request("POST", join(channel.base_url, _batch_path(batch_id) + ":cancel"),
                            headers=_headers(channel.api_key))
    return _json(send(http, request, repeatable=True), retry_unreadable=True)


def progress(batch: dict[str, Any], cancel_requested: bool) -> tuple[str, str | None]:
    """(the word OpenAI shows while it runs, OpenAI's final status once the batch has ended, else None)."""
    state = _state(batch)
    if state in ENDED:
        return state, ENDED[state]
    return RUNNING.get(state, "in_progress"), None


def _responses(batch: dict[str, Any]) -> list[Any]:
    for holder in ((batch.get("metadata") or {}).get("output"), batch.get("response")):
        if isinstance(holder, dict):
            inlined = (holder.get("inlinedResponses") or {}).get("inlinedResponses")
            if isinstance(inlined, list):
                return inlined
    return []


def collect(http: Sender, channel: Channel, batch: dict[str, Any], lines: Sequence[Line], endpoint: str,
            model: str) -> list[dict[str, Any]]:
    """The ended batch's inline responses as OpenAI output lines, by the client's ids: each by the
    key we sent, else by its place (the input's order); without the input file (deleted
    meanwhile) the keys are kept as ids."""
    by_key = {f"l{line.number}": line.custom_id for line in lines}
    in_order = [line.custom_id for line in lines]
    dialect = DIALECTS.get(endpoint, "chat")
    found: list[dict[str, Any]] = []
    for index, entry in enumerate(_responses(batch)):
        if not isinstance(entry, dict):
            continue
        key = str((entry.get("metadata") or {}).get("key") or "")
        custom_id = by_key.get(key) or (in_order[index] if index < len(in_order) and not key else None)
        if custom_id is None:
            if lines or not key:
                continue
            custom_id = key
        if isinstance(entry.get("response"), dict):
            body = convert_response(entry["response"], source="content", target=dialect, model=model)
            found.append({"custom_id": custom_id, "response": {"status_code": 200, "body": body}})
        elif isinstance(entry.get("error"), dict):
            error = entry["error"]
            code = error.get("code")
            status = RPC_STATUS.get(code, 500) if isinstance(code, int) else 500
            found.append({"custom_id": custom_id, "response": {"status_code": status, "body": {
                "error": {"message": str(error.get("message") or "the request failed"), "type": "upstream_error",
                          "param": None, "code": None}}}})
    return found
