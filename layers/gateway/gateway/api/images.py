"""Images: generation and editing through the chat dialect's channels, billed per image.

One request, after its body has passed the rules of `schemas/images.py`:

1. the key may use the model (`require_model`), a channel serves it, it has a price (`Catalog.serving`);
2. the worst case, price per image x `n`, is reserved before any upstream call;
3. the channels are tried in order (`verdict.first_success`): a connection error, a timeout, a
   408, 409, 429 or 5xx moves on to the next one; any other answer is the upstream's verdict on
   the request and ends it;
4. success settles to the images actually returned x price (never above the reservation);
   any failure refunds the whole reservation. Either way the ledger gets one entry.

An iota edit also pays for its input images' tokens (`image_input_per_million`), as the upstream
reports them in `usage.input_tokens_details.image_tokens`; the hold covers
`IMAGE_TOKENS_HELD_PER_INPUT` tokens for every input image and the mask.
"""

from __future__ import annotations

import json
import time
from collections.abc import Awaitable, Callable
from typing import Any

import httpx

from gateway import observability
from gateway.admission import billing
from gateway.auth import Principal
from gateway.errors import GatewayError, UpstreamFailed
from gateway.observability import logger
from gateway.prices import unit_cost
from gateway.routing import outbound
from gateway.routing.channels import Channel, get_catalog
from gateway.schemas.images import EditRequest, GenerationRequest, IotaEditRequest
from gateway.upstreams.images import ImagesClient
from gateway.upstreams.verdict import first_success

PROTOCOLS = ("chat",)  # the chat dialect carries the images endpoints
GENERATION_ROUTE = "/v1/images/generations"
EDIT_ROUTE = "/v1/images/edits"

# API Gateway gives a buffered integration 29 s; what is left after this budget settles the
# bill and sends the answer. A generation slower than that cannot be served synchronously.
TIME_BUDGET_SECONDS = 26.0
# Lambda's remaining time is the other bound (a shorter function timeout, a local run).
TIME_RESERVE_SECONDS = 2.0
CONNECT_TIMEOUT_SECONDS = 3.0
# Below this it is not worth starting another attempt: it would only time out.
MIN_ATTEMPT_SECONDS = 1.0
# A Lambda response is at most 6 MB; headers and the JSON framing of the result take the rest.
MAX_RESPONSE_BYTES = 6 * 1024 * 1024 - 64 * 1024
_ITEM_FIELDS = ("url", "b64_json", "revised_prompt")
_PASSED_THROUGH = ("background", "output_format", "quality", "size")
# What one input image of an edit may cost in tokens at most: the hold's allowance (high input
# fidelity at the largest size stays below it). The bill is the upstream's count, capped at the hold.
IMAGE_TOKENS_HELD_PER_INPUT = 8000

Call = Callable[[ImagesClient, Channel], Awaitable[dict[str, Any]]]


def generate(principal: Principal, request: GenerationRequest, request_id: str, *,
             time_left: float | None = None) -> dict[str, Any]:
    """POST /v1/images/generations for an iota or theta request; the answer in the chat dialect."""
    payload = request.upstream_payload()

    def call(client: ImagesClient, channel: Channel) -> Awaitable[dict[str, Any]]:
        return client.generate({**payload, "model": channel.upstream_model(request.model)})

    return _serve(principal, request.model, request.n, GENERATION_ROUTE, request_id, call,
                  urls_possible=request.family == "theta", time_left=time_left)


def edit(principal: Principal, request: EditRequest, request_id: str, *,
         time_left: float | None = None) -> dict[str, Any]:
    """POST /v1/images/edits for an eta or iota request; `n` multiplies the charge."""
    fields, files = request.upstream_fields(), request.upstream_files()

    def call(client: ImagesClient, channel: Channel) -> Awaitable[dict[str, Any]]:
        return client.edit({**fields, "model": channel.upstream_model(request.model)}, files)

    input_images = request.input_images if isinstance(request, IotaEditRequest) else 0
    return _serve(principal, request.model, request.n, EDIT_ROUTE, request_id, call,
                  urls_possible=request.family == "eta", time_left=time_left, input_images=input_images)


def _reported_image_tokens(result: dict[str, Any]) -> int:
    details = (result.get("usage") or {}).get("input_tokens_details")
    tokens = details.get("image_tokens") if isinstance(details, dict) else None
    return tokens if isinstance(tokens, int) and not isinstance(tokens, bool) and tokens > 0 else 0


