"""What the rerank simulators share: a score by word overlap (the Jaccard index of the query's
and the document's lower-cased word sets), so the document that shares the query's words comes
first, and the refusals every rerank upstream makes."""

from __future__ import annotations

import re
from typing import Any

from gateway.tokens import estimate_tokens

_WORD = re.compile(r"\w+")


def words(text: str) -> set[str]:
    return set(_WORD.findall(text.lower()))


def score(query: str, document: str) -> float:
    asked, offered = words(query), words(document)
    union = asked | offered
    return round(len(asked & offered) / len(union), 6) if union else 0.0


def ranked(query: str, documents: list[str]) -> list[tuple[int, float]]:
    """(index, score) by score, highest first, ties in document order."""
    return sorted(((i, score(query, d)) for i, d in enumerate(documents)), key=lambda pair: (-pair[1], pair[0]))


def tokens(query: str, documents: list[str]) -> int:
    """Voyage's count: the query's tokens times the documents, plus every document's."""
    return sum(estimate_tokens(query) + estimate_tokens(d) for d in documents)


def refusal(body: Any, *, top: str = "top_n", texts: str = "documents") -> str | None:
    """The request's fault as the upstreams word it, or None. A `top_n` above the number of
    documents is refused as Cohere and Bedrock refuse it (elastic/elasticsearch PR #111446;
    langchain-ai/langchain-aws#761), so the gateway's cap is tested."""
    if not isinstance(body, dict):
        return "invalid request: the body must be a JSON object"
    query, documents = body.get("query"), body.get(texts)
    if not isinstance(query, str) or not query:
        return "invalid request: query must be a non-empty string"
    if not isinstance(documents, list) or not documents:
        return f"invalid request: {texts} must be a non-empty list"
    if not all(isinstance(d, str) for d in documents):
        return f"invalid request: {texts} must be strings"
    wanted = body.get(top)
    if wanted is not None and (not isinstance(wanted, int) or wanted < 1 or wanted > len(documents)):
        return f"invalid request: {top} must be between 1 and the number of documents ({len(documents)})"
    return None
