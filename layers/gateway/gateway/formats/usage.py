"""One usage record for every text dialect, read from and written back to each dialect's shape.

`Usage.input_tokens` is the whole prompt, cached reads and cache writes included, and
`Usage.output_tokens` is everything generated, reasoning included. Billing prices the cached
and cache-creation shares apart; the dialects disagree on what their own counts include, so
each reader and writer below does the arithmetic once.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Usage:
    input_tokens: int
    output_tokens: int
    cached_input_tokens: int = 0
    cache_creation_input_tokens: int = 0
    cache_creation_1h_input_tokens: int = 0  # of the cache writes, those kept for an hour (priced apart)
    reasoning_tokens: int = 0

    @property
    def total_tokens(self) -> int:
        return self.input_tokens + self.output_tokens


def _count(source: dict[str, Any] | None, key: str) -> int:
    value = (source or {}).get(key)
    return int(value) if isinstance(value, (int, float)) else 0


def usage_from_chat(usage: dict[str, Any] | None) -> Usage:
    # prompt_tokens already includes the cached share (and cache writes, where an upstream
    # reports them as cache_write_tokens), completion_tokens the reasoning.
    prompt_details = (usage or {}).get("prompt_tokens_details")
    return Usage(
        input_tokens=_count(usage, "prompt_tokens"),
        output_tokens=_count(usage, "completion_tokens"),
        cached_input_tokens=_count(prompt_details, "cached_tokens"),
        cache_creation_input_tokens=_count(prompt_details, "cache_write_tokens"),
        reasoning_tokens=_count((usage or {}).get("completion_tokens_details"), "reasoning_tokens"),
    )


def usage_to_chat(usage: Usage) -> dict[str, Any]:
    prompt_details = {"cached_tokens": usage.cached_input_tokens}
    if usage.cache_creation_input_tokens:
        prompt_details["cache_write_tokens"] = usage.cache_creation_input_tokens
    return {
        "prompt_tokens": usage.input_tokens,
        "completion_tokens": usage.output_tokens,
        "total_tokens": usage.total_tokens,
        "prompt_tokens_details": prompt_details,
        "completion_tokens_details": {"reasoning_tokens": usage.reasoning_tokens},
    }


def usage_from_messages(usage: dict[str, Any] | None) -> Usage:
    # The messages dialect's input_tokens leaves out both cache reads and cache writes; its
    # cache_creation object splits the writes by how long they are kept (5 minutes, 1 hour).
    cached = _count(usage, "cache_read_input_tokens")
    created = _count(usage, "cache_creation_input_tokens")
    split = (usage or {}).get("cache_creation")
    return Usage(
        input_tokens=_count(usage, "input_tokens") + cached + created,
        output_tokens=_count(usage, "output_tokens"),
        cached_input_tokens=cached,
        cache_creation_input_tokens=created,
        cache_creation_1h_input_tokens=min(_count(split if isinstance(split, dict) else None,
                                                  "ephemeral_1h_input_tokens"), created),
    )


def usage_to_messages(usage: Usage) -> dict[str, Any]:
    uncached = usage.input_tokens - usage.cached_input_tokens - usage.cache_creation_input_tokens
    rendered: dict[str, Any] = {
        "input_tokens": max(uncached, 0),
        "output_tokens": usage.output_tokens,
        "cache_creation_input_tokens": usage.cache_creation_input_tokens,
        "cache_read_input_tokens": usage.cached_input_tokens,
    }
    if usage.cache_creation_1h_input_tokens:
        hour = usage.cache_creation_1h_input_tokens
        rendered["cache_creation"] = {"ephemeral_5m_input_tokens": usage.cache_creation_input_tokens - hour,
                                      "ephemeral_1h_input_tokens": hour}
    return rendered


def usage_from_content(usage: dict[str, Any] | None) -> Usage:
    # Thoughts are billed as output upstream but are not in candidatesTokenCount, so they are
    # added to output here; tool-use prompt tokens are billed as input the same way.
    thoughts = _count(usage, "thoughtsTokenCount")
    return Usage(
        input_tokens=_count(usage, "promptTokenCount") + _count(usage, "toolUsePromptTokenCount"),
        output_tokens=_count(usage, "candidatesTokenCount") + thoughts,
        cached_input_tokens=_count(usage, "cachedContentTokenCount"),
        reasoning_tokens=thoughts,
    )


def usage_to_content(usage: Usage) -> dict[str, Any]:
    rendered: dict[str, Any] = {
        "promptTokenCount": usage.input_tokens,
        "candidatesTokenCount": max(usage.output_tokens - usage.reasoning_tokens, 0),
        "totalTokenCount": usage.total_tokens,
    }
    if usage.cached_input_tokens:
        rendered["cachedContentTokenCount"] = usage.cached_input_tokens
    if usage.reasoning_tokens:
        rendered["thoughtsTokenCount"] = usage.reasoning_tokens
    return rendered


def usage_from_responses(usage: dict[str, Any] | None) -> Usage:
    input_details = (usage or {}).get("input_tokens_details")
    return Usage(
        input_tokens=_count(usage, "input_tokens"),
        output_tokens=_count(usage, "output_tokens"),
        cached_input_tokens=_count(input_details, "cached_tokens"),
        cache_creation_input_tokens=_count(input_details, "cache_write_tokens"),
        reasoning_tokens=_count((usage or {}).get("output_tokens_details"), "reasoning_tokens"),
    )


def usage_to_responses(usage: Usage) -> dict[str, Any]:
    return {
        "input_tokens": usage.input_tokens,
        # The current SDK requires cache_write_tokens beside cached_tokens.
        "input_tokens_details": {"cached_tokens": usage.cached_input_tokens,
                                 "cache_write_tokens": usage.cache_creation_input_tokens},
        "output_tokens": usage.output_tokens,
        "output_tokens_details": {"reasoning_tokens": usage.reasoning_tokens},
        "total_tokens": usage.total_tokens,
    }


def usage_from_converse(usage: dict[str, Any] | None) -> Usage:
    # Bedrock's inputTokens leaves out cache reads and writes ("total input tokens = inputTokens +
    # cacheReadInputTokens + cacheWriteInputTokens", AWS's prompt-caching guide); cacheDetails
    # splits the writes by how long they are kept. Cache writes are input, never output.
    cached = _count(usage, "cacheReadInputTokens")
    created = _count(usage, "cacheWriteInputTokens")
    details = (usage or {}).get("cacheDetails")
    hour = sum(_count(d, "inputTokens") for d in details if isinstance(d, dict) and d.get("ttl") == "1h") \
        if isinstance(details, list) else 0
    return Usage(
        input_tokens=_count(usage, "inputTokens") + cached + created,
        output_tokens=_count(usage, "outputTokens"),
        cached_input_tokens=cached,
        cache_creation_input_tokens=created,
        cache_creation_1h_input_tokens=min(hour, created),
    )
