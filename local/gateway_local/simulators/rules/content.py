"""What the Gemini-style content upstream refuses, from its API reference (ai.google.dev/api/
generate-content, /api/embeddings, /api/tokens): a field its request message does not have, at the
top level or inside `generationConfig` ('Invalid JSON payload received. Unknown name "<name>":
Cannot find field.'), and a value out of its documented range (candidateCount 1..8, at most 5
stop sequences, temperature 0..2, topP 0..1)."""

from __future__ import annotations

from typing import Any

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


def refusal(action: str, body: Any) -> tuple[str, str] | None:
    """(message, param) of the upstream's 400 for this body, or None."""
    fields, required = _BY_ACTION.get(action, ({}, ()))
    if not fields:
        return None
    wrong = first_wrong(body, fields, required)
    if wrong is None and isinstance(body.get("generationConfig"), dict):
        inner = first_wrong(body["generationConfig"], GENERATION_CONFIG_FIELDS)
        wrong = (f"generationConfig.{inner[0]}", inner[1]) if inner else None
    return WORDS.say(wrong)
