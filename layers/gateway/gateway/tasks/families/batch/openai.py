"""OpenAI's Batch and Files API, as a `chat` channel's upstream runs a batch (openai-python's
`resources/files.py` and `resources/batches.py`; shapes in `types/batch.py`, `file_object.py`).

Submit: the input file (every line's `model` the channel's upstream model) is uploaded as a
`purpose=batch` file (multipart), then `POST /v1/batches {input_file_id, endpoint,
completion_window: "24h"}`. Poll: `GET /v1/batches/{id}`. Collect: the output and error files'
content (`GET /v1/files/{id}/content`). Cancel: `POST /v1/batches/{id}/cancel`. The upstream's
ids stay in the task's store record, never in an answer.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import httpx

from gateway.routing.channel import Channel
from gateway.tasks.adapter import Sender, TaskSnapshot, join, poll, read_json, send
from gateway.tasks.adapter import submit as adapter_submit
from gateway.tasks.families.batch.lines import Line
from gateway.upstreams.chat import ERRORS
from gateway.upstreams.errors import UpstreamError

#: The upstream's batch states that are final (`types/batch.py`).
ENDED = ("completed", "failed", "expired", "cancelled")


def _url(channel: Channel, path: str) -> str:
    # A base URL copied with its version (".../v1") is not doubled, as the text clients do.
    return join(channel.base_url.removesuffix("/v1"), path)


def _headers(channel: Channel) -> dict[str, str]:
    return {"authorization": f"Bearer {channel.api_key}"}


def _error_text(body: Any) -> str | None:
    error = body.get("error") if isinstance(body, dict) else None
    return str(error.get("message")) if isinstance(error, dict) and error.get("message") else None


def _json(response: httpx.Response, *, retry_unreadable: bool) -> dict[str, Any]:
    return read_json(response, _error_text, retry_unreadable=retry_unreadable, errors=ERRORS)


class OpenAIBatchAdapter:
    """The task adapter's shape (`tasks/adapter.TaskAdapter`): the batch's create and its
    retrieve. The file upload before the create is `submit` below."""

    def build_submit(self, base_url: str, api_key: str, upstream_model: str, request: dict) -> httpx.Request:
        return httpx.Request("POST", join(base_url.removesuffix("/v1"), "/v1/batches"),
                             headers={"authorization": f"Bearer {api_key}"},
                             json={"input_file_id": request["input_file_id"], "endpoint": request["endpoint"],
                                   "completion_window": "24h"})

    def parse_submit(self, response: httpx.Response) -> str:
        batch_id = _json(response, retry_unreadable=False).get("id")
        if not isinstance(batch_id, str) or not batch_id:
            raise UpstreamError(502, "the upstream created the batch without an id", retryable=False)
        return batch_id

    def build_poll(self, base_url: str, api_key: str, upstream_task_id: str) -> httpx.Request:
        return httpx.Request("GET", join(base_url.removesuffix("/v1"), f"/v1/batches/{upstream_task_id}"),
                             headers={"authorization": f"Bearer {api_key}"})

    def parse_poll(self, response: httpx.Response) -> TaskSnapshot:
        """The batch as the upstream says it (`raw`); the family reads its status and files."""
        batch = _json(response, retry_unreadable=True)
        word = str(batch.get("status") or "")
        return TaskSnapshot(status="in_progress", upstream_status=word, progress=None, result_urls=[], error=None,
                            duration=None, raw=batch)


ADAPTER = OpenAIBatchAdapter()


def submit(http: Sender, channel: Channel, upstream_model: str, data: bytes, endpoint: str,
           batch_id: str) -> tuple[str, str]:
    """Uploads the lines and creates the batch; (the upstream's batch id, its input file id)."""
    lines = []
    for raw in data.split(b"\n"):
        if raw.strip():
            line = json.loads(raw)
            line["body"] = {**line["body"], "model": upstream_model}
            lines.append(json.dumps(line, separators=(",", ":"), ensure_ascii=False))
    content = ("\n".join(lines) + "\n").encode()
    upload = httpx.Request("POST", _url(channel, "/v1/files"), headers=_headers(channel),
                           files={"file": ("batch.jsonl", content, "application/jsonl")}, data={"purpose": "batch"})
    file_id = _json(send(http, upload, repeatable=False), retry_unreadable=False).get("id")
    if not isinstance(file_id, str) or not file_id:
        raise UpstreamError(502, "the upstream stored the batch's file without an id", retryable=False)
    batch_id = adapter_submit(http, ADAPTER, channel.base_url, channel.api_key, upstream_model,
                              {"input_file_id": file_id, "endpoint": endpoint})
    return batch_id, file_id


def retrieve(http: Sender, channel: Channel, batch_id: str) -> dict[str, Any]:
    return poll(http, ADAPTER, channel.base_url, channel.api_key, batch_id).raw


def cancel(http: Sender, channel: Channel, batch_id: str) -> dict[str, Any]:
    request = httpx.Request("POST", _url(channel, f"/v1/batches/{batch_id}/cancel"), headers=_headers(channel))
    return _json(send(http, request, repeatable=True), retry_unreadable=True)


def content(http: Sender, channel: Channel, file_id: str) -> bytes:
    request = httpx.Request("GET", _url(channel, f"/v1/files/{file_id}/content"),
                            headers={**_headers(channel), "accept": "application/binary"})
    response = send(http, request, repeatable=True)
    if not response.is_success:
        _json(response, retry_unreadable=True)  # raises the upstream's error
    return response.content


def progress(batch: dict[str, Any], cancel_requested: bool) -> tuple[str, str | None]:
    """(the upstream's status, OpenAI's final status once the batch has ended, else None)."""
    word = str(batch.get("status") or "")
    return word, word if word in ENDED else None


def collect(http: Sender, channel: Channel, batch: dict[str, Any], lines: Sequence[Line], endpoint: str,
            model: str) -> list[dict[str, Any]]:
    """The ended batch's lines: the upstream's own output lines already have the client's ids."""
    return results(http, channel, batch)


def results(http: Sender, channel: Channel, batch: dict[str, Any]) -> list[dict[str, Any]]:
    """Every line of the ended batch's output and error files, as the upstream wrote them."""
    found: list[dict[str, Any]] = []
    for name in ("output_file_id", "error_file_id"):
        file_id = batch.get(name)
        if isinstance(file_id, str) and file_id:
            for raw in content(http, channel, file_id).split(b"\n"):
                if raw.strip():
                    try:
                        line = json.loads(raw)
                    except ValueError:
                        raise UpstreamError(502, f"the upstream's {name} holds a line that is not JSON",
                                            retryable=True) from None
                    if isinstance(line, dict) and isinstance(line.get("custom_id"), str):
                        found.append(line)
    return found
