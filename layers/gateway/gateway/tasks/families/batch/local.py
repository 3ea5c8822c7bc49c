"""A batch on a channel whose protocol has no batch API: the gateway runs the lines itself.

The task poller runs them, a chunk per poll: one line at a time, through the channel's own
synchronous client (`upstreams/clients`, the body converted as the text routes convert it,
`formats`), at most `CHUNK_LINES` lines and `CHUNK_SECONDS` of starting them per poll; then the
task engine's poll backoff spaces the chunks. So a batch never takes the interactive requests'
concurrency: its lines run in the poller, whose concurrency is reserved apart
(`BackgroundConcurrency`), one at a time, never in the text function; an upstream that answers
429 (or does not answer) pauses the batch until its next poll, with the line run again then.

Each chunk's answers go to a part of the batch's own (`files/<owner>/<batch>.part-<k>`, under
the owner's prefix and never listed) before the task's cursor (`next_line`) moves, in the
engine's versioned write; a chunk run twice (a crash, two pollers) writes the same part again.
When every line has run, or the batch is cancelled or past its 24 h window, the family collects
the parts as it collects an upstream's results (`collect`): the lines answered 2xx are priced by
their usage, the others go to the error file, the lines never run are `batch_cancelled` or
`batch_expired`.

Price: the model's full price unless the operator sets its `batch_ratio` (`SELF_RUN_RATIO`):
no upstream gives the gateway a batch discount here.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from decimal import Decimal
from typing import Any

from gateway.formats import CHAT, CONTENT, MESSAGES, RESPONSES, convert_request, convert_response
from gateway.routing.channel import Channel
from gateway.routing.outbound import run
from gateway.store.aws import client
from gateway.store.files import FilesStore
from gateway.store.tasks import Task
from gateway.tasks.adapter import Sender
from gateway.tasks.families.batch.lines import Line, _request_model, read_lines
from gateway.upstreams.base import Timeouts
from gateway.upstreams.clients import client_for
from gateway.upstreams.errors import UpstreamError
from gateway.validation import parse_model

#: The text protocols the gateway runs a batch on itself, and the dialect each speaks (as the
#: text routes: `api/text._SPOKEN`). A protocol with a batch adapter of its own is not run here
#: (`chat`, `messages`). Not `bedrock`: its calls are signed with the function's own role, which
#: the poller's role does not grant, and Bedrock has batch inference of its own.
SPOKEN = {"azure": CHAT, "content": CONTENT, "chat": CHAT, "messages": MESSAGES}
#: Embedding lines run where the text routes run embeddings (`api/text.EMBEDDING_PROTOCOLS`).
EMBEDDING_PROTOCOLS = ("chat", "azure")
#: A line's share of the synchronous price when the model's price sets no `batch_ratio`.
SELF_RUN_RATIO = Decimal(1)
#: What one poll runs at most: lines, and seconds in which a new line may start.
CHUNK_LINES = 50
CHUNK_SECONDS = 20.0
#: One line's own limit (inside the poller's 60 s with the chunk's starting window).
LINE_TIMEOUTS = Timeouts(connect=3.0, first_byte=25.0, idle=25.0, total=25.0)
UPSTREAM_TASK_ID = "gateway"  # no upstream batch: the task's upstream id says who runs it


def part_key(task: Task, chunk: int) -> str:
    return f"files/{task.owner_id}/{task.task_id}.part-{chunk:06d}"


def started() -> dict[str, Any]:
    """The details of a batch the gateway runs, at submit (nothing is sent anywhere)."""
    return {"batch_status": "in_progress", "in_progress_at": int(time.time()), "next_line": 0, "chunks": 0}


def state(task: Task) -> dict[str, Any]:
    """What `results` reads: the parts written so far (the "batch" the family collects)."""
    return {"task": task, "chunks": int(task.details.get("chunks") or 0)}


def run_chunk(channel: Channel, task: Task, *, deadline: float | None = None) -> tuple[dict[str, Any], bool]:
    """Runs the next lines; (the details to write, whether every line has now run)."""
    lines = list(read_lines(FilesStore().read(_input(task))))
    start = int(task.details.get("next_line") or 0)
    deadline = time.monotonic() + CHUNK_SECONDS if deadline is None else deadline
    answered: list[dict[str, Any]] = []
    for line in lines[start:start + CHUNK_LINES]:
        if answered and time.monotonic() >= deadline:
            break
        def answer(http: Any, line: Line = line) -> Any:
            return _answer(client_for(channel, http, LINE_TIMEOUTS), channel, task, line)

        try:
            body = run(answer)
            answered.append({"custom_id": line.custom_id, "response": {"status_code": 200, "body": body}})
        except UpstreamError as exc:
            if exc.status is None or exc.status == 429:
                break  # the upstream is busy or away: this line runs again at the next poll
            answered.append({"custom_id": line.custom_id, "response": {"status_code": exc.status, "body": {
                "error": {"message": exc.message, "type": "upstream_error", "code": str(exc.status)}}}})
    chunks = int(task.details.get("chunks") or 0)
    if answered:
        data = "".join(json.dumps(found, separators=(",", ":"), ensure_ascii=False) + "\n" for found in answered)
        client("s3").put_object(Bucket=FilesStore().bucket, Key=part_key(task, chunks), Body=data.encode(),
                                ContentType="application/jsonl", ServerSideEncryption="AES256")
        chunks += 1
    done = start + len(answered)
    return {"next_line": done, "chunks": chunks}, done >= len(lines)


def collect(http: Sender, channel: Channel, batch: Mapping[str, Any], lines: list[Line], url: str,
            model: str) -> list[dict[str, Any]]:
    """Every line run so far, as the parts hold them (`state`), in OpenAI's output-line shape
    (the `collect` of every batch API, `openai.py`)."""
    task: Task = batch["task"]
    s3 = client("s3")
    found: list[dict[str, Any]] = []
    for chunk in range(int(batch["chunks"])):
        body = s3.get_object(Bucket=FilesStore().bucket, Key=part_key(task, chunk))["Body"].read()
        found += [json.loads(raw) for raw in body.split(b"\n") if raw.strip()]
    return found


def _input(task: Task):
    stored = FilesStore().get(task.owner_id, str(task.public.get("input_file_id") or ""))
    if stored is None:
        raise UpstreamError(400, "the batch's input file was deleted or has expired", retryable=False)
    return stored


async def _answer(upstream: Any, channel: Channel, task: Task, line: Line) -> dict[str, Any]:
    """One line's answer in the client's dialect, under the public model name, with its usage."""
    body: dict[str, Any] = parse_model(_request_model(line.url), line.body).model_dump(exclude_unset=True)
    model = channel.upstream_model(task.model)
    if line.url == "/v1/embeddings":
        answer = await upstream.embeddings({**body, "model": model})
        return {**answer, "model": task.model} if "model" in answer else answer
    dialect = RESPONSES if line.url == "/v1/responses" else CHAT
    spoken = SPOKEN[channel.protocol]
    target = RESPONSES if dialect == RESPONSES and spoken == CHAT else spoken
    payload = convert_request(body, source=dialect, target=target, model=model, stream=False)
    if target == CHAT:
        answer = await upstream.chat_completions(payload)
    elif target == RESPONSES:
        answer = await upstream.responses(payload)
    elif target == MESSAGES:
        answer = await upstream.messages(payload)
    else:
        answer = await upstream.generate_content(model, payload)
    if not isinstance(answer, dict):
        raise UpstreamError(502, "the upstream answered with JSON that is not an object", retryable=True)
    return convert_response(answer, source=target, target=dialect, model=task.model, now=int(time.time()))
