"""The operator's channels as data: `/api/channel/` in new-api's routes and envelope.

`GET /api/channel/?p=&page_size=` every channel (the document's first, then the added ones by
id), `GET /api/channel/{id}`, `POST /api/channel/` (a new channel), `PUT /api/channel/` (a
change: `id` and the fields to change; `status` 1 enables, 2 disables), `DELETE
/api/channel/{id}`, `GET /api/channel/test/{id}` (one probe: latency and what the upstream
said). The body uses the channels document's field names (`routing/channel.spec_model`, the
same rules) plus `key`, the upstream key: written once, kept in the key store
(`routing/channel_keys`), never answered again; only its last four characters are shown.

new-api's shapes (QuantumNous/new-api `controller/channel.go`): the list's `p` from 1 and
`page_size`, answered as `{items, total, page, page_size}`, never a key (`.Omit("key")`); a
change answers the channel with `key` blanked (`UpdateChannel`: `channel.Key = ""`); `status` 1
enabled, 2 disabled by hand; the test (`controller/channel-test.go`, `TestChannel`) answers HTTP
200 with `success`, `message` and `time` in seconds, `success: false` when the upstream failed.

The channels document stays the way to keep channels as code, and it wins: a name the document
uses cannot be added, a document channel is read-only here (its `id` is null; it is named by its
name, and only enabled, disabled and tested), and an added channel whose name the document takes
later is listed as `shadowed` and not in force. Every instance sees a change within
`GATEWAY_CHANNELS_REFRESH_SECONDS` (the instance that made it at once).
"""

from __future__ import annotations

import functools
import re
import time
from typing import Any

from gateway.errors import Conflict, InvalidRequest, NotFound, shown
from gateway.routing import channel_keys, health
from gateway.routing.catalog import Catalog
from gateway.routing.channel import Channel, spec_model
from gateway.routing.channel_store import ChannelRecord, ChannelStore, StaleChannel
from gateway.routing.channels import get_catalog, reread_added
from gateway.validation import parse_json, parse_model

PAGE_SIZE_DEFAULT, PAGE_SIZE_MAX = 20, 100
#: How many channels may be added through the API (each instance reads them all every few seconds).
MAX_ADDED = 500
NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
_TEXT = re.compile(r"[^\x00-\x1f\x7f]{1,200}")
#: Fields of a change that are not the document's.
_CONTROL = ("id", "key", "status")
#: The bound of a channel's `priority` and `weight` (a weight is besides never negative).
MAX_ORDER = 10**9
_KEY_FIELDS = ("api_key", "api_key_env")


@functools.cache
def _models() -> tuple[Any, Any]:
    from pydantic import Field, field_validator

    spec = spec_model()

    class AddedChannel(spec):  # type: ignore[misc, valid-type]
        """A channel entry of the document, with the rules of one added through the API."""

        @field_validator("name")
        @classmethod
        def _name(cls, value: str) -> str:
            if not NAME.fullmatch(value) or value.isdigit():
                raise ValueError("1 to 64 letters, digits, '.', '_' or '-', starting with a letter or digit, "
                                 "not digits only")
            return value

        @field_validator("models")
        @classmethod
        def _names(cls, values: list[str]) -> list[str]:
            if len(values) > 1000:
                raise ValueError("at most 1000 models")
            for value in values:
                if not _TEXT.fullmatch(value):
                    raise ValueError(f"'{shown(value, 40)}': a model name is 1 to 200 printable characters")
            return values

        @field_validator("model_map")
        @classmethod
        def _map(cls, values: dict[str, str]) -> dict[str, str]:
            for name, upstream in values.items():
                if not _TEXT.fullmatch(name) or not _TEXT.fullmatch(upstream):
                    raise ValueError(f"'{shown(name, 40)}': model names are 1 to 200 printable characters")
            return values

        @field_validator("priority", "weight")
        @classmethod
        def _bounded(cls, value: int) -> int:
            # DynamoDB keeps numbers up to 38 digits and about 1e125; a channel's order needs far less.
            if not -MAX_ORDER <= value <= MAX_ORDER:
                raise ValueError(f"must be from {-MAX_ORDER} to {MAX_ORDER}")
            return value

        @field_validator("base_url")
        @classmethod
        def _origin(cls, value: str | None) -> str | None:
            from urllib.parse import urlsplit

            if value is None:  # a Vertex channel's: its region's host
                return None
            parts = urlsplit(value)
            if not parts.hostname or parts.username is not None or parts.query or parts.fragment:
                raise ValueError("an http(s) URL with a host, no credentials, query or fragment")
            return value

    class NewChannel(AddedChannel):
        key: str = Field(min_length=1, max_length=4096)

        @field_validator("key")
        @classmethod
        def _key(cls, value: str) -> str:
            if value != value.strip() or any(ord(c) < 0x21 or ord(c) == 0x7f for c in value):
                raise ValueError("an upstream key has no spaces or control characters")
            return value

    return AddedChannel, NewChannel


