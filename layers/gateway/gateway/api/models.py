"""The model list: every model a key may use, with its family and kind, in each SDK's shape.

What a model is comes from the catalog alone, so a new family's models appear as soon as its
prices and channels exist:

- its **kind** from the shape of its price: per token (`text`, or `embedding` when output is
  free), per image (`image`), per second of output (`video`), per call (`task`);
- its **family** (`owned_by`) from the spec's family word its id starts with (`iota-image-1`
  is `iota`, `gamma2.6-i2v` is `gamma`), else the task protocol of a channel naming it, else
  `gateway` (the text models, which any text channel serves);
- it is **listed** when the key may use it, it has a price, and a channel of a protocol that
  can carry its kind serves it (explicitly or with `"*"`).

Three list shapes: the chat dialect's (`GET /v1/models`), the messages dialect's (the same path
with an `anthropic-version` header) and the content dialect's (`GET /v1beta/models`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from gateway import auth
from gateway.auth import Principal
from gateway.errors import Dialect, InvalidRequest, NotFound
from gateway.prices import Price
from gateway.routing.catalog import Catalog
from gateway.routing.channel import PROTOCOLS
from gateway.routing.channels import get_catalog

TEXT_PROTOCOLS = ("chat", "messages", "content", "azure", "bedrock")
EMBEDDING_PROTOCOLS = ("chat", "content", "azure", "bedrock")
IMAGE_PROTOCOLS = ("chat",)  # the chat dialect carries the images endpoints (gateway.api.images)
RERANK_PROTOCOLS = ("cohere", "jina")
# Each kind's channel protocols; a kind not here is a task family's (its own protocol).
_KIND_PROTOCOLS = {"text": TEXT_PROTOCOLS, "embedding": EMBEDDING_PROTOCOLS, "image": IMAGE_PROTOCOLS,
                   "rerank": RERANK_PROTOCOLS, "speech": ("chat",), "transcription": ("chat",),
                   "moderation": ("chat",)}
# The spec's neutral family words (interface.md, "vocabulary"); a model id starts with its family's.
FAMILIES = ("imgtask", "alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta", "iota")
_FAMILY = re.compile(rf"^({'|'.join(FAMILIES)})(?![a-z])")
TEXT_FAMILY = "gateway"
# The list shapes want a creation time; the catalog has none, so every model shows this one.
CREATED = 1700000000
MAX_PAGE = 1000


@dataclass(frozen=True)
class ModelInfo:
    id: str
    family: str
    kind: str  # text | embedding | image | video | task | rerank | speech | transcription | moderation


def kind_of(price: Price) -> str:
    if price.per_search_unit is not None or price.rerank_per_million is not None:
        return "rerank"
    if price.per_moderation is not None:
        return "moderation"
    if price.per_million_characters is not None or price.audio_output_per_million is not None:
        return "speech"
    if price.per_audio_second is not None or price.audio_input_per_million is not None:
        return "transcription"
    if price.per_image is not None:
        return "image"
    if price.per_second is not None:
        return "video"
    if price.per_call is not None:
        return "task"
    if not price.output_per_million and price.input_per_million:
        return "embedding"
    return "text"


# A task family's models are media whatever their price is counted in (zeta's Seedance is priced
# by its video tokens, docs/tasks.md): images for beta and imgtask, videos for the others.
_MEDIA_KIND = {"beta": "image", "imgtask": "image"}


def media_kind(family: str, price: Price) -> str:
    """The model's kind: `kind_of` its price, except that a task family's model priced by tokens is
    its family's media (not "text" with a $0 input)."""
    kind = kind_of(price)
    if kind in ("text", "embedding") and family in PROTOCOLS and family not in TEXT_PROTOCOLS:
        return _MEDIA_KIND.get(family, "video")
    return kind


def family_of(model: str, catalog: Catalog) -> str:
    found = _FAMILY.match(model.lower())
    if found:
        return found.group(1)
    for channel in catalog.channels:
        if channel.protocol not in TEXT_PROTOCOLS + RERANK_PROTOCOLS and model in channel.models:
            return channel.protocol
    return TEXT_FAMILY


def _protocols(info: ModelInfo) -> tuple[str, ...]:
    """The channel protocols that can serve this model."""
    if info.family in PROTOCOLS and info.family not in TEXT_PROTOCOLS:
        return (info.family,)
    return _KIND_PROTOCOLS.get(info.kind, tuple(p for p in PROTOCOLS if p not in TEXT_PROTOCOLS + RERANK_PROTOCOLS))


def describe(model: str, catalog: Catalog, group: str | None = None) -> ModelInfo | None:
    """The model's family and kind, or None when it has no price or no channel (of the caller's
    `group`) can serve it."""
    if model not in catalog.prices:
        return None
    family = family_of(model, catalog)
    info = ModelInfo(model, family, media_kind(family, catalog.prices.get(model)))
    allowed = _protocols(info)
    if not any(c.protocol in allowed and c.serves(model) and c.weight > 0 and c.serves_group(group)
               for c in catalog.channels):
        return None
    return info


