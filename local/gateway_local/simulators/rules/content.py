"""What the Gemini-style content upstream refuses, from its API reference (ai.google.dev/api/
generate-content, /api/embeddings, /api/tokens): a field its request message does not have, at the
top level or inside `generationConfig` ('Invalid JSON payload received. Unknown name "<name>":
Cannot find field.'), and a value out of its documented range (candidateCount 1..8, at most 5
stop sequences, temperature 0..2, topP 0..1)."""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
from typing import Any

from ._sdk import genai_refusal
from ._shape import Words, array, boolean, either, first_wrong, integer, number, obj, string

GENERATION_CONFIG_FIELDS = {
    "stopSequences": array(5, each=string), "responseMimeType": string, "responseSchema": obj,
    "responseJsonSchema": either(obj, boolean), "_responseJsonSchema": either(obj, boolean),
    "responseModalities": array(each=string), "candidateCount": integer(1, 8), "maxOutputTokens": integer(1),
    "temperature": number(0, 2), "topP": number(0, 1), "topK": integer(1), "seed": integer(),
    "presencePenalty": number(), "frequencyPenalty": number(), "responseLogprobs": boolean,
    "logprobs": integer(0, 20), "enableEnhancedCivicAnswers": boolean, "speechConfig": obj,
    "thinkingConfig": obj, "imageConfig": obj, "mediaResolution": string,
}

GENERATE_FIELDS = {
    "model": string, "contents": array(least=1, each=obj), "tools": array(each=obj), "toolConfig": obj,
    "safetySettings": array(each=obj), "systemInstruction": obj, "generationConfig": obj,
    "cachedContent": string, "labels": obj,  # labels: the Vertex AI flavour of the same request
}
EMBED_FIELDS = {"model": string, "content": obj, "taskType": string, "title": string,
                "outputDimensionality": integer(1)}
BATCH_EMBED_FIELDS = {"requests": array(100, least=1, each=obj)}
COUNT_FIELDS = {"contents": array(each=obj), "generateContentRequest": obj}

_BY_ACTION = {"generateContent": (GENERATE_FIELDS, ("contents",)),
              "streamGenerateContent": (GENERATE_FIELDS, ("contents",)),
              "embedContent": (EMBED_FIELDS, ("content",)), "batchEmbedContents": (BATCH_EMBED_FIELDS, ("requests",)),
              "countTokens": (COUNT_FIELDS, ())}


WORDS = Words(unknown='Invalid JSON payload received. Unknown name "{short}"{at}: Cannot find field.',
              missing="* GenerateContentRequest.{name}: {name} is not specified",
              invalid="* GenerateContentRequest.{name}: {what}")


# ---- thought signatures (ai.google.dev/gemini-api/docs/thought-signatures): a Gemini 3 model
# signs the first function call of each step and checks, in the current turn (everything after
# the last user message that is not only function responses), that each model step's first
# function call comes back with its signature. The wording of the 400s is the upstream's own, as
# its users quote it in bug reports (the missing one: e.g. vercel/ai#15550; a changed one:
# google-gemini/gemini-cli#13467). Which "position" the missing one names is unverified: here the
# step's place in `contents`, counted from 1 (the users' reports of a one-call loop say 2). ----

THOUGHT_SIGNATURES = "https://ai.google.dev/gemini-api/docs/thought-signatures"
# The documented values that skip the check, for calls made elsewhere.
PLACEHOLDERS = ("skip_thought_signature_validator", "context_engineering_is_the_way_to_go")
_SIGNING_KEY = b"simulated-content-upstream"


def signature_for(name: str, args: Any) -> str:
    """The signature the simulated upstream gives a function call (base64, as the API's bytes)."""
    canonical = json.dumps([name, args or {}], sort_keys=True, separators=(",", ":"))
    return base64.b64encode(hmac.new(_SIGNING_KEY, canonical.encode(), hashlib.sha256).digest() * 2).decode()


def _decoded(value: str) -> bytes | None:
    try:
        return base64.b64decode(value.replace("-", "+").replace("_", "/") + "=" * (-len(value) % 4))
    except (ValueError, binascii.Error):
        return None


def _parts(content: Any) -> list[dict[str, Any]]:
    parts = content.get("parts") if isinstance(content, dict) else None
    return [p for p in parts if isinstance(p, dict)] if isinstance(parts, list) else []


def _signatures(body: dict[str, Any]) -> tuple[str, str] | None:
    given = body.get("contents")
    contents: list[dict[str, Any]] = [c for c in given if isinstance(c, dict)] if isinstance(given, list) else []
    start = 0
    for i, content in enumerate(contents):
        parts = _parts(content)
        if (content.get("role") or "user") == "user" and any(
                "functionResponse" not in p and "function_response" not in p for p in parts):
            start = i
    for i in range(start, len(contents)):
        if contents[i].get("role") != "model":
            continue
        first = next((p for p in _parts(contents[i]) if "functionCall" in p or "function_call" in p), None)
        if first is None:
            continue
        call = first.get("functionCall") or first.get("function_call") or {}
        signature = first.get("thoughtSignature") or first.get("thought_signature")
        where = f"contents[{i}].parts"
        if not signature:
            return ("Function call is missing a thought_signature in functionCall parts. This is required for "
                    "tools to work correctly, and missing thought_signature may lead to degraded model "
                    f"performance. Additional data, function call `default_api:{call.get('name')}` , position "
                    f"{i + 1}. Please refer to {THOUGHT_SIGNATURES} for more details."), where
        if signature in PLACEHOLDERS:
            continue
        if _decoded(str(signature)) != _decoded(signature_for(str(call.get("name") or ""), call.get("args"))):
            return "Corrupted thought signature.", where
    return None


def refusal(action: str, body: Any) -> tuple[str, str] | None:
    """(message, param) of the upstream's 400 for this body, or None."""
    fields, required = _BY_ACTION.get(action, ({}, ()))
    if not fields:
        return None
    wrong = first_wrong(body, fields, required)
    if wrong is None and isinstance(body.get("generationConfig"), dict):
        inner = first_wrong(body["generationConfig"], GENERATION_CONFIG_FIELDS)
        wrong = (f"generationConfig.{inner[0]}", inner[1]) if inner else None
    if said := WORDS.say(wrong):
        return said
    if action in ("generateContent", "streamGenerateContent"):
        return genai_refusal(body) or _signatures(body)
    return None
