"""The batch family: OpenAI's Batch API (`/v1/batches`), run on the upstream's own batch API.

A batch is a task (its id `batch_...` is its reservation's): submit holds the whole input file
at the batch price (`prices.batch_price`) and hands the lines to the channel's upstream batch
API (a `chat` channel's OpenAI Batch API, `openai.py`; a `messages` channel's Message Batches,
`anthropic.py`; a `content` channel's Gemini batch mode, `gemini.py`; a `bedrock` channel's
batch inference jobs, `bedrock.py`; see `APIS`), or, on a protocol without one, to the gateway
itself (`local.py`: the poller runs the lines, paced, at the full price unless the operator sets
a batch price); the poller
asks the upstream until it ends, then collects its results into the gateway's own output and
error files (`store/files`, ids of the gateway's own, OpenAI's `{id, custom_id, response:
{status_code, request_id, body}, error}` lines) and records the terminal batch with each
line's price: a line that answered 2xx is priced by its usage as a synchronous request is
(`prices.token_cost`, rounded up once per line), at the batch price. The engine then settles
the sum once (one ledger entry for the batch, with its line counts) and gives back the rest of
the hold; a cancelled or expired batch pays for the lines that completed.

Queries read the task store only: retrieving a batch never calls the upstream nor bills.
"""

from __future__ import annotations

import dataclasses
import hashlib
import time
from collections.abc import Mapping, Sequence
from decimal import Decimal
from typing import TYPE_CHECKING, Any, ClassVar

from gateway.errors import InvalidRequest
from gateway.formats.usage import Usage, usage_from_chat, usage_from_responses
from gateway.prices import DEFAULT_BATCH_RATIO, Price, batch_price, token_cost
from gateway.routing.channel import Channel
from gateway.store.files import FilesStore, StoredFile
from gateway.store.tasks import Task
from gateway.tasks.adapter import TERMINAL, Accepted, Sender, TaskAdapter, TaskSnapshot
from gateway.tasks.families.base import TaskFamily
from gateway.tasks.families.batch import anthropic, bedrock, gemini, local, openai
from gateway.tasks.families.batch.lines import FileSummary, read_lines
from gateway.upstreams.errors import UpstreamError

if TYPE_CHECKING:
    from gateway.tasks.engine import NewTask

#: The completion window OpenAI offers (`batch_create_params.py`): the only one.
COMPLETION_WINDOW_SECONDS = 24 * 3600
#: How long a batch's output and error files are kept (OpenAI: 30 days after the batch ends).
OUTPUT_KEPT_SECONDS = 30 * 24 * 3600

#: The gateway's unified states -> OpenAI's batch status, when the task's details name none.
PUBLIC_STATUS: Mapping[str, str] = {
    "submitted": "validating", "queued": "validating", "in_progress": "in_progress",
    "succeeded": "completed", "failed": "failed", "cancelled": "cancelled",
}
#: The upstream's words while a batch runs, as the gateway shows them.
RUNNING = {"validating": "validating", "in_progress": "in_progress", "finalizing": "finalizing",
           "cancelling": "cancelling"}  # (Anthropic's `canceling` is read as `cancelling`)


def line_usage(url: str, body: Mapping[str, Any]) -> Usage:
    usage = body.get("usage") if isinstance(body.get("usage"), dict) else None
    return usage_from_responses(usage) if url == "/v1/responses" else usage_from_chat(usage)


def line_units(price: Price, url: str, body: Mapping[str, Any], ratio: Decimal = DEFAULT_BATCH_RATIO) -> int:
    """One answered line's price at the batch price (`ratio` when the model sets none): its usage
    priced as a synchronous request's, rounded up to a whole unit once, for this line."""
    usage = line_usage(url, body)
    return token_cost(batch_price(price, ratio), input_tokens=usage.input_tokens, output_tokens=usage.output_tokens,
                      cached_input_tokens=usage.cached_input_tokens,
                      cache_write_tokens=usage.cache_creation_input_tokens,
                      cache_write_1h_tokens=usage.cache_creation_1h_input_tokens)


def _derived(task_id: str, what: str) -> str:
    return hashlib.sha256(f"{task_id}:{what}".encode()).hexdigest()