def request_schemas() -> tuple[Any, dict[str, Any]]:
    """The documented bodies: POST's model, and PUT's schema (`id` and any field of POST's, or `status`)."""
    _, new_model = _models()
    schema = new_model.model_json_schema(mode="validation")
    properties = {k: v for k, v in schema.get("properties", {}).items() if k not in _KEY_FIELDS}
    change = {"type": "object", "required": ["id"], "additionalProperties": False, "properties": {
        "id": {"type": "integer", "minimum": 1, "description": "the channel's id (a document channel, which has "
                                                               "none: give its name instead)"},
        **properties,
        "status": {"type": "integer", "enum": [1, 2], "description": "1 enables, 2 disables"}}}
    return new_model, change


def _ok(data: Any = None, message: str = "") -> dict[str, Any]:
    return {"success": True, "message": message, "data": data}


def _no_document_keys(data: dict[str, Any]) -> None:
    for name in _KEY_FIELDS:
        if name in data:
            raise InvalidRequest(f"{name}: is the channels document's; give the upstream key as 'key'", param=name)


# ---- reading -------------------------------------------------------------------------------------

def _view(catalog: Catalog, channel: Channel | None, record: ChannelRecord | None,
          known: dict[str, health.ChannelHealth]) -> dict[str, Any]:
    name = channel.name if channel else record.name  # type: ignore[union-attr]
    state = known.get(name) or health.ChannelHealth(name)
    added = record is not None
    spec = dict(record.spec) if record else {
        "protocol": channel.protocol, "base_url": channel.base_url, "models": sorted(channel.models),  # type: ignore[union-attr]
        "model_map": dict(channel.model_map), "priority": channel.priority, "weight": channel.weight,  # type: ignore[union-attr]
        "poll_hosts": sorted(channel.poll_hosts)}  # type: ignore[union-attr]
    return {
        "id": record.id if record else None, "name": name, **spec,
        "source": "api" if added else "document", "read_only": not added,
        "shadowed": added and name in catalog.shadowed,
        "key": "", "key_last4": record.key_last4 if record else channel_keys.last_four(channel.api_key),  # type: ignore[union-attr]
        "status": 2 if state.disabled else 1, **state.view(),
        "created_at": record.created_at if record else None, "updated_at": record.updated_at if record else None,
    }


def _everything(store: ChannelStore) -> tuple[Catalog, list[ChannelRecord], dict[str, health.ChannelHealth]]:
    reread_added()
    catalog = get_catalog()
    records = store.all(consistent=True)
    return catalog, records, {h.name: h for h in health.book().store.all()}


def _in_force(catalog: Catalog, record: ChannelRecord) -> Channel | None:
    """The added channel `record` stores, as the catalog has it (None: not in force)."""
    return catalog.named(record.name) if record.name in catalog.added else None


def _rows(store: ChannelStore) -> list[dict[str, Any]]:
    catalog, records, known = _everything(store)
    rows = [_view(catalog, c, None, known) for c in catalog.channels if c.name not in catalog.added]
    rows += [_view(catalog, _in_force(catalog, r), r, known) for r in records]
    return rows


def _number(query: dict[str, str] | None, name: str, default: int, low: int, high: int) -> int:
    text = ((query or {}).get(name) or "").strip()
    if not text:
        return default
    if not (text.isascii() and text.isdigit() and len(text) <= 9 and low <= int(text) <= high):
        raise InvalidRequest(f"{name}: must be a whole number from {low} to {high}, got '{shown(text, 40)}'",
                             param=name)
    return int(text)


def list_channels(query: dict[str, str] | None, store: ChannelStore | None = None) -> dict[str, Any]:
    """GET /api/channel/?p=1&page_size=20: new-api's page (`items`, `total`, `page`, `page_size`)."""
    page = _number(query, "p", 1, 1, 10**6)
    size = _number(query, "page_size", PAGE_SIZE_DEFAULT, 1, PAGE_SIZE_MAX)
    rows = _rows(store or ChannelStore())
    return _ok({"items": rows[(page - 1) * size: page * size], "total": len(rows), "page": page,
                "page_size": size})


