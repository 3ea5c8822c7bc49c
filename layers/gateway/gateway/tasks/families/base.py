"""What every task family gives the engine: the `TaskFamily` base, and the rules families share.

A family (`tasks/families/<name>/`) is one object, `FAMILY`, of a `TaskFamily` subclass:

- its upstream `adapter` (`<name>/adapter.py`) and `statuses` (upstream word -> unified status);
- `public_statuses` (unified status -> the word its own answers use);
- `units_to_hold(request, price)` at submit and `units_to_settle(task, price)` at success, from
  the `Quantities` its request carries (per second, per image, per call, times a multiplier);
- `usable_channels`: the channels that can run a request, before anything is held (all, unless
  a family's channels run different builds of its upstream: imgtask's `variant`);
- `submit_upstream` / `poll_upstream`: by default the adapter's submit and one poll per task;
  a family overrides them for a polling URL of the upstream's own, or (with `polls_in_batches`)
  one upstream call for all the tasks of a channel that a batch of poll messages carries;
- its public answers: `submit_answer`, `query_answer`, `callback_payload` (the query answer,
  unless it says otherwise).

The engine, the poller, the sweeper and the callback sender know families only through this.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from decimal import Decimal
from typing import TYPE_CHECKING, Any, ClassVar

from gateway.prices import Price, unit_cost, with_ratio
from gateway.store.tasks import Task
from gateway.tasks.adapter import Accepted, Sender, TaskAdapter, TaskSnapshot, poll, submit
from gateway.upstreams.errors import UpstreamError

if TYPE_CHECKING:
    from gateway.routing.channel import Channel
    from gateway.tasks.engine import NewTask

#: `task_status` of the generic result (`GET /v1/video/generations/result`), shared by every
#: family served there. The spec's set has no cancelled: a cancelled task did not succeed.
GENERIC_TASK_STATUS: Mapping[str, str] = {
    "submitted": "pending", "queued": "pending", "in_progress": "processing",
    "succeeded": "succeeded", "failed": "failed", "cancelled": "failed",
}


@dataclass(frozen=True)
class Quantities:
    """What a task's price multiplies, stored with the task so its settlement prices it again.

    `samples`: how many results it asks for (the charge covers all of them; fewer delivered
    cost proportionally less). `multiplier`: a factor of the family's (a mode, a resolution,
    an action), kept as a string so it stays exact.
    """

    seconds: int = 0  # seconds of output across every sample
    images: int = 0  # images across every sample
    calls: int = 0
    samples: int = 1
    multiplier: str = "1"

    @classmethod
    def of(cls, stored: Mapping[str, Any]) -> Quantities:
        values: dict[str, Any] = {k: (str(v) if k == "multiplier" else int(v)) for k, v in stored.items()
                                  if k in cls.__dataclass_fields__}
        return cls(**values)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    def units(self, price: Price, delivered: int | None = None) -> int:
        """Units for every sample, or for `delivered` of them."""
        samples = max(self.samples, 1)
        delivered = samples if delivered is None else delivered

        def share(count: int) -> Decimal:
            return Decimal(count * delivered) / samples * Decimal(self.multiplier)

        return unit_cost(price, seconds=share(self.seconds), images=share(self.images), calls=share(self.calls))


class TaskFamily:
    """The base every family subclasses; the defaults fit an upstream polled task by task."""

    name: ClassVar[str]  # the registry name, stored on each task
    adapter: ClassVar[TaskAdapter]
    statuses: ClassVar[Mapping[str, str]]  # upstream word -> unified status (the adapter's table)
    public_statuses: ClassVar[Mapping[str, str]]  # unified status -> the family's public word
    id_prefix: ClassVar[str] = "task_"  # of the gateway's task ids
    #: A success must come with result links (False when the gateway relays the bytes itself).
    result_links: ClassVar[bool] = True
    #: What the ledger's settlement detail counts the results as.
    result_noun: ClassVar[str] = "videos"
    #: Callbacks on every change of status or progress, not only once finished (each one sends
    #: `callback_payload` of the task as it is when the sender delivers it).
    callback_on_change: ClassVar[bool] = False
    #: Whether `POST /v1/video/generations` takes this family's models (see `generic_task`).
    generic_route: ClassVar[bool] = False
    #: Where a client submits this family's tasks otherwise ("POST /v1/videos"), for a 400 that says so.
    submit_route: ClassVar[str | None] = None
    #: Whether `poll_upstream` asks once for all the tasks of a channel in a batch of polls.
    polls_in_batches: ClassVar[bool] = False
    #: Seconds after which the sweeper fails an unfinished task (None: `task_max_age_seconds`).
    max_age_seconds: ClassVar[float | None] = None

    def new_task_id(self) -> str:
        """A new public task id (also the id of its reservation): never reused."""
        return self.id_prefix + uuid.uuid4().hex

    def owns_model(self, model: Any) -> bool:
        """Whether a public model id is this family's (by default: its name is the id's prefix)."""
        return isinstance(model, str) and model.startswith(f"{self.name}-")

    def generic_task(self, data: dict[str, Any], route: str) -> NewTask:
        """The task of a `POST /v1/video/generations` body naming one of this family's models,
        checked against the family's rules (a broken one is a 400 naming the field)."""
        raise NotImplementedError(f"the {self.name} family is not served by the generic route")

    @property
    def protocols(self) -> tuple[str, ...]:
        """The channel protocols that serve this family (`Catalog.serving`)."""
        return (self.name,)

    # --- money ---------------------------------------------------------------------------------

    def units_to_hold(self, request: NewTask, price: Price) -> int:
        """The worst case of everything the task can produce, reserved at submit."""
        return Quantities.of(request.quantities).units(price)

    def settles(self, task: Task) -> bool:
        """Whether a terminal task is settled (else refunded): a success; a family that bills
        what was done of a task that did not succeed (a batch's completed lines) says so."""
        return task.status == "succeeded"

    def units_to_settle(self, task: Task, price: Price | None) -> int:
        """The price of what was delivered, never above the reservation: fewer results than
        asked cost proportionally less (a family without result links delivers all it asked).
        `price` is None when the model is no longer priced: the hold is the price."""
        held = base_hold(task)
        quantities = Quantities.of(task.quantities)
        samples = max(quantities.samples, 1)
        delivered = min(len(task.result_urls) or samples, samples)
        if delivered == samples or price is None:
            return held
        return min(quantities.units(price, delivered), held)

    def units_charged_after_ratio(self, task: Task, units: int) -> int:
        """`units` (a price before the group ratio) as the task's caller pays it: the ratio its
        hold was taken at (`prices.with_ratio`, as `billing.settle` applies it)."""
        return with_ratio(units, task.reservation.get("group_ratio") or 1)

    def settlement_detail(self, task: Task) -> dict[str, Any]:
        return {self.result_noun: len(task.result_urls)}

    def timed_out(self, task: Task) -> TaskSnapshot | None:
        """What an unfinished task past `max_age_seconds` ends as, for a family that can still
        collect what was done (a batch's completed lines); None: failed and refunded."""
        return None

    # --- the upstream --------------------------------------------------------------------------

    def usable_channels(self, channels: list[Channel], request: NewTask) -> list[Channel]:
        """The channels that can run this request, before anything is held (a family whose
        channels run different builds of its upstream leaves out those that cannot; a
        `GatewayError` when none can, so the client hears why and nothing is held)."""
        return channels

    def adapter_for(self, channel: Channel) -> TaskAdapter:
        """The adapter that speaks to `channel` (a family with a second flavour, delta on Vertex
        AI, picks it by the channel)."""
        return self.adapter

    def submit_upstream(self, http: Sender, channel: Channel, upstream_model: str,
                        request: NewTask) -> Accepted:
        """Submits on one channel; `UpstreamError` when it does not take the task."""
        return Accepted(submit(http, self.adapter_for(channel), channel.base_url, channel.api_key, upstream_model,
                               request.upstream_request))

    def poll_upstream(self, http: Sender, channel: Channel,
                      tasks: Sequence[Task]) -> Sequence[TaskSnapshot | UpstreamError]:
        """One snapshot per task, in order, all of one channel (a single task unless the family
        `polls_in_batches`); an `UpstreamError` in place of a task's snapshot, or raised for the
        whole call, when the upstream could not say (retried later if retryable, else failed)."""
        return [poll(http, self.adapter_for(channel), channel.base_url, channel.api_key, task.upstream_task_id)
                for task in tasks]

    # --- answers -------------------------------------------------------------------------------

    def public_status(self, task: Task) -> str:
        return self.public_statuses[task.status]

    def submit_answer(self, task: Task) -> dict[str, Any]:
        raise NotImplementedError

    def query_answer(self, task: Task) -> dict[str, Any]:
        raise NotImplementedError

    def generic_answer(self, task: Task) -> dict[str, Any]:
        """What `GET /v1/video/generations/result` answers for this family's task: the
        `generic_result`, unless the family hands out links of its own (delta)."""
        return generic_result(task)

    def answer_links(self, answer: Mapping[str, Any]) -> list[str]:
        """The links to a task's results in its `query_answer` (what the console's tasks page
        shows, `api/tasks`): only links the family's own answer hands out (a signed link of the
        gateway's, an upstream link the answer relays), never a stored URL it would not. By
        default those of a `generic_result` answer; none from any other answer (a family whose
        results are served behind the key, as epsilon's content)."""
        return [url for url in answer.get("video_results") or [] if isinstance(url, str) and url]

    def callback_payload(self, task: Task) -> dict[str, Any]:
        """The body of a task's callback: what its query answers, unless the family says otherwise."""
        return self.query_answer(task)


def generic_result(task: Task) -> dict[str, Any]:
    """The answer of `GET /v1/video/generations/result` (and its callbacks) for any family."""
    urls = list(task.result_urls)
    return {
        "task_id": task.task_id, "video_result": urls[0] if urls else "", "video_results": urls,
        "video_id": task.task_id, "task_status": GENERIC_TASK_STATUS[task.status],
        "message": task.error or "", "duration": str(task.duration or ""),
    }


def base_hold(task: Task) -> int:
    """A task's hold before its group ratio: what a price of what it delivered is capped at (the
    settlement applies the ratio, `admission.billing.settle`)."""
    reservation = task.reservation
    base = reservation.get("base_units")
    return int(base) if base is not None else int(reservation["units"])