def _usage_detail(result: dict[str, Any]) -> dict[str, int]:
    """The usage the upstream reported, for the ledger (and the request log)."""
    usage = result.get("usage") or {}
    return {name: usage[name] for name in ("input_tokens", "output_tokens")
            if isinstance(usage.get(name), int) and not isinstance(usage.get(name), bool)}


def _serve(principal: Principal, model: str, n: int, route: str, request_id: str, call: Call, *,
           urls_possible: bool, time_left: float | None, input_images: int = 0) -> dict[str, Any]:
    principal.require_model(model)
    price, channels = get_catalog().serving(model, PROTOCOLS, prefer=PROTOCOLS[0], group=principal.group)
    observability.set_model(model)  # a metric dimension only once the catalog knows the model
    budget = TIME_BUDGET_SECONDS if time_left is None else min(TIME_BUDGET_SECONDS,
                                                               time_left - TIME_RESERVE_SECONDS)
    deadline = time.monotonic() + budget

    hold = unit_cost(price, images=n, image_input_tokens=input_images * IMAGE_TOKENS_HELD_PER_INPUT)
    reservation = billing.reserve_request(principal, hold, model=model, route=route, request_id=request_id,
                                          claim_id=True)  # API Gateway's id: a replayed event is refused
    try:
        answer, channel = _first_answer(channels, call, deadline)
        result = _result(answer, n)
        _check_response_size(result, urls_possible)
    except BaseException as exc:
        billing.refund(reservation, reason=getattr(exc, "message", type(exc).__name__)[:200],
                       error=isinstance(exc, Exception))
        raise

    images = len(result["data"])
    image_tokens = _reported_image_tokens(result) if input_images else 0
    units = min(unit_cost(price, images=images, image_input_tokens=image_tokens), reservation.base_hold)
    detail = {"images": images, "channel": channel.name, **_usage_detail(result)}
    if image_tokens:
        detail["image_tokens"] = image_tokens
    try:
        billing.settle(reservation, units, detail=detail)
    except Exception:
        # The images exist and the hold already covers them: answer them; the reservation
        # stays open for an operator to settle rather than failing a paid request.
        logger.exception("settlement failed", extra={"reservation_id": request_id, "units": units})
    logger.info("images served", extra={"model": model, "channel": channel.name, "images": images, "units": units})
    return result


def _first_answer(channels: list[Channel], call: Call, deadline: float) -> tuple[dict[str, Any], Channel]:
    def attempt(channel: Channel) -> dict[str, Any]:
        remaining = max(deadline - time.monotonic(), MIN_ATTEMPT_SECONDS)
        timeout = httpx.Timeout(remaining, connect=min(CONNECT_TIMEOUT_SECONDS, remaining))
        return outbound.run(lambda http: call(ImagesClient(channel.base_url, channel.api_key, http, timeout=timeout),
                                              channel))

    return first_success(channels, attempt, can_try=lambda: deadline - time.monotonic() >= MIN_ATTEMPT_SECONDS,
                         no_attempt="no time was left to reach an upstream within the 29 s limit")


def _result(answer: dict[str, Any], n: int) -> dict[str, Any]:
    """The chat-dialect answer: at most `n` images (no one pays for or gets more than asked)."""
    items = [{k: item[k] for k in _ITEM_FIELDS if isinstance(item.get(k), str)}
             for item in answer.get("data", []) if isinstance(item, dict)]
    items = [item for item in items if "url" in item or "b64_json" in item][:n]
    if not items:
        raise UpstreamFailed("the upstream answered without any image")
    created = answer.get("created")
    result: dict[str, Any] = {"created": created if isinstance(created, int) else int(time.time()), "data": items}
    if isinstance(answer.get("usage"), dict):
        result["usage"] = answer["usage"]
    result.update({k: answer[k] for k in _PASSED_THROUGH if isinstance(answer.get(k), str)})
    return result


def _check_response_size(result: dict[str, Any], urls_possible: bool) -> None:
    size = len(json.dumps(result, separators=(",", ":")))
    if size > MAX_RESPONSE_BYTES:
        advice = "ask for fewer images (n)" + (" or response_format=url" if urls_possible else "")
        raise GatewayError(f"the images come to {size} bytes, more than the {MAX_RESPONSE_BYTES} bytes a Lambda "
                           f"response can carry; {advice}", status=502, code="response_too_large")
