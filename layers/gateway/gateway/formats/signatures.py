"""What a thinking upstream needs sent back, carried through a client of another dialect.

A thinking model's tool loop only continues if the next request hands back the state the model
signed: the messages dialect's `thinking` blocks (text and `signature`) and `redacted_thinking`
blocks (`data`), which must open the final assistant message of a tool loop ("Expected `thinking`
or `redacted_thinking`, but found `tool_use`"); the content dialect's `thoughtSignature` on the
first `functionCall` part of each model step ("Function call is missing a thought_signature").
A client of another dialect never sees those fields, so the gateway puts them where that
dialect keeps opaque reasoning state and where its SDK's own loop sends them back unchanged:

- chat: the assistant message's `reasoning_details`, in OpenRouter's shape (`reasoning.text` with
  its `signature`, `reasoning.encrypted` with `data`; `format` says whose; a call's signature
  carries the call's `id`). The openai SDK keeps unknown fields on its models and sends them back
  when the message is appended unchanged; clients written for OpenRouter already carry this field;
  tool call ids stay as the upstream made them. Read back too: Google's own OpenAI-compatible
  form, `tool_calls[].extra_content.google.thought_signature`.
- responses: a `reasoning` item's `encrypted_content` (sealed): the dialect's own place for state
  the client hands back when nothing is stored upstream.
- messages: a `thinking` block's `signature` (a content upstream's, sealed, in a block just before
  its call): the dialect's own place, which clients keep because the messages upstream requires it.
- content: a part's `thoughtSignature` (base64 of the sealed text, as the field is bytes): the
  dialect's own place; the google-genai SDK keeps it and sends it back.

A sealed value (`seal`) is `gw1.` + base64url of the whole upstream block as JSON, so what goes
back upstream is exactly what the upstream sent, whatever the client shows or drops around it.
It is not secret and needs no key: the upstream checks its own signature. A value that is not
sealed (another vendor's, a client's own) is not the gateway's to forward and is dropped.

When a client drops it anyway, the request still succeeds: a messages channel gets the request
with thinking off (`formats.messages`: Anthropic's error says "To avoid this requirement,
disable `thinking`"), a content channel gets Google's documented placeholder signature
(`formats.content`: ai.google.dev/gemini-api/docs/thought-signatures, "skip_thought_signature_validator").
"""

from __future__ import annotations

import base64
import binascii
import json
from typing import Any

from .neutral import CONTENT, MESSAGES, Thinking

PREFIX = "gw1."

# reasoning_details `format` words (OpenRouter's) for the two signing upstreams.
ANTHROPIC_FORMAT, GOOGLE_FORMAT = "anthropic-claude-v1", "google-gemini-v1"


def seal(origin: str, block: dict[str, Any]) -> str:
    raw = json.dumps({"o": origin, "b": block}, separators=(",", ":"), ensure_ascii=False).encode()
    return PREFIX + base64.urlsafe_b64encode(raw).decode().rstrip("=")


def unseal(value: Any) -> tuple[str, dict[str, Any]] | None:
    """(origin, block) of a sealed value, else None."""
    if not isinstance(value, str) or not value.startswith(PREFIX):
        return None
    body = value[len(PREFIX):]
    try:
        data = json.loads(base64.urlsafe_b64decode(body + "=" * (-len(body) % 4)))
    except (ValueError, binascii.Error, RecursionError):  # a client's value: anything may be in it
        return None
    if not isinstance(data, dict) or data.get("o") not in (MESSAGES, CONTENT) or not isinstance(data.get("b"), dict):
        return None
    return data["o"], data["b"]


def seal_bytes(origin: str, block: dict[str, Any]) -> str:
    """A sealed value as the content dialect's `thoughtSignature` (a bytes field: base64)."""
    return base64.b64encode(seal(origin, block).encode()).decode()


