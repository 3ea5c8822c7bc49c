"""Images: generation and editing through the chat dialect's channels, billed per image.

One request, after its body has passed the rules of `schemas/images.py`:

1. the key may use the model (`require_model`), a channel serves it, it has a price (`Catalog.serving`);
2. the worst case, price per image x `n`, is reserved before any upstream call;
3. the channels are tried in order (`failover.first_success`): a connection error, a timeout, a
   408, 409, 429 or 5xx moves on to the next one; any other answer is the upstream's verdict on
   the request and ends it;
4. success settles to the images actually returned x price (never above the reservation);
   any failure refunds the whole reservation. Either way the ledger gets one entry.

An iota edit also pays for its input images' tokens (`image_input_per_million`), as the upstream
reports them in `usage.input_tokens_details.image_tokens`; the hold covers
`IMAGE_TOKENS_HELD_PER_INPUT` tokens for every input image and the mask.

The streaming images function (`functions/images`, an ASGI app under the Lambda Web Adapter)
hands each request to `generations` or `edits`: the whole request (auth, the body's rules, the
`Idempotency-Key` record, the upstream call, the bill) runs in a worker thread, and an answer
still on its way after the keep-alive interval is committed as a 200 and kept alive with spaces
(`answers.patiently`). The thread is never abandoned: a client that leaves is billed what the
upstream charged for the images it made, no more, and the invocation ends only once that is written.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx

from gateway import auth, observability
from gateway.admission import billing, idempotency
from gateway.api.answers import Inbound, SettledAnswer, patiently
from gateway.auth import Principal
from gateway.errors import GatewayError, UpstreamFailed
from gateway.multipart import check_request_size, parse_multipart
from gateway.observability import logger
from gateway.prices import unit_cost
from gateway.routing import outbound
from gateway.routing.channel import Channel
from gateway.routing.channels import get_catalog
from gateway.routing.failover import first_success
from gateway.schemas.images import (
    EditRequest,
    GenerationRequest,
    IotaEditRequest,
    parse_edit_form,
    parse_generation_body,
)
from gateway.settings import get_settings
from gateway.upstreams.images import ImagesClient

PROTOCOLS = ("chat",)  # the chat dialect carries the images endpoints
GENERATION_ROUTE = "/v1/images/generations"
EDIT_ROUTE = "/v1/images/edits"

# The streaming function may run 15 minutes (its Timeout, and API Gateway's streaming integration's
# TimeoutInMillis, 900000); what is left after this budget settles the bill and sends the answer
# (past its first 6 MB a streamed answer goes at 2 MB/s at most: AWS's "Response streaming for
# Lambda functions", bandwidth limits).
FUNCTION_TIMEOUT_SECONDS = 900.0
TIME_RESERVE_SECONDS = 60.0
TIME_BUDGET_SECONDS = FUNCTION_TIMEOUT_SECONDS - TIME_RESERVE_SECONDS
CONNECT_TIMEOUT_SECONDS = 3.0
# Below this it is not worth starting another attempt: it would only time out.
MIN_ATTEMPT_SECONDS = 1.0
# A streamed Lambda answer may carry up to 200 MB (AWS's "Response streaming for Lambda functions";
# API Gateway's streaming integration lifts its own 10 MB response limit: "Stream the integration
# response for your proxy integrations in API Gateway"); headers and the JSON framing take the rest.
# The most n images can make stays below it (`WORST_ANSWER_BYTES`), so no request is refused for
# its size beforehand; an upstream answering more than any real image is refused and refunded.
STREAMED_RESPONSE_LIMIT = 200 * 1024 * 1024
MAX_RESPONSE_BYTES = STREAMED_RESPONSE_LIMIT - 64 * 1024
# The largest image any of our models returns: 1792x1024 (theta), as a PNG no smaller than its raw
# RGBA pixels plus 10% (filter bytes, chunks), base64 in the answer; times the largest n (10).
WORST_IMAGE_BYTES = (1792 * 1024 * 4 * 11 // 10) * 4 // 3
WORST_ANSWER_BYTES = WORST_IMAGE_BYTES * 10
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
                                          claim_id=True)  # the gateway's own id: never billed twice
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
                         no_attempt=f"no time was left to reach an upstream within the function's "
                                    f"{FUNCTION_TIMEOUT_SECONDS:g} s")


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
        raise GatewayError(f"the images come to {size} bytes, more than the {MAX_RESPONSE_BYTES} bytes a streamed "
                           f"Lambda response can carry; {advice}", status=502, code="response_too_large")


# --- the streaming function's routes ---------------------------------------------------------

# Where the requests run: a thread each, never a daemon (an exit waits for the bills being
# written), bounded like text's settlements.
_WORKERS = ThreadPoolExecutor(max_workers=32, thread_name_prefix="images")
Parse = Callable[[Inbound], Any]
Serve = Callable[..., dict[str, Any]]  # generate or edit: (principal, request, request_id, *, time_left)


async def generations(inbound: Inbound) -> Any:
    """POST /v1/images/generations (a JSON body) in the streaming function."""
    return await _submitted(inbound, GENERATION_ROUTE, lambda i: parse_generation_body(i.body), generate)


async def edits(inbound: Inbound) -> Any:
    """POST /v1/images/edits (a multipart form) in the streaming function."""
    def form(i: Inbound) -> EditRequest:
        content_type = next((v for k, v in i.headers.items() if k.lower() == "content-type"), "")
        return parse_edit_form(parse_multipart(i.body, content_type))

    return await _submitted(inbound, EDIT_ROUTE, form, edit)


async def _submitted(inbound: Inbound, route: str, parse: Parse, serve: Serve) -> Any:
    """The answer, kept alive past the keep-alive interval; the work is never abandoned."""
    loop = asyncio.get_running_loop()
    working = loop.run_in_executor(_WORKERS, _run, inbound, route, parse, serve, time.monotonic())
    # A keep-alive interval of 0 (never) leaves the answer uncommitted for the function's whole time.
    return await patiently(working, route=route, request_id=inbound.request_id,
                           interval=get_settings().buffered_keepalive_seconds or FUNCTION_TIMEOUT_SECONDS,
                           stoppable=False)


def _run(inbound: Inbound, route: str, parse: Parse, serve: Serve, arrived: float) -> SettledAnswer:
    """One submit, as the buffered function answered it: the key, the body's size and rules, then
    the answer made once per `Idempotency-Key` and body (a retry within 24 h gets the first answer,
    `Idempotent-Replayed: true`, and is billed once)."""
    principal = auth.authenticate(inbound.headers, inbound.query)  # logs its fingerprint
    check_request_size(len(inbound.body))
    request = parse(inbound)
    key = idempotency.key_from(dict(inbound.headers))
    body = idempotency.comparable_body(inbound.body, inbound.headers) if key is not None else b""

    def run() -> tuple[int, Any]:
        # The function's time counts from the request's arrival (a wait for a worker included), so
        # the run ends, and its Idempotency-Key record is written, before the function's 900 s:
        # a claim left pending is freed only after that (`idempotency._PENDING_SECONDS`).
        time_left = FUNCTION_TIMEOUT_SECONDS - (time.monotonic() - arrived)
        return 200, serve(principal, request, inbound.request_id, time_left=time_left)

    status, payload, replayed = idempotency.run_once(principal, f"POST {route}", key, body, run)
    return SettledAnswer(payload, status, {"Idempotent-Replayed": "true"} if replayed else None)
