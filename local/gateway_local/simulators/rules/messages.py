"""What the Anthropic-style messages upstream refuses, from its API reference (docs.anthropic.com/
en/api/messages, /en/api/messages-count-tokens): an unknown top-level field ("<name>: Extra inputs
are not permitted"), `max_tokens` missing, a value out of its documented range (temperature and
top_p 0..1, a thinking budget of at least 1024 tokens and below `max_tokens`)."""

from __future__ import annotations

from typing import Any

from ._shape import Words, array, boolean, either, first_wrong, integer, number, obj, one_of, string


def _message(value: Any) -> str | None:
    if not isinstance(value, dict):
        return "must be an object"
    if value.get("role") not in ("user", "assistant"):
        return "role: Input should be 'user' or 'assistant'"
    if not isinstance(value.get("content"), (str, list)):
        return "content: Field required"
    return None


_COMMON = {
    "model": string, "messages": array(each=_message), "system": either(string, array(each=obj)),
    "thinking": obj, "tool_choice": obj, "tools": array(each=obj), "context_management": obj,
    "mcp_servers": array(each=obj), "output_format": obj, "output_config": obj,
}
MESSAGES_FIELDS = {
    **_COMMON, "max_tokens": integer(1), "container": either(string, obj), "metadata": obj,
    "service_tier": one_of("auto", "standard_only"), "stop_sequences": array(each=string), "stream": boolean,
    "temperature": number(0, 1), "top_k": integer(0), "top_p": number(0, 1),
}
COUNT_FIELDS = dict(_COMMON)


def _thinking_budget(body: dict[str, Any]) -> tuple[str, str] | None:
    thinking = body.get("thinking")
    if not isinstance(thinking, dict) or thinking.get("type") != "enabled":
        return None
    budget = thinking.get("budget_tokens")
    if isinstance(budget, bool) or not isinstance(budget, int) or budget < 1024:
        return "thinking.enabled.budget_tokens: Input should be greater than or equal to 1024", "thinking"
    if isinstance(body.get("max_tokens"), int) and budget >= body["max_tokens"]:
        return "`max_tokens` must be greater than `thinking.budget_tokens`", "max_tokens"
    return None


WORDS = Words(unknown="{name}: Extra inputs are not permitted", missing="{name}: Field required",
              invalid="{name}: {what}")


def refusal(path: str, body: Any) -> tuple[str, str] | None:
    """(message, param) of the upstream's 400 for this body, or None."""
    counting = path.endswith("/count_tokens")
    fields, required = (COUNT_FIELDS, ("messages", "model")) if counting else \
        (MESSAGES_FIELDS, ("max_tokens", "messages", "model"))
    return WORDS.say(first_wrong(body, fields, required)) or _thinking_budget(body)
