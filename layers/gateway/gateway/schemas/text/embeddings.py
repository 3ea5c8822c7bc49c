"""The request model of `POST /v1/embeddings`, with every rule of the spec."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import AfterValidator, Field, StrictStr
from pydantic_core import PydanticCustomError

from gateway.schemas.text.shapes import Int, ModelName, Open, Str, by_shape
from gateway.tokens import estimate_tokens

EMBEDDING_MAX_INPUT_TOKENS = 8192  # per input, from the spec's Limits
EMBEDDING_MAX_INPUTS = 2048  # inputs per request, as the chat upstream allows


def _text_within_limit(text: str) -> str:
    tokens = estimate_tokens(text)
    if tokens > EMBEDDING_MAX_INPUT_TOKENS:
        raise ValueError(f"must be at most {EMBEDDING_MAX_INPUT_TOKENS} tokens (about {tokens} given)")
    return text


def _tokens_within_limit(tokens: list[int]) -> list[int]:
    if len(tokens) > EMBEDDING_MAX_INPUT_TOKENS:
        raise ValueError(f"must be at most {EMBEDDING_MAX_INPUT_TOKENS} tokens ({len(tokens)} given)")
    return tokens


EmbeddingText = Annotated[StrictStr, Field(min_length=1), AfterValidator(_text_within_limit)]
TokenArray = Annotated[list[Annotated[Int, Field(ge=0)]], Field(min_length=1),
                       AfterValidator(_tokens_within_limit)]


def _choose_embedding_input(value: Any) -> Any:
    if isinstance(value, str):
        return EmbeddingText
    if not isinstance(value, list):
        return None
    if not value:
        raise PydanticCustomError("too_short", "must not be empty")
    many = Field(max_length=EMBEDDING_MAX_INPUTS)
    if all(isinstance(item, str) for item in value):
        return Annotated[list[EmbeddingText], many]
    if all(isinstance(item, int) and not isinstance(item, bool) for item in value):
        return TokenArray
    if all(isinstance(item, list) for item in value):
        return Annotated[list[TokenArray], many]
    return None


EmbeddingInput = Annotated[Any, by_shape(
    _choose_embedding_input, "must be a string, an array of strings, a token array or an array of token arrays")]


class EmbeddingsRequest(Open):
    model: ModelName
    input: EmbeddingInput
    encoding_format: Literal["float", "base64"] | None = None
    dimensions: Annotated[Int, Field(ge=1)] | None = None
    user: Str | None = None

    def inputs(self) -> list[str | list[int]]:
        """Each input on its own: a text or a token array."""
        value = self.input
        if isinstance(value, str) or (value and isinstance(value[0], int)):
            return [value]
        return list(value)

    def token_counts(self) -> list[int]:
        """Tokens per input: exact for token arrays, `estimate_tokens` for texts."""
        return [estimate_tokens(item) if isinstance(item, str) else len(item) for item in self.inputs()]

    def estimate_input_tokens(self) -> int:
        return sum(self.token_counts())