def available(principal: Principal, catalog: Catalog) -> list[ModelInfo]:
    """Every model this key may use (through its group's channels), sorted by id."""
    found = (describe(name, catalog, principal.group) for name in catalog.models(group=principal.group)
             if principal.may_use(name))
    return [info for info in found if info is not None]


def find(principal: Principal, catalog: Catalog, model: str) -> ModelInfo:
    """One model this key may use; anything else (unknown, unpriced, forbidden) is a 404."""
    info = describe(model, catalog, principal.group) if principal.may_use(model) else None
    if info is None:
        raise NotFound(f"model '{model}' does not exist or this key may not use it", param="model",
                       code="model_not_found")
    return info


def dialect_of(path: str, headers: Mapping[str, str]) -> Dialect:
    """Which SDK asks: the content dialect under /v1beta, the messages one when it names its
    version (the anthropic SDK always does), else the chat one. Errors come in its envelope too."""
    if path.startswith("/v1beta/"):
        return Dialect.CONTENT
    if any(str(k).lower() == "anthropic-version" for k in headers):
        return Dialect.MESSAGES
    return Dialect.CHAT


def answer(path: str, headers: Mapping[str, str], query: Mapping[str, str], model: str | None = None) -> dict[str, Any]:
    """GET /v1/models, /v1/models/{model}, /v1beta/models and /v1beta/models/{model}."""
    principal = auth.authenticate(headers, query)
    catalog = get_catalog()
    dialect = dialect_of(path, headers)
    if model is not None:
        info = find(principal, catalog, content_model_id(model) if dialect is Dialect.CONTENT else model)
        return {Dialect.CHAT: chat_model, Dialect.MESSAGES: messages_model,
                Dialect.CONTENT: content_model}[dialect](info)
    infos = available(principal, catalog)
    if dialect is Dialect.CONTENT:
        return content_list(infos, query)
    if dialect is Dialect.MESSAGES:
        return messages_list(infos, query)
    return chat_list(infos)


# ---- the chat dialect (openai) ----

def chat_model(info: ModelInfo) -> dict[str, Any]:
    return {"id": info.id, "object": "model", "created": CREATED, "owned_by": info.family, "kind": info.kind}


def chat_list(infos: list[ModelInfo]) -> dict[str, Any]:
    return {"object": "list", "data": [chat_model(i) for i in infos]}


# ---- the messages dialect (anthropic): cursor pages by id ----

def messages_model(info: ModelInfo) -> dict[str, Any]:
    created = datetime.fromtimestamp(CREATED, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    return {"id": info.id, "type": "model", "display_name": info.id, "created_at": created,
            "owned_by": info.family, "kind": info.kind}


def messages_list(infos: list[ModelInfo], query: Mapping[str, str]) -> dict[str, Any]:
    limit = _limit(query.get("limit"), "limit", default=20)
    after, before = query.get("after_id"), query.get("before_id")
    if after and before:
        raise InvalidRequest("after_id, before_id: give one of them, not both", param="after_id")
    ids = [i.id for i in infos]
    if after:
        start = _position(ids, after, "after_id") + 1
        page = infos[start:start + limit]
        has_more = start + limit < len(infos)
    elif before:
        end = _position(ids, before, "before_id")
        page = infos[max(end - limit, 0):end]
        has_more = end - limit > 0
    else:
        page, has_more = infos[:limit], limit < len(infos)
    return {"data": [messages_model(i) for i in page], "has_more": has_more,
            "first_id": page[0].id if page else None, "last_id": page[-1].id if page else None}


# ---- the content dialect (google-genai): pages by an opaque token (the last id given) ----

def content_model(info: ModelInfo) -> dict[str, Any]:
    methods = {"text": ["generateContent", "streamGenerateContent", "countTokens"],
               "embedding": ["embedContent", "batchEmbedContents"]}.get(info.kind, [])
    return {"name": f"models/{info.id}", "baseModelId": info.id, "version": "1", "displayName": info.id,
            "description": f"{info.kind} model of the {info.family} family",
            "supportedGenerationMethods": methods}


def content_list(infos: list[ModelInfo], query: Mapping[str, str]) -> dict[str, Any]:
    size = _limit(query.get("pageSize"), "pageSize", default=50)
    token = query.get("pageToken")
    start = _position([i.id for i in infos], token, "pageToken") + 1 if token else 0
    page = infos[start:start + size]
    body: dict[str, Any] = {"models": [content_model(i) for i in page]}
    if start + size < len(infos):
        body["nextPageToken"] = page[-1].id
    return body


def content_model_id(path_model: str) -> str:
    """`{model}` of GET /v1beta/models/{model}: the SDK may send `models/<id>` or just `<id>`."""
    return path_model.removeprefix("models/")


def _limit(value: str | None, name: str, *, default: int) -> int:
    if value is None or value == "":
        return default
    if not value.isdigit() or not 1 <= int(value) <= MAX_PAGE:
        raise InvalidRequest(f"{name}: must be an integer from 1 to {MAX_PAGE}", param=name)
    return int(value)


def _position(ids: list[str], wanted: str, name: str) -> int:
    try:
        return ids.index(wanted)
    except ValueError:
        raise InvalidRequest(f"{name}: '{wanted}' is not a model in this list", param=name) from None
