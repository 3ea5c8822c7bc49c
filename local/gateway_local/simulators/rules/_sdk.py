"""Simulated requests checked against the official SDKs' own request types, which their makers
generate from each API's published schema: what the SDK's types cannot hold, the upstream refuses.

- messages: `anthropic.types.MessageCreateParams` / `MessageCountTokensParams` (TypedDicts,
  anthropic-sdk-python, generated from Anthropic's OpenAPI document);
- chat and responses: `openai.types.chat.CompletionCreateParams`,
  `openai.types.responses.ResponseCreateParams` (openai-python, generated from OpenAI's OpenAPI
  document);
- content: `google.genai.types` (`Content`, `Tool`, `ToolConfig`, `GenerationConfig`,
  `SafetySetting`: python-genai's models of the Gemini API's messages, which refuse unknown fields
  and decode `thoughtSignature` as base64 bytes as the API does).

The TypedDicts are checked with pydantic in its lax mode (the upstreams are lenient the same way,
e.g. a number given as 1.0) and leave unknown keys to the hand-written field rules beside this
module; nested lists (`Iterable[...]` in the SDKs' types) are walked so that every item is checked.
A refusal is worded as those upstreams word a schema error: `<dotted path>: <what is wrong>`.

Not checked this way: a field whose type is a union of two `Iterable`s (the embeddings endpoint's
`input`: token lists or lists of them), which pydantic cannot tell apart lazily; the hand-written
rules cover it.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Iterator
from typing import Any, cast

import pydantic

# pydantic checks an `Iterable[...]` field lazily, item by item as it is read; its iterator type
# is not exported.
ValidatorIterator: type = type(pydantic.TypeAdapter(Iterable[int]).validate_python([]))


# pydantic names a union's branch in an error's location (`TextBlockParam`, `str`, `list[...]`);
# the upstreams' own paths hold only field names and indexes.
_BRANCH = re.compile(r"^[A-Z][A-Za-z0-9_]*$|^(str|int|float|bool|none|list|dict|bytes)(\[.*\])?$|^function-|\[")


def _dotted(loc: tuple[Any, ...]) -> str:
    return ".".join(str(part) for part in loc if isinstance(part, int) or not _BRANCH.search(str(part)))


def _first(exc: pydantic.ValidationError) -> dict[str, Any]:
    """The error that says most. Of a union, a branch whose `type` (or `role`) is another word is
    not the one meant; if no branch's word matched, the word itself is wrong: one error listing
    every word the branches take."""
    errors = list(exc.errors())
    words = [e for e in errors if e["type"] == "literal_error" and e["loc"] and e["loc"][-1] in ("type", "role")]
    meant = [e for e in errors if not any(tuple(e["loc"][:len(w["loc"]) - 1]) == tuple(w["loc"][:-1])
                                          for w in words)]
    if meant:
        return dict(max(meant, key=lambda e: len(e["loc"])))
    if words:
        where = _dotted(words[0]["loc"])
        expected = [str((w.get("ctx") or {}).get("expected", "")) for w in words if _dotted(w["loc"]) == where]
        return {**words[0], "msg": f"Input should be {' or '.join(dict.fromkeys(expected))}"}
    return dict(errors[0])


def _drained(value: Any, path: tuple[Any, ...]) -> Any:
    """The value with every lazy `Iterable` validator run, so a bad item deep inside is found."""
    if isinstance(value, ValidatorIterator):
        items: list[Any] = []
        iterator: Iterator[Any] = iter(cast(Iterable[Any], value))
        index = 0
        while True:
            try:
                item = next(iterator)
            except StopIteration:
                break
            except pydantic.ValidationError as exc:
                error = _first(exc)
                raise _Refused(_dotted((*path, index, *error["loc"][1:])), error["msg"]) from None
            items.append(_drained(item, (*path, index)))
            index += 1
        return items
    if isinstance(value, dict):
        return {k: _drained(v, (*path, k)) for k, v in value.items()}
    if isinstance(value, list):
        return [_drained(v, (*path, i)) for i, v in enumerate(value)]
    return value


class _Refused(Exception):
    def __init__(self, where: str, what: str):
        super().__init__(where, what)
        self.where, self.what = where, what


def _typed_dict_refusal(adapter: pydantic.TypeAdapter[Any], body: dict[str, Any]) -> tuple[str, str] | None:
    try:
        _drained(adapter.validate_python(body), ())
    except pydantic.ValidationError as exc:
        error = _first(exc)
        where = _dotted(error["loc"])
        return f"{where}: {error['msg']}", where
    except _Refused as refused:
        return f"{refused.where}: {refused.what}", refused.where
    return None


# ---- messages ----

_warming = False


def warm() -> None:
    """Build every checker now (a few seconds of pydantic schema building), in a thread of its own,
    so that the first simulated request does not wait for it."""
    import threading

    global _warming
    if _warming:
        return
    _warming = True

    def build() -> None:
        for kind in ("create", "stream", "count"):
            _anthropic(kind)
        for kind in ("chat", "chat-stream", "responses", "responses-stream"):
            _openai(kind)
        _genai_fields()

    threading.Thread(target=build, name="sdk-rules-warm", daemon=True).start()


@functools.cache
def _anthropic(kind: str) -> pydantic.TypeAdapter[Any]:
    from anthropic.types import message_count_tokens_params, message_create_params

    types = {"create": message_create_params.MessageCreateParamsNonStreaming,
             "stream": message_create_params.MessageCreateParamsStreaming,
             "count": message_count_tokens_params.MessageCountTokensParams}
    return pydantic.TypeAdapter(types[kind])


def anthropic_refusal(body: dict[str, Any], *, counting: bool = False) -> tuple[str, str] | None:
    kind = "count" if counting else "stream" if body.get("stream") else "create"
    checked = {k: v for k, v in body.items() if not (k == "stream" and kind == "create")}
    return _typed_dict_refusal(_anthropic(kind), checked)


# ---- chat and responses ----

@functools.cache
def _openai(kind: str) -> pydantic.TypeAdapter[Any]:
    from openai.types.chat import completion_create_params
    from openai.types.responses import response_create_params

    types = {"chat": completion_create_params.CompletionCreateParamsNonStreaming,
             "chat-stream": completion_create_params.CompletionCreateParamsStreaming,
             "responses": response_create_params.ResponseCreateParamsNonStreaming,
             "responses-stream": response_create_params.ResponseCreateParamsStreaming}
    return pydantic.TypeAdapter(types[kind])


def openai_refusal(endpoint: str, body: dict[str, Any]) -> tuple[str, str] | None:
    kind = {"/v1/chat/completions": "chat", "/v1/responses": "responses"}.get(endpoint)
    if kind is None:
        return None
    streaming = bool(body.get("stream"))
    checked = {k: v for k, v in body.items() if not (k == "stream" and not streaming)}
    return _typed_dict_refusal(_openai(kind + ("-stream" if streaming else "")), checked)


# ---- content ----

@functools.cache
def _genai_fields() -> dict[str, tuple[type[pydantic.BaseModel], bool]]:
    from google.genai import types

    # wire field -> (the SDK's model of it, whether the field holds a list of them)
    return {"contents": (types.Content, True), "systemInstruction": (types.Content, False),
            "tools": (types.Tool, True), "toolConfig": (types.ToolConfig, False),
            "generationConfig": (types.GenerationConfig, False), "safetySettings": (types.SafetySetting, True)}


def _known(model: type[pydantic.BaseModel], value: Any) -> Any:
    """The fields of `value` the SDK's model has: a field it lacks is the hand-written rules' to judge."""
    if not isinstance(value, dict):
        return value
    names = set(model.model_fields) | {f.alias for f in model.model_fields.values() if f.alias}
    from pydantic.alias_generators import to_camel

    names |= {to_camel(name) for name in model.model_fields}
    return {k: v for k, v in value.items() if k in names}


def genai_refusal(body: dict[str, Any]) -> tuple[str, str] | None:
    for field, (model, many) in _genai_fields().items():
        value = body.get(field)
        if value is None:
            continue
        items = list(enumerate(value)) if many and isinstance(value, list) else [(None, value)]
        for index, item in items:
            checked = _known(model, item) if model.__name__ == "GenerationConfig" else item
            try:
                model.model_validate(checked)
            except pydantic.ValidationError as exc:
                error = _first(exc)
                where = _dotted((field, *(() if index is None else (index,)), *error["loc"]))
                return f"Invalid value at '{where}': {error['msg']}", where
    return None