def _find(ref: str, store: ChannelStore) -> tuple[Catalog, Channel | None, ChannelRecord | None,
                                                  dict[str, health.ChannelHealth]]:
    """A channel by its id (digits: an added channel) or its name (a document channel has no id)."""
    if not ref or len(ref) > 64:
        raise InvalidRequest("id: a channel id, or a document channel's name", param="id")
    catalog, records, known = _everything(store)
    if ref.isascii() and ref.isdigit():
        record = next((r for r in records if r.id == int(ref)), None)
        if record is None:
            raise NotFound(f"id: no channel {ref}", param="id")
        return catalog, _in_force(catalog, record), record, known
    record = next((r for r in records if r.name == ref), None)
    if record is not None and ref not in catalog.shadowed:
        return catalog, _in_force(catalog, record), record, known
    channel = catalog.named(ref)
    if channel is None:
        raise NotFound(f"id: no channel named '{shown(ref, 64)}'", param="id")
    return catalog, channel, None, known


def get_channel(ref: str, store: ChannelStore | None = None) -> dict[str, Any]:
    catalog, channel, record, known = _find(ref, store or ChannelStore())
    return _ok(_view(catalog, channel, record, known))


# ---- changing ------------------------------------------------------------------------------------

def create_channel(body: str | bytes | None, store: ChannelStore | None = None) -> dict[str, Any]:
    """POST /api/channel/: a new channel, its key stored once (Secrets Manager), in force at once here
    and on every instance within the refresh."""
    store = store or ChannelStore()
    data = parse_json(body)
    if not isinstance(data, dict):
        raise InvalidRequest("request body: must be a JSON object of the channel's fields", param=None)
    _no_document_keys(data)
    for name in ("id", "status"):
        if name in data:
            raise InvalidRequest(f"{name}: is given by the gateway (change it with PUT)", param=name)
    _, new_model = _models()
    request = parse_model(new_model, data)
    catalog, records, _ = _everything(store)
    if catalog.named(request.name) is not None and request.name not in catalog.added:
        raise Conflict(f"name: '{request.name}' is a channel of the channels document", param="name")
    if any(r.name == request.name for r in records):
        raise Conflict(f"name: '{request.name}' is taken", param="name")
    if len(records) >= MAX_ADDED:
        raise Conflict(f"name: at most {MAX_ADDED} channels may be added through the API", param="name")
    spec = request.model_dump(exclude={"key", "name", *_KEY_FIELDS})
    channel_id = store.next_id()
    keys = channel_keys.store()
    ref, key_version = keys.put(channel_id, request.key, new=True)
    now = int(time.time())
    record = ChannelRecord(id=channel_id, name=request.name, spec=spec, key_ref=ref,
                           key_last4=channel_keys.last_four(request.key), key_version=key_version,
                           created_at=now, updated_at=now)
    try:
        store.create(record)
    except StaleChannel:
        keys.delete(ref)
        raise Conflict(f"name: '{request.name}' is taken", param="name") from None
    reread_added()
    catalog, _, known = _everything(store)
    return _ok(_view(catalog, _in_force(catalog, record), record, known))


def update_channel(body: str | bytes | None, store: ChannelStore | None = None) -> dict[str, Any]:
    """PUT /api/channel/: `id` (a document channel: `name`) and what changes. The fields not given
    keep their values; a new `key` replaces the key; `status` 1 or 2 enables or disables (a
    document channel: only that)."""
    store = store or ChannelStore()
    data = parse_json(body)
    if not isinstance(data, dict):
        raise InvalidRequest("request body: must be a JSON object with the channel's id", param=None)
    _no_document_keys(data)
    status = data.get("status")
    if "status" in data and (type(status) is not int or status not in (1, 2)):
        raise InvalidRequest("status: must be 1 (enabled) or 2 (disabled)", param="status")
    ident = data.get("id")
    if ident is None:
        if not isinstance(data.get("name"), str):
            raise InvalidRequest("id: is required (a document channel, which has none: its name)", param="id")
        ref = data["name"]
    elif type(ident) is int and ident > 0:
        ref = str(ident)
    else:
        raise InvalidRequest("id: must be a channel id (a whole number)", param="id")
    catalog, channel, record, known = _find(ref, store)
    changes = {k: v for k, v in data.items() if k not in _CONTROL}
    if record is None:  # a document channel
        if set(changes) - {"name"} or "key" in data:
            raise InvalidRequest(f"name: channel '{ref}' is from the channels document: change it there "
                                 "(here it is only enabled, disabled and tested)", param="name")
    else:
        if "name" in changes and changes["name"] != record.name:
            raise InvalidRequest("name: a channel's name does not change (its health and the request log "
                                 "name it): add another channel instead", param="name")
        record = _changed(record, changes, data, store)
    if "status" in data:
        name = record.name if record else ref
        health.book().command(name, enable=status == 1)
    reread_added()
    catalog, _, known = _everything(store)
    return _ok(_view(catalog, _in_force(catalog, record) if record else catalog.named(ref), record, known))


