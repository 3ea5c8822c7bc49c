"""The imgtask family: image tasks of the `/mj` protocol under `/imgtask/...`.

Submits (imagine, action, modal, blend, describe, shorten, swap face) answer `{code, description,
result: <task id>, properties}`; reads (fetch, list-by-condition, image-seed, image) come from the
task store, except the seed and the image bytes, relayed from the task's channel. Task ids are
numeric strings. Every open task of a channel is polled with one `list-by-condition` per poll
batch, and `notifyHook` hears every change of status or progress.

An action whose button needs a modal (custom zoom, vary region) is parked (`engine.park`): it
answers code 21 and shows MODAL, holding nothing and sending nothing upstream until
`/imgtask/submit/modal` completes it; only then is it held and submitted (the action, then the
modal, on the parent's channel).

Prices: one model per action (`imgtask-<action>`, priced per call): held at submit, settled on
SUCCESS, refunded on FAILURE or CANCEL by the engine, once.
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Mapping, Sequence
from typing import Any

from gateway.errors import InvalidRequest
from gateway.store.tasks import Task
from gateway.tasks import links
from gateway.tasks.adapter import Accepted, Sender, TaskSnapshot, send
from gateway.tasks.families.base import TaskFamily
from gateway.tasks.families.imgtask.adapter import BASIC, EXISTS, EXTENDED, STATUSES, ImgtaskAdapter, basic_buttons
from gateway.tasks.families.imgtask.images import keep_image  # its images are kept as they finish
from gateway.upstreams.errors import UpstreamError

#: The record's seven statuses, from the engine's unified words (the upstream's own word is
#: shown when it agrees: NOT_START before the upstream queued it).
PUBLIC_STATUS: Mapping[str, str] = {
    "submitted": "SUBMITTED", "queued": "SUBMITTED", "in_progress": "IN_PROGRESS",
    "succeeded": "SUCCESS", "failed": "FAILURE", "cancelled": "CANCEL",
}
MODAL = "MODAL"
SUBMIT_DESCRIPTIONS = {1: "Submit success", 21: "Waiting for window confirm", 22: "In queue, please wait"}


#: How long an `imageUrl` serves the image without a key (the spec asks for at least an hour).
IMAGE_LINK_SECONDS = 2 * 3600


def image_path(task_id: str) -> str:
    return f"/imgtask/image/{task_id}"


def image_link(base_url: str, task_id: str) -> str:
    """The signed `imageUrl`, or "" where links cannot be signed (never an unsigned one)."""
    if not base_url or not links.configured():
        return ""
    return links.sign(base_url, image_path(task_id), seconds=IMAGE_LINK_SECONDS)


def model_of(priced_action: str) -> str:
    return f"imgtask-{priced_action}"


class ImgtaskFamily(TaskFamily):
    name = "imgtask"
    adapter = ImgtaskAdapter()
    statuses = STATUSES
    public_statuses = PUBLIC_STATUS
    result_links = False  # the gateway serves the image itself (/imgtask/image/{id})
    result_noun = "images"
    callback_on_change = True
    polls_in_batches = True

    def new_task_id(self) -> str:
        """Milliseconds since the epoch and six random digits: numeric (the spec's image/{id} is an
        integer, at most 19 digits), ordered by time, and never reused (the store's put is
        conditional on the id being new)."""
        return f"{time.time_ns() // 1_000_000}{secrets.randbelow(1_000_000):06d}"

    # --- the upstream --------------------------------------------------------------------------

    @staticmethod
    def variant(channel: Any) -> str:
        return str(getattr(channel, "variant", None) or EXTENDED)

    def usable_channels(self, channels: list[Any], request: Any) -> list[Any]:
        """A request the basic build cannot run (no `basic` form) goes only to extended channels;
        none: a 400 naming what, before anything is held."""
        if request.upstream_request.get("basic") is not None:
            return channels
        usable = [channel for channel in channels if self.variant(channel) != BASIC]
        if channels and not usable:
            what = request.upstream_request.get("needs") or "this operation"
            raise InvalidRequest(f"{what} is not available: the channel{'s' if len(channels) > 1 else ''} serving "
                                 "it run the basic (open-source) midjourney-proxy, which has only imagine, change "
                                 "(U1-U4, V1-V4, reroll), describe and blend", code="not_supported_by_upstream")
        return usable

    def submit_upstream(self, http: Sender, channel: Any, upstream_model: str, request: Any) -> Accepted:
        """The submit; for a parked action, the action (answered 21, waiting) and then its modal.
        On a basic channel, the request's `basic` form (a button is a `change`)."""
        upstream = request.upstream_request
        if self.variant(channel) == BASIC:
            upstream = upstream["basic"]
        modal = upstream.get("modal")
        answer = self.adapter.parse_submit_answer(
            send(http, self.adapter.build_submit(channel.base_url, channel.api_key, upstream_model, upstream),
                 repeatable=False),
            modal_expected=modal is not None)
        if modal is not None:
            if answer.code != EXISTS:
                raise UpstreamError(502, f"the upstream ran the action without its modal (code {answer.code})",
                                    retryable=False)
            modal_request = self.adapter.build_modal(channel.base_url, channel.api_key, answer.task_id, modal)
            answer = self.adapter.parse_submit_answer(send(http, modal_request, repeatable=False))
        return Accepted(answer.task_id, details={"submitCode": answer.code})

    def poll_upstream(self, http: Sender, channel: Any,
                      tasks: Sequence[Task]) -> Sequence[TaskSnapshot | UpstreamError]:
        """One `list-by-condition` for every task of the batch on this channel."""
        listed = self.adapter.parse_list(send(http, self.adapter.build_list(
            channel.base_url, channel.api_key, [task.upstream_task_id for task in tasks]), repeatable=True))
        if self.variant(channel) == BASIC:  # its records have no buttons: those `change` can run
            for snapshot in listed.values():
                snapshot.details["buttons"] = basic_buttons(snapshot.raw)
        snapshots = [listed.get(task.upstream_task_id)
                     or UpstreamError(404, "the upstream no longer lists this task", retryable=False) for task in tasks]
        if not any(isinstance(s, TaskSnapshot) and s.status == "succeeded" for s in snapshots):
            return snapshots
        return [keep_image(http, channel, task, s) if isinstance(s, TaskSnapshot) and s.status == "succeeded" else s
                for task, s in zip(tasks, snapshots, strict=True)]

    # --- answers -------------------------------------------------------------------------------

    def public_status(self, task: Task) -> str:
        if task.waiting_for is not None:
            return MODAL
        word = task.upstream_status or ""
        return word if STATUSES.get(word) == task.status and word != MODAL else PUBLIC_STATUS[task.status]

    def submit_answer(self, task: Task) -> dict[str, Any]:
        if task.waiting_for is not None:
            return {"code": EXISTS, "description": SUBMIT_DESCRIPTIONS[EXISTS], "result": task.task_id,
                    "properties": {"remix": True, "modal": task.waiting_for}}
        code = int(task.details.get("submitCode", 1))
        return {"code": code, "description": SUBMIT_DESCRIPTIONS.get(code, SUBMIT_DESCRIPTIONS[1]),
                "result": task.task_id, "properties": {}}

    def query_answer(self, task: Task) -> dict[str, Any]:
        return self.record(task, str(task.public.get("base_url") or ""))

    def answer_links(self, answer: Mapping[str, Any]) -> list[str]:
        return [answer["imageUrl"]] if answer.get("imageUrl") else []

    def record(self, task: Task, base_url: str) -> dict[str, Any]:
        """The image task record of the spec; `imageUrl` a signed link of this gateway (`base_url`)."""
        public, details = task.public, task.details
        status = self.public_status(task)
        finished = status in ("SUCCESS", "FAILURE", "CANCEL")
        return {
            "id": task.task_id, "action": public.get("action", "IMAGINE"), "status": status,
            "progress": f"{task.progress if status != 'SUCCESS' else 100}%",
            "prompt": public.get("prompt", ""), "promptEn": details.get("promptEn") or public.get("prompt", ""),
            "description": details.get("description") or self.submit_answer(task)["description"],
            "state": public.get("state"), "submitTime": int(public.get("submitTime") or task.created_at * 1000),
            "startTime": details.get("startTime"),
            "finishTime": details.get("finishTime") or (task.completed_at * 1000 if finished and task.completed_at
                                                        else None),
            "imageUrl": image_link(base_url, task.task_id) if status == "SUCCESS" and task.result_urls else "",
            "failReason": task.error if status in ("FAILURE", "CANCEL") else None,
            "properties": dict(details.get("properties") or {}),
            "buttons": list(details.get("buttons") or []) if status == "SUCCESS" else [],
        }


FAMILY = ImgtaskFamily()
