"""The gateway's own token estimate: what a prompt is held at before an upstream counts it, what a
stream cut short is billed to, and what the embedding limits and the simulators count. Shared by
request validation, the dialect conversions and billing; it needs nothing else of the gateway.
"""

from __future__ import annotations

import math
import re
from typing import Any

# Worst-case prompt tokens counted for one image, document, audio clip or file reference. An
# image of about a megapixel costs up to ~1600 tokens upstream; reserving that much never
# undercharges a reservation for a picture.
MEDIA_TOKENS = 1600

_WORDS = re.compile(r"[A-Za-z0-9]+|[\x21-\x2f\x3a-\x40\x5b-\x60\x7b-\x7e]")


def estimate_tokens(text: str) -> int:
    """A deterministic, deliberately generous token count for `text`.

    ASCII text: the larger of one token per 4 characters and one per word or punctuation mark
    (real tokenizers give ~4 characters per token in English prose, but never fewer tokens than
    short words and symbols). Every non-ASCII character counts as one token, since CJK text runs
    at about one token per character and accented or emoji text at one or more. So the estimate
    may run high, but never far below what a real tokenizer says.
    """
    if not text:
        return 0
    ascii_chars = len(text.encode("ascii", "ignore"))
    other = len(text) - ascii_chars
    return max(math.ceil(ascii_chars / 4), len(_WORDS.findall(text))) + other


_MEDIA_KEYS = frozenset({"data", "file_data", "url", "image_url", "file_id", "fileUri", "file_uri",
                         "bytesBase64Encoded"})


def estimate_value_tokens(value: Any, key: str = "") -> int:
    """Tokens of every string inside a JSON value; media payloads count `MEDIA_TOKENS` each.

    Role names and part types are counted too, standing in for the per-message overhead real
    upstreams add.
    """
    if isinstance(value, str):
        if key in _MEDIA_KEYS or value.startswith("data:"):
            return MEDIA_TOKENS
        return estimate_tokens(value)
    if isinstance(value, dict):
        return sum(estimate_value_tokens(v, k) for k, v in value.items())
    if isinstance(value, list):
        return sum(estimate_value_tokens(v, key) for v in value)
    return 0
