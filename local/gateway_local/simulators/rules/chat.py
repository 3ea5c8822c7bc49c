"""What the OpenAI-style chat upstream refuses, from its API reference (platform.openai.com/docs/
api-reference: Create chat completion, Create a model response, Create embeddings). It refuses an
argument it does not know ("Unrecognized request argument supplied: <name>"), and a value out of
its documented range."""

from __future__ import annotations

from typing import Any

from ._sdk import openai_refusal
from ._shape import Words, array, boolean, either, first_wrong, integer, number, obj, one_of, string

_EFFORT = one_of("none", "minimal", "low", "medium", "high", "xhigh")
_MESSAGE_ROLES = ("system", "developer", "user", "assistant", "tool", "function")


def _message(value: Any) -> str | None:
    if not isinstance(value, dict):
        return "must be an object"
    if value.get("role") not in _MESSAGE_ROLES:
        return f"role must be one of {', '.join(_MESSAGE_ROLES)}"
    return None


CHAT_FIELDS = {
    "messages": array(least=1, each=_message), "model": string,
    "audio": obj, "frequency_penalty": number(-2, 2), "function_call": either(string, obj), "functions": array(128),
    "logit_bias": obj, "logprobs": boolean, "max_completion_tokens": integer(1), "max_tokens": integer(1),
    "metadata": obj, "modalities": array(each=one_of("text", "audio")), "n": integer(1, 128),
    "parallel_tool_calls": boolean, "prediction": obj, "presence_penalty": number(-2, 2),
    "prompt_cache_key": string, "prompt_cache_retention": string, "reasoning_effort": _EFFORT,
    "response_format": obj, "safety_identifier": string, "seed": integer(), "service_tier": string,
    "stop": either(string, array(4, each=string)), "store": boolean, "stream": boolean, "stream_options": obj,
    "temperature": number(0, 2), "tool_choice": either(one_of("none", "auto", "required"), obj),
    "tools": array(128, each=obj), "top_logprobs": integer(0, 20), "top_p": number(0, 1), "user": string,
    "verbosity": one_of("low", "medium", "high"), "web_search_options": obj,
}

RESPONSES_FIELDS = {
    "model": string, "input": either(string, array()), "background": boolean, "conversation": either(string, obj),
    "include": array(each=string), "instructions": either(string, array()), "max_output_tokens": integer(16),
    "max_tool_calls": integer(1), "metadata": obj, "parallel_tool_calls": boolean, "previous_response_id": string,
    "prompt": obj, "prompt_cache_key": string, "prompt_cache_retention": string, "reasoning": obj,
    "safety_identifier": string, "service_tier": string, "store": boolean, "stream": boolean,
    "stream_options": obj, "temperature": number(0, 2), "text": obj, "tool_choice": either(string, obj),
    "tools": array(each=obj), "top_logprobs": integer(0, 20), "top_p": number(0, 1),
    "truncation": one_of("auto", "disabled"), "user": string,
}

COMPACT_FIELDS = {"model": string, "input": either(string, array()), "instructions": either(string, array()),
                  "previous_response_id": string}

EMBEDDINGS_FIELDS = {"input": either(string, array(2048, least=1)), "model": string, "dimensions": integer(1),
                     "encoding_format": one_of("float", "base64"), "user": string}

_BY_PATH = {"/v1/chat/completions": (CHAT_FIELDS, ("messages", "model")),
            "/v1/responses": (RESPONSES_FIELDS, ("model",)),
            "/v1/responses/compact": (COMPACT_FIELDS, ("model",)),
            "/v1/embeddings": (EMBEDDINGS_FIELDS, ("input", "model"))}


WORDS = Words(unknown="Unrecognized request argument supplied: {name}", missing="Missing required parameter: '{name}'.",
              invalid="Invalid value for '{name}': {what}.")


def refusal(path: str, body: Any) -> tuple[str, str] | None:
    """(message, param) of the upstream's 400 for a body sent to `path` (its endpoint by the
    path's end), or None."""
    endpoint = next((suffix for suffix in _BY_PATH if path.endswith(suffix)), None)
    if endpoint is None:
        return None
    return WORDS.say(first_wrong(body, *_BY_PATH[endpoint])) or openai_refusal(endpoint, body)
