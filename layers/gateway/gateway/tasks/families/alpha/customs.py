"""Alpha custom elements and voices: created upstream, kept per user in the accounts table.

| item | pk | sk |
|---|---|---|
| custom element | `USER#<id>` | `ALPHA#element#<model>#<element_id>` |
| custom voice | `USER#<id>` | `ALPHA#voice#<model>#<voice_id>` |

A create is relayed to the first channel of the model that takes it and the record the upstream
answers is kept under the caller's partition (with the channel, which alone knows the id); a list
and a read answer from that store only, so a caller sees only their own. They cost nothing: the
upstream prices the videos that use them, not the assets (docs/families.md "Alpha").

The upstream makes a voice (and a task-based element) asynchronously: its create answers a
creation task (`task_id`, `task_status`), not the id. Such a record is kept under its task id with
its `task_status`; while it is not finished, a list or a read of it asks the upstream (on the
channel that made it) where it stands and keeps what it says: `<kind>_id` once made, or `failed`
with its message. A read finds a record by its task id or by the `<kind>_id` it was given.
"""

from __future__ import annotations

import time
from typing import Any

from gateway.auth import Principal
from gateway.errors import InvalidRequest, NotFound
from gateway.observability import logger
from gateway.routing.channels import get_catalog
from gateway.routing.failover import record_failure, report_success
from gateway.settings import get_settings
from gateway.store.aws import client, from_item, to_item, to_values
from gateway.store.table import user_pk
from gateway.tasks.adapter import send
from gateway.tasks.families.alpha.adapter import AlphaAdapter
from gateway.upstreams.errors import UpstreamError
from gateway.upstreams.verdict import exhausted_error

_ADAPTER = AlphaAdapter()
#: A creation task's last words (`succeed` or `failed`): no need to ask the upstream again.
FINISHED = frozenset({"succeed", "failed"})
#: At most this many unfinished records are asked about per read (each is one upstream call).
REFRESHED_PER_READ = 5


def _sk(kind: str, model: str, asset_id: str = "") -> str:
    return f"ALPHA#{kind}#{model}#{asset_id}"


def _public(item: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in item.items() if k not in ("pk", "sk", "channel", "owner_id")}


def _model(principal: Principal, model: str | None, param: str = "model_name") -> str:
    if not model or not model.strip():
        raise InvalidRequest(f"{param}: is required", param=param)
    if not model.startswith("alpha-"):
        raise InvalidRequest(f"{param}: {model!r} is not an alpha model", param=param)
    principal.require_model(model)
    return model


def create(principal: Principal, kind: str, data: Any) -> dict[str, Any]:
    """Creates an element or a voice upstream and keeps its record for the caller."""
    from gateway.routing.outbound import sync_client
    from gateway.tasks.families.alpha.schema import CUSTOMS  # pydantic only where a body is parsed
    from gateway.validation import parse_model

    request = parse_model(CUSTOMS[kind], data)
    model = _model(principal, request.model_name, "model")
    channels = get_catalog().candidates(model, ("alpha",), group=principal.group)
    body = request.record()
    failures: list[UpstreamError] = []
    for channel in channels:
        try:
            body["model_name"] = channel.upstream_model(model)
            answer = send(sync_client, _ADAPTER.build_create_custom(channel.base_url, channel.api_key, kind, body),
                          repeatable=False)
            created = _ADAPTER.parse_create_custom(answer, kind)
        except UpstreamError as exc:
            record_failure(channel, exc, failures)
            continue
        report_success(channel)
        break
    else:
        raise exhausted_error(failures)
    record = {**body, **created, "model_name": model, "created_at": int(time.time() * 1000)}
    asset_id = record.get(f"{kind}_id") or record["task_id"]
    _put(principal, kind, model, asset_id, {**record, "channel": channel.name})
    return record


def _put(principal: Principal, kind: str, model: str, asset_id: str, item: dict[str, Any]) -> None:
    client("dynamodb").put_item(TableName=get_settings().accounts_table, Item=to_item({
        **{k: v for k, v in item.items() if k not in ("pk", "sk")},
        "pk": user_pk(principal.user_id), "sk": _sk(kind, model, asset_id)}))


def _refreshed(principal: Principal, kind: str, item: dict[str, Any]) -> dict[str, Any]:
    """A record whose creation task has not finished, as the upstream now says it stands (kept);
    as it was when the upstream cannot say (asked again by the next read)."""
    if item.get("task_status") in FINISHED or not item.get("task_id") or not item.get("channel"):
        return item
    channel = get_catalog().named(str(item["channel"]))
    if channel is None:
        return item
    from gateway.routing.outbound import sync_client

    try:
        found = _ADAPTER.parse_query_custom(send(sync_client, _ADAPTER.build_query_custom(
            channel.base_url, channel.api_key, kind, str(item["task_id"])), repeatable=True), kind)
    except UpstreamError as exc:
        logger.warning("an alpha creation task could not be asked about; the next read asks again",
                       extra={"kind": kind, "task_id": item["task_id"], "error": exc.message})
        return item
    updated = {**item, **found}
    if updated != item:
        _put(principal, kind, str(item["model_name"]), str(item["sk"]).rsplit("#", 1)[-1], updated)
    return updated


def list_own(principal: Principal, kind: str, model: str | None) -> list[dict[str, Any]]:
    """The caller's elements or voices of `model`, oldest first."""
    model = _model(principal, model)
    items: list[dict[str, Any]] = []
    query: dict[str, Any] = {
        "TableName": get_settings().accounts_table, "ConsistentRead": True,
        "KeyConditionExpression": "pk = :pk AND begins_with(sk, :prefix)",
        "ExpressionAttributeValues": to_values({":pk": user_pk(principal.user_id), ":prefix": _sk(kind, model)})}
    while True:
        answer = client("dynamodb").query(**query)
        items += [from_item(item) or {} for item in answer.get("Items", [])]
        if "LastEvaluatedKey" not in answer:
            break
        query["ExclusiveStartKey"] = answer["LastEvaluatedKey"]
    pending = [item for item in items if item.get("task_status") not in FINISHED][:REFRESHED_PER_READ]
    fresh = {id(item): _refreshed(principal, kind, item) for item in pending}
    return sorted((_public(fresh.get(id(item), item)) for item in items), key=lambda item: item.get("created_at", 0))


def get_own(principal: Principal, kind: str, asset_id: str, model: str | None) -> dict[str, Any]:
    """One of the caller's elements or voices; anybody else's is a 404, as a missing one is."""
    model = _model(principal, model)
    item = from_item(client("dynamodb").get_item(
        TableName=get_settings().accounts_table, ConsistentRead=True,
        Key=to_item({"pk": user_pk(principal.user_id), "sk": _sk(kind, model, asset_id)})).get("Item"))
    if item is not None:
        return _public(_refreshed(principal, kind, item))
    # A record made by a creation task is kept under its task id; its `<kind>_id` came later.
    found = next((one for one in list_own(principal, kind, model) if one.get(f"{kind}_id") == asset_id), None)
    if found is None:
        raise NotFound(f"{kind} '{asset_id}' of {model} does not exist", param=f"{kind}_id", code=f"{kind}_not_found")
    return found