def output_file_id(task: Task, what: str) -> str:
    """The id of a batch's output (`what`: output, errors): the same each time it is collected
    (a collection run again replaces the same file), sorted at the batch's creation."""
    return f"file-{task.created_at * 1000:012x}{_derived(task.task_id, what)[:16]}"


class BatchFamily(TaskFamily):
    name = "batch"
    id_prefix = "batch_"
    adapter = openai.ADAPTER  # the batch's create and retrieve; submit_upstream uploads its file first
    statuses: ClassVar[Mapping[str, str]] = {**{word: "in_progress" for word in RUNNING}, "completed": "succeeded",
                                             "failed": "failed", "expired": "cancelled", "cancelled": "cancelled"}
    public_statuses = PUBLIC_STATUS
    result_links = False
    result_noun = "lines"
    #: The upstream ends a batch within its 24 h window; collecting takes a few polls more.
    max_age_seconds: ClassVar[float | None] = COMPLETION_WINDOW_SECONDS + 2 * 3600

    @property
    def protocols(self) -> tuple[str, ...]:
        # The protocols with an upstream batch API first (`APIS`); then every other text protocol,
        # whose batches the gateway runs itself (`local`).
        return (*APIS, *(protocol for protocol in local.SPOKEN if protocol not in APIS))

    # --- money ---------------------------------------------------------------------------------

    def units_to_hold(self, request: NewTask, price: Price) -> int:
        """Every line at its worst case at the batch price, plus a unit a line: each line is
        rounded up on its own at settlement (`line_units`), which the sum's one rounding is not."""
        summary = FileSummary.of(request.quantities)
        ratio = local.SELF_RUN_RATIO if request.quantities.get("self_run") else DEFAULT_BATCH_RATIO
        return token_cost(batch_price(price, ratio), input_tokens=summary.input_tokens,
                          output_tokens=summary.output_tokens) + summary.lines

    def settles(self, task: Task) -> bool:
        return int(task.details.get("line_units") or 0) > 0

    def units_to_settle(self, task: Task, price: Price | None) -> int:
        """The sum of the completed lines' prices (`line_units`), kept when the batch was collected."""
        return int(task.details.get("line_units") or 0)

    def settlement_detail(self, task: Task) -> dict[str, Any]:
        counts = task.details.get("request_counts") or {}
        usage = task.details.get("usage") or {}
        return {"lines": int(counts.get("total") or 0), "completed": int(counts.get("completed") or 0),
                "failed": int(counts.get("failed") or 0), "batch_status": self.public_status(task),
                "input_tokens": int(usage.get("input_tokens") or 0),
                "output_tokens": int(usage.get("output_tokens") or 0), "price": "batch"}

    def timed_out(self, task: Task) -> TaskSnapshot | None:
        """A batch past its maximum age is collected, not refunded: a batch the gateway runs ends
        `expired` with the lines that ran billed; an upstream's batch is asked once more and
        collected if it has ended (its own window is 24 h), else cancelled there and refunded."""
        from gateway.routing.channels import get_catalog
        from gateway.routing.outbound import sync_client

        channel = get_catalog().named(task.channel)
        if channel is None:
            return None
        if _api(channel) is local:
            return self._collect(sync_client, channel, task, local.state(task), "expired")
        snapshot = self._poll(sync_client, channel, task)
        if snapshot.terminal:
            return snapshot
        _api(channel).cancel(sync_client, channel, task.upstream_task_id)
        return None

    # --- the upstream --------------------------------------------------------------------------

    def submit_upstream(self, http: Sender, channel: Channel, upstream_model: str, request: NewTask) -> Accepted:
        if _api(channel) is local:  # nothing to send: the poller runs the lines
            return Accepted(upstream_task_id=local.UPSTREAM_TASK_ID, details=local.started())
        stored = _input_file(request.upstream_request)
        batch_id, file_id = _api(channel).submit(http, channel, upstream_model, FilesStore().read(stored),
                                                 request.upstream_request["endpoint"], str(request.task_id))
        return Accepted(upstream_task_id=batch_id, details={"batch_status": "validating",
                                                            "upstream_input_file_id": file_id})

    def usable_channels(self, channels: list[Channel], request: NewTask) -> list[Channel]:
        """A `chat` channel first, then `messages`, `content`, `bedrock` (each in the catalog's order):
        a line then runs on the dialect it was written in wherever a channel allows; embeddings only
        on `chat`, or on an `azure` channel the gateway runs them on. The channels the gateway runs
        a batch on itself (`local`) only when no channel of the model has a batch API."""
        # A bedrock channel with its S3 location, role and keys, for a batch of at least its minimum
        # number of records (Bedrock refuses a smaller job: the account's quota, `BedrockBatch`).
        lines = int(request.quantities.get("lines") or 0)
        fewest = {id(channel): bedrock.min_records(channel) for channel in channels if channel.protocol == "bedrock"}
        channels = [channel for channel in channels if channel.protocol != "bedrock" or (
            (least := fewest[id(channel)]) is not None and lines >= least)]
        if not channels:
            floor = min((least for least in fewest.values() if least is not None), default=None)
            smallest = f": its bedrock channels run batches of at least {floor} requests (this file has " \
                f"{lines})" if floor is not None else ""
            raise InvalidRequest(f"no channel that runs batches serves '{request.model}'{smallest}",
                                 param="input_file_id", code="model_not_batchable")
        if request.upstream_request.get("endpoint") == "/v1/embeddings":
            channels = [channel for channel in channels if channel.protocol == "chat" or (
                _api(channel) is local and channel.protocol in local.EMBEDDING_PROTOCOLS)]
            if not channels:
                raise InvalidRequest(f"no channel that runs embedding batches serves '{request.model}'",
                                     param="input_file_id", code="model_not_batchable")
        channels = sorted(channels, key=lambda channel: self.protocols.index(channel.protocol))
        # On the gateway only when no channel of the model has a batch API: the hold's price
        # (half, or the full price, by default) is then the price the lines are settled at.
        request.quantities["self_run"] = self_run = bool(channels) and _api(channels[0]) is local
        return [channel for channel in channels if (_api(channel) is local) == self_run]

    def adapter_for(self, channel: Channel) -> TaskAdapter:
        return _api(channel).ADAPTER

    def poll_upstream(self, http: Sender, channel: Channel,
                      tasks: Sequence[Task]) -> Sequence[TaskSnapshot | UpstreamError]:
        found: list[TaskSnapshot | UpstreamError] = []
        for task in tasks:
            try:
                found.append(self._poll(http, channel, task))
            except UpstreamError as exc:
                found.append(exc)
        return found

    def _poll(self, http: Sender, channel: Channel, task: Task) -> TaskSnapshot:
        if _api(channel) is local:
            return self._run(http, channel, task)
        details: dict[str, Any] = {}
        if task.details.get("cancel_requested") and not task.details.get("cancel_sent"):
            _api(channel).cancel(http, channel, task.upstream_task_id)
            details["cancel_sent"] = True
        batch = _api(channel).retrieve(http, channel, task.upstream_task_id)
        word, ended = _api(channel).progress(batch, bool(task.details.get("cancel_requested")))
        if ended is not None:
            return self._collect(http, channel, task, batch, ended)
        shown = RUNNING.get(word.replace("canceling", "cancelling"), "in_progress")
        if task.details.get("cancel_requested"):
            shown = "cancelling"
        now = int(time.time())
        details["batch_status"] = shown
        for stamp in ("in_progress", "finalizing"):
            if shown == stamp and not task.details.get(f"{stamp}_at"):
                details[f"{stamp}_at"] = now
        counts = batch.get("request_counts")
        if isinstance(counts, dict):
            details["upstream_counts"] = {k: int(v) for k, v in counts.items() if isinstance(v, int)}
        return TaskSnapshot(status="in_progress", upstream_status=word, progress=None, result_urls=[], error=None,
                            duration=None, raw={}, details=details)

    def _run(self, http: Sender, channel: Channel, task: Task) -> TaskSnapshot:
        """A batch the gateway runs: its next lines, or, once all have run (or it is cancelled or
        past its window), its collection."""
        if task.details.get("cancel_requested"):
            return self._collect(http, channel, task, local.state(task), "cancelled")
        if time.time() >= task.created_at + COMPLETION_WINDOW_SECONDS:
            return self._collect(http, channel, task, local.state(task), "expired")
        details, done = local.run_chunk(channel, task)
        if done:
            ran = dataclasses.replace(task, details={**task.details, **details})
            return self._collect(http, channel, ran, local.state(ran), "completed")
        return TaskSnapshot(status="in_progress", upstream_status="in_progress", progress=None, result_urls=[],
                            error=None, duration=None, raw={}, details=details)

    def _collect(self, http: Sender, channel: Channel, task: Task, batch: dict[str, Any],
                 word: str) -> TaskSnapshot:
        """The ended upstream batch's lines, as the gateway's own output and error files."""
        stored = FilesStore().get(task.owner_id, str(task.public.get("input_file_id") or ""))
        url = task.public["endpoint"]
        lines = list(read_lines(FilesStore().read(stored))) if stored is not None else []
        found = _api(channel).collect(http, channel, batch, lines, url, task.model)
        by_custom_id = {line["custom_id"]: line for line in found}
        price = Price.of(task.price or {})
        ratio = local.SELF_RUN_RATIO if task.upstream_task_id == local.UPSTREAM_TASK_ID else DEFAULT_BATCH_RATIO
        outputs: list[dict[str, Any]] = []
        errors: list[dict[str, Any]] = []
        units = completed = 0
        usage = {"input_tokens": 0, "output_tokens": 0, "cached_tokens": 0}
        missing = {"expired": ("batch_expired", "This request could not be executed before the completion "
                                                "window expired."),
                   "cancelled": ("batch_cancelled", "This request was not executed: the batch was cancelled."),
                   }.get(word, ("batch_failed", "This request was not executed: the batch failed."))
        # The input file's order; the upstream's own when the input file was deleted meanwhile.
        custom_ids = [line.custom_id for line in lines] if lines else list(by_custom_id)
        for custom_id in custom_ids:
            ours = {"id": "batch_req_" + _derived(task.task_id, custom_id)[:24], "custom_id": custom_id}
            upstream = by_custom_id.get(custom_id)
            response = upstream.get("response") if upstream else None
            if isinstance(response, dict) and isinstance(response.get("body"), dict):
                body = dict(response["body"])
                status = int(response.get("status_code") or 500)
                if "model" in body:
                    body["model"] = task.model  # the public model, never the channel's
                request_id = "req_" + _derived(task.task_id, "request:" + custom_id)[:24]
                answer = {**ours, "response": {"status_code": status, "request_id": request_id, "body": body},
                          "error": None}
                if 200 <= status < 300:
                    completed += 1
                    units += line_units(price, url, body, ratio)
                    counted = line_usage(url, body)
                    usage["input_tokens"] += counted.input_tokens
                    usage["output_tokens"] += counted.output_tokens
                    usage["cached_tokens"] += counted.cached_input_tokens
                    outputs.append(answer)
                else:
                    errors.append(answer)
            else:
                error = (upstream or {}).get("error")
                code, message = ((str(error.get("code") or "request_failed"), str(error.get("message") or ""))
                                 if isinstance(error, dict) else missing)
                errors.append({**ours, "response": None, "error": {"code": code, "message": message}})
        now = int(time.time())
        details: dict[str, Any] = {
            "line_units": units, "usage": {**usage, "total_tokens": usage["input_tokens"] + usage["output_tokens"]},
            "request_counts": {"total": len(outputs) + len(errors), "completed": completed, "failed": len(errors)},
            "batch_status": word, f"{word}_at": now,
        }
        if not task.details.get("finalizing_at") and word == "completed":
            details["finalizing_at"] = now
        for what, found in (("output", outputs), ("errors", errors)):
            if found:
                details[f"{'output' if what == 'output' else 'error'}_file_id"] = _write(task, what, found, now)
        unified = {"completed": "succeeded", "failed": "failed"}.get(word, "cancelled")
        upstream_errors = batch.get("errors")
        if word == "failed" and isinstance(upstream_errors, dict):
            details["errors"] = [{k: e.get(k) for k in ("code", "message", "param", "line")}
                                 for e in upstream_errors.get("data") or [] if isinstance(e, dict)][:100]
        return TaskSnapshot(status=unified, upstream_status=word, progress=100, result_urls=[],
                            error=None if unified == "succeeded" else f"the batch ended {word}", duration=None,
                            raw={}, details=details)

    # --- answers -------------------------------------------------------------------------------

    def public_status(self, task: Task) -> str:
        word = task.details.get("batch_status")
        if word and not (task.status in TERMINAL and word in RUNNING):  # (a batch failed past its age)
            return str(word)
        return super().public_status(task)

    def submit_answer(self, task: Task) -> dict[str, Any]:
        return self.query_answer(task)

    def query_answer(self, task: Task) -> dict[str, Any]:
        """OpenAI's Batch object (`types/batch.py`), the gateway's ids only."""
        details = task.details
        status = self.public_status(task)
        counts = details.get("request_counts") or {"total": int(task.quantities.get("lines") or 0),
                                                   "completed": 0, "failed": 0}
        answer: dict[str, Any] = {
            "id": task.task_id, "object": "batch", "endpoint": task.public.get("endpoint"), "model": task.model,
            "errors": ({"object": "list", "data": details["errors"]} if details.get("errors") else None),
            "input_file_id": task.public.get("input_file_id"), "completion_window": "24h", "status": status,
            "output_file_id": details.get("output_file_id"), "error_file_id": details.get("error_file_id"),
            "created_at": task.created_at, "in_progress_at": details.get("in_progress_at"),
            "expires_at": task.created_at + COMPLETION_WINDOW_SECONDS,
            "finalizing_at": details.get("finalizing_at"), "completed_at": details.get("completed_at"),
            "failed_at": details.get("failed_at") or (task.completed_at if status == "failed" else None),
            "expired_at": details.get("expired_at"), "cancelling_at": details.get("cancelling_at"),
            "cancelled_at": details.get("cancelled_at"),
            "request_counts": {k: int(counts.get(k) or 0) for k in ("total", "completed", "failed")},
            "metadata": task.public.get("metadata"),
        }
        if details.get("usage"):
            usage = details["usage"]
            answer["usage"] = {"input_tokens": int(usage["input_tokens"]),
                               "input_tokens_details": {"cached_tokens": int(usage.get("cached_tokens") or 0)},
                               "output_tokens": int(usage["output_tokens"]),
                               "output_tokens_details": {"reasoning_tokens": 0},
                               "total_tokens": int(usage["total_tokens"])}
        return answer

    def answer_links(self, answer: Mapping[str, Any]) -> list[str]:
        return []