def unseal_bytes(value: Any) -> tuple[str, dict[str, Any]] | None:
    """A `thoughtSignature` that holds a sealed value (standard or URL-safe base64, as SDKs re-encode it)."""
    if not isinstance(value, str):
        return None
    try:
        raw = base64.b64decode(value.replace("-", "+").replace("_", "/") + "=" * (-len(value) % 4))
    except (ValueError, binascii.Error):
        return None
    if not raw.startswith(PREFIX.encode()):
        return None
    try:
        return unseal(raw.decode())
    except UnicodeDecodeError:
        return None


# ---- a messages upstream's thinking blocks ----

def thinking_block(part: Thinking) -> dict[str, Any]:
    """The messages dialect's block for a signed Thinking part made by a messages upstream."""
    if part.redacted:
        return {"type": "redacted_thinking", "data": part.signature or ""}
    return {"type": "thinking", "thinking": part.text, "signature": part.signature or ""}


def thinking_from_block(block: dict[str, Any]) -> Thinking | None:
    """A messages `thinking` / `redacted_thinking` block as a signed Thinking part."""
    if block.get("type") == "redacted_thinking" and isinstance(block.get("data"), str):
        return Thinking("", block["data"], MESSAGES, redacted=True)
    if block.get("type") == "thinking" and isinstance(block.get("signature"), str) and block["signature"]:
        return Thinking(str(block.get("thinking") or ""), block["signature"], MESSAGES)
    return None


def call_signature_block(signature: str) -> dict[str, Any]:
    """What is sealed for a content upstream's function-call signature."""
    return {"thoughtSignature": signature}


def opened(value: Any, *, as_bytes: bool = False) -> Thinking | str | None:
    """A sealed value opened: a messages upstream's Thinking, or a content upstream's call
    signature (str); None if it is not the gateway's."""
    found = unseal_bytes(value) if as_bytes else unseal(value)
    if found is None:
        return None
    origin, block = found
    if origin == MESSAGES:
        return thinking_from_block(block)
    signature = block.get("thoughtSignature")
    return signature if isinstance(signature, str) and signature else None


def sealed_thinking(part: Thinking, *, as_bytes: bool = False) -> str:
    block = thinking_block(part)
    return seal_bytes(MESSAGES, block) if as_bytes else seal(MESSAGES, block)


def sealed_call(signature: str, *, as_bytes: bool = False) -> str:
    block = call_signature_block(signature)
    return seal_bytes(CONTENT, block) if as_bytes else seal(CONTENT, block)


# ---- the chat dialect's reasoning_details ----

def detail_of_thinking(part: Thinking, index: int) -> dict[str, Any]:
    if part.redacted:
        return {"type": "reasoning.encrypted", "data": part.signature, "format": ANTHROPIC_FORMAT, "index": index}
    return {"type": "reasoning.text", "text": part.text, "signature": part.signature, "format": ANTHROPIC_FORMAT,
            "index": index}


def detail_of_call(call_id: str, signature: str, index: int) -> dict[str, Any]:
    return {"type": "reasoning.encrypted", "data": signature, "id": call_id, "format": GOOGLE_FORMAT, "index": index}


def read_details(details: Any) -> tuple[list[Thinking], dict[str, str]]:
    """A chat assistant message's `reasoning_details`: the messages upstream's blocks in order, and
    the content upstream's call signatures by call id. Items of other vendors are left out."""
    thinking: list[Thinking] = []
    calls: dict[str, str] = {}
    for item in details if isinstance(details, list) else []:
        if not isinstance(item, dict):
            continue
        kind, fmt = item.get("type"), item.get("format")
        if fmt == ANTHROPIC_FORMAT and kind == "reasoning.text" and isinstance(item.get("signature"), str) \
                and item["signature"]:
            thinking.append(Thinking(str(item.get("text") or ""), item["signature"], MESSAGES))
        elif fmt == ANTHROPIC_FORMAT and kind == "reasoning.encrypted" and isinstance(item.get("data"), str):
            thinking.append(Thinking("", item["data"], MESSAGES, redacted=True))
        elif fmt == GOOGLE_FORMAT and kind == "reasoning.encrypted" and isinstance(item.get("data"), str) \
                and isinstance(item.get("id"), str):
            calls[item["id"]] = item["data"]
    return thinking, calls
