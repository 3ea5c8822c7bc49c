"""The request model of `POST /v1/rerank`: new-api's shape, which is Jina's and Cohere v1's
(QuantumNous/new-api `dto/rerank.go` `RerankRequest`; cohere-python `Client.rerank`).

`documents` are strings or `{text}` objects; `top_n` above the number of documents is capped
(upstreams refuse it: dify-official-plugins#1916, elastic PR #111446), and unset means all."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import Field, field_validator

from gateway.schemas.text.shapes import Bool, Int, ModelName, NonEmptyStr, Open
from gateway.tokens import estimate_tokens

# Cohere's ceiling ("between 1 and 10,000 documents", docs.cohere.com reranking best practices).
MAX_DOCUMENTS = 10_000
# One search unit is one query over up to 100 documents (cohere.com/pricing; Bedrock's rerank pricing).
DOCUMENTS_PER_SEARCH_UNIT = 100


class RerankDocument(Open):
    text: NonEmptyStr


class RerankRequest(Open):
    model: ModelName
    query: NonEmptyStr
    documents: Annotated[list[Any], Field(min_length=1, max_length=MAX_DOCUMENTS)]
    top_n: Annotated[Int, Field(ge=1)] | None = None
    return_documents: Bool | None = None
    max_tokens_per_doc: Annotated[Int, Field(ge=1)] | None = None

    @field_validator("documents")
    @classmethod
    def _documents(cls, values: list[Any]) -> list[Any]:
        for index, value in enumerate(values):
            if isinstance(value, str):
                if not value:
                    raise ValueError(f"[{index}]: must not be empty")
            elif isinstance(value, dict):
                text = value.get("text")
                if not isinstance(text, str) or not text:
                    raise ValueError(f"[{index}].text: a document object needs a non-empty text")
            else:
                raise ValueError(f"[{index}]: must be a string or an object with a text")
        return values

    def texts(self) -> list[str]:
        return [d if isinstance(d, str) else d["text"] for d in self.documents]

    def results_wanted(self) -> int:
        """`top_n` capped at the number of documents; all of them when unset."""
        return min(self.top_n or len(self.documents), len(self.documents))

    def search_units(self) -> int:
        return -(-len(self.documents) // DOCUMENTS_PER_SEARCH_UNIT)

    def estimate_tokens(self) -> int:
        """The most tokens any upstream counts: Voyage's query tokens times the documents plus
        every document's (voyageai SDK `RerankRequest`), the largest definition."""
        query = estimate_tokens(self.query)
        return sum(query + estimate_tokens(text) for text in self.texts())
