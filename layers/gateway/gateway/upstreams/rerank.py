"""The rerank protocols: Cohere v2 (`cohere`) and Jina-compatible (`jina`, with the `variant`s
`voyage` and `tei`), each answer read into one shape (`Ranked`).

Sources (docs/conformance.md, "Rerank"): cohere-python `v2/client.py` `rerank` and
`v2/types/v2rerank_response.py`; Jina's `/v1/rerank` as new-api relays it (`relay/channel/jina`)
and LiteLLM reads it (`llms/jina_ai/rerank/transformation.py`: a `document` may come back as a
bare string); Voyage's (`llms/voyage/rerank/transformation.py`: `top_k`, results under `data`);
TEI's `/rerank` (huggingface/text-embeddings-inference `router/src/http/types.rs` `RerankRequest`:
`texts`, no model, no top_n; a bare array of `{index, score}`; tokens in `x-compute-tokens`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

import httpx

from gateway.upstreams.base import Timeouts, UpstreamClient, error_message
from gateway.upstreams.errors import ErrorTable, UpstreamError

#: Cohere's errors (docs.cohere.com/reference/errors) and Jina's, Voyage's and TEI's: none of
#: their bodies names whose fault it is beyond the status (TEI: 413 too many texts, 422 a
#: tokenizer refusal, 424 its backend, 429 overloaded: router/src/http/server.rs), so the status decides.
COHERE_ERRORS = ErrorTable("cohere", [], message=error_message)
JINA_ERRORS = ErrorTable("jina", [], message=error_message)


@dataclass(frozen=True)
class Ranked:
    """An upstream's ranking: (index, score) pairs as it sent them, and what it reports it used."""

    scores: list[tuple[int, float]]
    search_units: int | None = None
    tokens: int | None = None


def _whole(value: Any) -> int | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0 or value != value:
        return None
    return int(-(-value // 1))


def _scores(entries: Any, documents: int, score: str = "relevance_score") -> list[tuple[int, float]]:
    if not isinstance(entries, list):
        raise UpstreamError(None, "upstream rerank answer has no results", retryable=True)
    found = []
    for entry in entries:
        index = entry.get("index") if isinstance(entry, dict) else None
        value = entry.get(score) if isinstance(entry, dict) else None
        if (not isinstance(index, int) or isinstance(index, bool) or not 0 <= index < documents
                or isinstance(value, bool) or not isinstance(value, (int, float))):
            raise UpstreamError(None, "upstream rerank answer has a result without a valid index and score",
                                retryable=True)
        found.append((index, float(value)))
    return found


class RerankClient(UpstreamClient):
    def auth_headers(self) -> dict[str, str]:
        return {"authorization": f"Bearer {self._api_key}"}

    def is_terminal(self, event: Any) -> bool:  # rerank never streams
        return False

    async def rerank(self, model: str, query: str, documents: list[str], top_n: int,
                     extra: dict[str, Any]) -> Ranked:
        raise NotImplementedError


class CohereClient(RerankClient):
    protocol = "cohere"
    errors = COHERE_ERRORS

    async def rerank(self, model: str, query: str, documents: list[str], top_n: int,
                     extra: dict[str, Any]) -> Ranked:
        # v2 takes strings only, and no return_documents: the gateway adds the documents itself.
        payload: dict[str, Any] = {"model": model, "query": query, "documents": documents, "top_n": top_n,
                                   **{k: extra[k] for k in ("max_tokens_per_doc", "priority") if k in extra}}
        answer = await self.call("/v2/rerank", payload)
        billed = (answer.get("meta") or {}).get("billed_units") or {}
        return Ranked(_scores(answer.get("results"), len(documents)),
                      search_units=_whole(billed.get("search_units")),
                      tokens=_whole(billed.get("input_tokens")))


class JinaClient(RerankClient):
    protocol = "jina"
    errors = JINA_ERRORS
    probe_paths: ClassVar[dict[str, str]] = {"jina": "/v1/models", "voyage": "/v1/models", "tei": "/info"}

    def __init__(self, base_url: str, api_key: str, client: httpx.AsyncClient, timeouts: Timeouts | None = None,
                 *, variant: str | None = None):
        super().__init__(base_url, api_key, client, timeouts)
        self.variant = variant or "jina"

    def probe_target(self) -> str:
        return self.probe_paths[self.variant]

    def auth_headers(self) -> dict[str, str]:
        # TEI's key is optional (server.rs: `Bearer <api_key>` only when it was started with one).
        return {"authorization": f"Bearer {self._api_key}"} if self._api_key else {}

    async def rerank(self, model: str, query: str, documents: list[str], top_n: int,
                     extra: dict[str, Any]) -> Ranked:
        if self.variant == "tei":
            # No model, no top_n: every text is scored, the gateway keeps the top_n.
            answer: Any = await self.call("/rerank", {"query": query, "texts": documents, "return_text": False})
            tokens = self.last_headers.get("x-compute-tokens")
            return Ranked(_scores(answer, len(documents), "score"),
                          tokens=int(tokens) if tokens and tokens.isdigit() else None)
        if self.variant == "voyage":
            answer = await self.call("/v1/rerank", {"model": model, "query": query, "documents": documents,
                                                    "top_k": top_n, "return_documents": False})
            entries = answer.get("data")
        else:
            answer = await self.call("/v1/rerank", {"model": model, "query": query, "documents": documents,
                                                    "top_n": top_n, "return_documents": False})
            entries = answer.get("results")
        usage = answer.get("usage") or {}
        return Ranked(_scores(entries, len(documents)), tokens=_whole(usage.get("total_tokens")))
