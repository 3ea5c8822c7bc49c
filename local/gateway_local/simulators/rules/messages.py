"""What the Anthropic-style messages upstream refuses, from its API reference (docs.anthropic.com/
en/api/messages, /en/api/messages-count-tokens): an unknown top-level field ("<name>: Extra inputs
are not permitted"), `max_tokens` missing, a value out of its documented range (temperature and
top_p 0..1, a thinking budget of at least 1024 tokens and below `max_tokens`)."""

from __future__ import annotations

import base64
import hashlib
import hmac
from typing import Any

from ._sdk import anthropic_refusal as sdk_refusal
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


# ---- thinking blocks sent back (docs.claude.com/en/docs/build-with-claude/extended-thinking,
# "Preserving thinking blocks" and "Thinking redaction"; the wording of each 400 is the upstream's
# own, as its users quote it in bug reports) ----

EXTENDED_THINKING = "https://docs.claude.com/en/docs/build-with-claude/extended-thinking"
_SIGNING_KEY = b"simulated-messages-upstream"  # the real upstream's key is its own: a client cannot forge one
_THINKING_BLOCKS = ("thinking", "redacted_thinking")
# The docs' test string that makes the upstream answer with a redacted_thinking block.
REDACTED_TRIGGER = "ANTHROPIC_MAGIC_STRING_TRIGGER_REDACTED_THINKING_46C9A13E193C177646C7398A98432ECCCE4C1253"


def signature_for(kind: str, content: str) -> str:
    """The signature of a thinking block (kind "thinking": its text) or the data of a redacted one."""
    digest = hmac.new(_SIGNING_KEY, f"{kind}\0{content}".encode(), hashlib.sha256).digest()
    return base64.b64encode(digest * 3).decode()  # opaque base64, about as long as the real ones' shortest


def _enabled(body: dict[str, Any]) -> bool:
    thinking = body.get("thinking")
    return isinstance(thinking, dict) and thinking.get("type") in ("enabled", "adaptive")


def _thinking_blocks(body: dict[str, Any]) -> tuple[str, str] | None:
    messages = [m for m in body.get("messages") or [] if isinstance(m, dict)]
    for i, message in enumerate(messages):
        content = message.get("content")
        for j, block in enumerate(content if isinstance(content, list) else []):
            if not isinstance(block, dict):
                continue
            where = f"messages.{i}.content.{j}"
            # A block the upstream did not sign is refused wherever it is (bug reports: "messages.1.content.0:
            # Invalid `signature` in `thinking` block" after a client rebuilt its history).
            if block.get("type") == "thinking" and not hmac.compare_digest(
                    str(block.get("signature") or ""), signature_for("thinking", str(block.get("thinking") or ""))):
                return f"{where}: Invalid `signature` in `thinking` block", where
            if block.get("type") == "redacted_thinking" and not _redacted_ok(block.get("data")):
                return f"{where}: Invalid `data` in `redacted_thinking` block", where  # wording unverified
    if _enabled(body):
        return _turn_opens_with_thinking(messages)
    last = messages[-1] if messages else {}
    if last.get("role") == "assistant":
        for j, block in enumerate(_blocks(last)):
            if block.get("type") in _THINKING_BLOCKS:
                where = f"messages.{len(messages) - 1}.content.{j}"
                return (f"{where}: When thinking is disabled, an `assistant` message in the final position cannot "
                        "contain `thinking`. To use thinking blocks, enable `thinking` in your request."), where
    return None


def _blocks(message: dict[str, Any]) -> list[dict[str, Any]]:
    content = message.get("content")
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    return [b for b in content if isinstance(b, dict)] if isinstance(content, list) else []


def _turn_opens_with_thinking(messages: list[dict[str, Any]]) -> tuple[str, str] | None:
    """The issue's row 1: a tool loop's assistant turn (its messages since the last user message
    that is not only tool results) must open with the thinking the upstream signed; the docs: the
    whole turn runs in one thinking mode, and only its first response need think."""
    start = 0
    for i, message in enumerate(messages):
        if message.get("role") == "user" and any(b.get("type") != "tool_result" for b in _blocks(message)):
            start = i + 1
    turn = [i for i in range(start, len(messages)) if messages[i].get("role") == "assistant" and _blocks(messages[i])]
    if not any(b.get("type") == "tool_use" for i in turn for b in _blocks(messages[i])):
        return None
    first = _blocks(messages[turn[0]])[0]
    if first.get("type") in _THINKING_BLOCKS:
        return None
    where = f"messages.{turn[0]}.content.0.type"
    return (f"{where}: Expected `thinking` or `redacted_thinking`, but found `{first.get('type')}`. "
            "When `thinking` is enabled, a final `assistant` message must start with a thinking block "
            "(preceeding the lastmost set of `tool_use` and `tool_result` blocks). We recommend you "
            "include thinking blocks from previous turns. To avoid this requirement, disable `thinking`. "
            f"Please consult our documentation at {EXTENDED_THINKING}"), where


def _redacted_ok(data: Any) -> bool:
    return isinstance(data, str) and hmac.compare_digest(data, signature_for("redacted_thinking", REDACTED_TRIGGER))


WORDS = Words(unknown="{name}: Extra inputs are not permitted", missing="{name}: Field required",
              invalid="{name}: {what}")


def refusal(path: str, body: Any) -> tuple[str, str] | None:
    """(message, param) of the upstream's 400 for this body, or None."""
    counting = path.endswith("/count_tokens")
    fields, required = (COUNT_FIELDS, ("messages", "model")) if counting else \
        (MESSAGES_FIELDS, ("max_tokens", "messages", "model"))
    return (WORDS.say(first_wrong(body, fields, required)) or _thinking_budget(body)
            or sdk_refusal(body, counting=counting) or _thinking_blocks(body))