def _changed(record: ChannelRecord, changes: dict[str, Any], data: dict[str, Any],
             store: ChannelStore) -> ChannelRecord:
    added_model, new_model = _models()
    if not changes and "key" not in data:
        return record
    merged = {**record.spec, **changes, "name": record.name}
    if "key" not in data and _host(merged.get("base_url")) != _host(record.spec.get("base_url")):
        # The stored key goes only to the host it was given for: a new host needs its key with it.
        raise InvalidRequest("base_url: a new host needs the channel's key again ('key' with it): the stored key "
                             "is never sent to another host", param="base_url")
    if "key" in data:
        parse_model(new_model, {**merged, "key": data["key"]})  # the key's rules, with the rest
    spec = parse_model(added_model, merged).model_dump(exclude={"name", *_KEY_FIELDS})
    keys = channel_keys.store()
    update: dict[str, Any] = {"spec": spec}
    if "key" in data:
        _, key_version = keys.put(record.id, data["key"], new=False)  # read only once the record names it
        update.update(key_version=key_version, key_last4=channel_keys.last_four(data["key"]))
    changed = record.changed(**update)
    try:
        store.replace(changed)
    except StaleChannel:
        raise Conflict(f"id: channel {record.id} changed meanwhile; read it again", param="id") from None
    return changed


def _host(url: Any) -> str:
    from urllib.parse import urlsplit

    if not isinstance(url, str):
        return ""
    try:
        parts = urlsplit(url)
        return f"{parts.scheme}://{(parts.hostname or '').lower()}:{parts.port or ''}"
    except ValueError:
        return url


def delete_channel(ref: str, store: ChannelStore | None = None) -> dict[str, Any]:
    """DELETE /api/channel/{id}: the channel, its health and its key (its secret, recoverable for
    `channel_keys.RECOVERY_DAYS` days). A document channel is deleted from the document."""
    store = store or ChannelStore()
    if not (ref.isascii() and ref.isdigit()):
        _, channel, record, _ = _find(ref, store)
        if record is None:
            raise InvalidRequest(f"id: channel '{shown(ref, 64)}' is from the channels document: "
                                 "delete it there", param="id")
        ref = str(record.id)
    _, _, record, _ = _find(ref, store)
    assert record is not None
    try:
        store.delete(record)
    except StaleChannel:
        raise Conflict(f"id: channel {record.id} changed meanwhile; read it again", param="id") from None
    channel_keys.store().delete(record.key_ref)
    reread_added()
    health.reset()
    return _ok({"id": record.id, "name": record.name})


def test_channel(ref: str, store: ChannelStore | None = None) -> dict[str, Any]:
    """GET /api/channel/test/{id}: one probe of the channel as the sweeper sends it (a text channel's
    model list, a task channel's poll of a task that does not exist: free, billed to nobody), its
    latency and what the upstream said. new-api's answer: `success`, `message`, `time` (seconds).
    A disabled channel is tested too (to see whether to enable it); the outcome is recorded as a
    probe (a cooling channel that answers is healthy again), and a healthy channel's failure counts
    against it as a request's failure does (`health.after_failure`: it may cool), so its health
    never says "healthy" over a failed test without the failure counted."""
    from gateway.tasks.probes import check

    _, channel, record, _ = _find(ref, store or ChannelStore())
    if channel is None:
        raise Conflict(f"id: channel '{shown(ref, 64)}' is not in force (its key cannot be read, or the "
                       "channels document has a channel of its name)", param="id")
    if record is None and not channel.api_key:
        # The account function reads the document without its keys (GATEWAY_CHANNEL_KEYS_NEEDED):
        # a test without the key would only say the upstream refused nobody's key.
        raise Conflict(f"id: channel '{shown(ref, 64)}' keeps its key in the channel keys secret, which this "
                       "function does not read: the sweeper probes it when it fails (make admin ARGS=channels)",
                       param="id")
    failure, said, seconds = check(channel)
    book = health.book()
    if failure is not None and book.store.get(channel.name).state == health.HEALTHY:
        book.failed(channel.name, failure)  # a failed test is a failure like a request's: it counts, it may cool
    latency_ms = max(round(seconds * 1000), 1)  # kept for the channel list's response time
    book.probed(channel.name, failure, latency_ms)
    data = {"id": record.id if record else None, "name": channel.name, "ok": failure is None,
            "latency_ms": latency_ms, "answer": said}
    message = "" if failure is None else f"the channel failed its test: {said}"
    return {"success": failure is None, "message": message, "time": round(seconds, 3), "data": data}
