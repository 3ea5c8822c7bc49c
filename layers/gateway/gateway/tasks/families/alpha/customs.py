"""Alpha custom elements and voices: created upstream, kept per user in the accounts table.

| item | pk | sk |
|---|---|---|
| custom element | `USER#<id>` | `ALPHA#element#<model>#<element_id>` |
| custom voice | `USER#<id>` | `ALPHA#voice#<model>#<voice_id>` |

A create is relayed to the first channel of the model that takes it and the record the upstream
answers is kept under the caller's partition (with the channel, which alone knows the id); a list
and a read answer from that store only, so a caller sees only their own. They cost nothing: the
upstream prices the videos that use them, not the assets (docs/families.md "Alpha").
"""

from __future__ import annotations

import time
from typing import Any

from gateway.auth import Principal
from gateway.errors import InvalidRequest, NotFound
from gateway.routing.channels import get_catalog, report_success
from gateway.settings import get_settings
from gateway.store.accounts import user_pk
from gateway.store.aws import client, from_item, to_item, to_values
from gateway.tasks.families.alpha.adapter import AlphaAdapter
from gateway.upstreams.errors import UpstreamError
from gateway.upstreams.verdict import exhausted_error, record_failure

_ADAPTER = AlphaAdapter()


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
            answer = sync_client.send(
                _ADAPTER.build_create_custom(channel.base_url, channel.api_key, kind, body))
            created = _ADAPTER.parse_create_custom(answer, kind)
        except UpstreamError as exc:
            record_failure(channel, exc, failures)
            continue
        report_success(channel)
        break
    else:
        raise exhausted_error(failures)
    record = {**body, **created, "model_name": model, "created_at": int(time.time() * 1000)}
    client("dynamodb").put_item(TableName=get_settings().accounts_table, Item=to_item({
        **record, "pk": user_pk(principal.user_id), "sk": _sk(kind, model, record[f"{kind}_id"]),
        "channel": channel.name}))
    return record


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
        items += [_public(from_item(item) or {}) for item in answer.get("Items", [])]
        if "LastEvaluatedKey" not in answer:
            break
        query["ExclusiveStartKey"] = answer["LastEvaluatedKey"]
    return sorted(items, key=lambda item: item.get("created_at", 0))


def get_own(principal: Principal, kind: str, asset_id: str, model: str | None) -> dict[str, Any]:
    """One of the caller's elements or voices; anybody else's is a 404, as a missing one is."""
    model = _model(principal, model)
    item = from_item(client("dynamodb").get_item(
        TableName=get_settings().accounts_table, ConsistentRead=True,
        Key=to_item({"pk": user_pk(principal.user_id), "sk": _sk(kind, model, asset_id)})).get("Item"))
    if item is None:
        raise NotFound(f"{kind} '{asset_id}' of {model} does not exist", param=f"{kind}_id", code=f"{kind}_not_found")
    return _public(item)