#: Each protocol's upstream batch API, in the order a batch prefers its channels: a module with
#: `ADAPTER`, `submit`, `retrieve`, `cancel`, `progress` and `collect` (see `openai.py`); `submit`
#: is handed the gateway's batch id too (Bedrock's job takes it as its idempotency token).
APIS: Mapping[str, Any] = {"chat": openai, "messages": anthropic, "content": gemini, "bedrock": bedrock}


def _api(channel: Channel) -> Any:
    """The upstream batch API of the channel's protocol, or the gateway's own runner (a protocol
    without one; Vertex AI, whose batch prediction reads Cloud Storage or BigQuery only)."""
    if channel.protocol == "content" and channel.vertex:
        return local
    return APIS.get(channel.protocol, local)


def _input_file(request: Mapping[str, Any]) -> StoredFile:
    stored = FilesStore().get(request["owner_id"], request["file_id"])
    if stored is None:
        raise InvalidRequest(f"the batch's input file '{request['file_id']}' was deleted or has expired",
                             param="input_file_id", code="file_not_found")
    return stored


def _write(task: Task, what: str, lines: list[dict[str, Any]], now: int) -> str:
    import json

    data = "".join(json.dumps(line, separators=(",", ":"), ensure_ascii=False) + "\n" for line in lines).encode()
    file_id = output_file_id(task, what)
    FilesStore().put(StoredFile(file_id=file_id, owner_id=task.owner_id,
                                filename=f"{task.task_id}_{'output' if what == 'output' else 'error'}.jsonl",
                                bytes=len(data), purpose="batch_output", created_at=now,
                                expires_at=now + OUTPUT_KEPT_SECONDS), data, "application/jsonl")
    return file_id


FAMILY = BatchFamily()
