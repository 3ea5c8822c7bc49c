"""What a conversion between dialects cannot carry, and the requests refused for it.

The neutral shapes keep what at least two dialects can express. A field outside them is lost
when a request is converted. Most such fields only tune the service (a cache hint, a storage
flag) and are dropped, as docs/conversions.md lists. The fields below shape the answer itself
(more answers, log probabilities, audio, server-side tools or state): a converted request that
sets one would be answered wrongly, so it is refused with a 400 naming the field instead.
Served by a channel of the client's own dialect, every field passes through untouched.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .neutral import CHAT, CONTENT, MESSAGES, RESPONSES, unsupported


def _set(value: Any) -> bool:
    return value not in (None, False, 0, "", [], {})


def _not_text_only(value: Any) -> bool:
    return isinstance(value, list) and any(str(v).lower() != "text" for v in value)


# dialect -> [(dotted field, test of its value that makes the request depend on it, what it is)]
ANSWER_FIELDS: dict[str, list[tuple[str, Callable[[Any], bool], str]]] = {
    CHAT: [
        ("logprobs", _set, "log probabilities"),
        ("top_logprobs", _set, "log probabilities"),
        ("logit_bias", _set, "token biases"),
        ("modalities", _not_text_only, "output other than text"),
        ("audio", _set, "audio output"),
        ("web_search_options", _set, "the upstream's web search"),
    ],
    MESSAGES: [
        ("mcp_servers", _set, "remote MCP servers"),
        ("container", _set, "a code-execution container"),
    ],
    CONTENT: [
        ("cachedContent", _set, "an upstream cache entry"),
        ("generationConfig.responseLogprobs", _set, "log probabilities"),
        ("generationConfig.logprobs", _set, "log probabilities"),
        ("generationConfig.responseModalities", _not_text_only, "output other than text"),
        ("generationConfig.speechConfig", _set, "speech output"),
        ("generationConfig.responseMimeType", lambda v: v not in (None, "", "text/plain", "application/json"),
         "output of another media type"),
    ],
    RESPONSES: [
        ("background", _set, "a background response"),
        ("prompt", _set, "a prompt stored upstream"),
        ("conversation", _set, "an upstream conversation"),
        ("top_logprobs", _set, "log probabilities"),
        ("include", lambda v: isinstance(v, list) and any("logprobs" in str(i) for i in v), "log probabilities"),
    ],
}


def _lookup(body: dict[str, Any], dotted: str) -> Any:
    value: Any = body
    for name in dotted.split("."):
        if not isinstance(value, dict):
            return None
        # the content dialect also takes snake_case twins of its names
        snake = "".join("_" + c.lower() if c.isupper() else c for c in name)
        value = value.get(name, value.get(snake))
    return value


def refuse_uncarried(body: dict[str, Any], source: str, target: str) -> None:
    """Raises a 400 naming the first field of `body` that the `target` dialect cannot carry."""
    for dotted, depends, what in ANSWER_FIELDS.get(source, []):
        if depends(_lookup(body, dotted)):
            raise unsupported(f"{dotted} ({what}, which a {target} channel cannot give)", dotted)
