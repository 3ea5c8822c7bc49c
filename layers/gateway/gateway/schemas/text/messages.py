"""The request model of `POST /v1/messages` (and its `count_tokens`), with every rule of the spec."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field, ValidationInfo, field_validator, model_validator

from gateway.schemas.shared import Base64, HttpUrl
from gateway.schemas.text.shapes import (
    MAX_OUTPUT_TOKENS,
    Bool,
    Int,
    ModelName,
    NonEmptyStr,
    Num,
    Open,
    OutputTokens,
    Str,
    by_shape,
    by_type,
    prompt_tokens,
    string_or_list,
)

# The messages wire format requires max_tokens; the spec makes it optional, so the gateway fills
# this in when a client leaves it out (plus the thinking budget when thinking is enabled, so the
# "budget below max_tokens" rule still leaves room for the answer).
DEFAULT_MAX_TOKENS = 4096


class CacheControl(Open):
    type: Literal["ephemeral"] | None = None


class MessagesTextPart(Open):
    type: Literal["text"]
    text: Str
    cache_control: CacheControl | None = None


# The spec marks a source's data, media_type and url optional, but a source without them
# carries no media and every upstream refuses it, so they are required here with a clear message.
class Base64Source(Open):
    type: Literal["base64"]
    data: Base64
    media_type: NonEmptyStr


class UrlSource(Open):
    type: Literal["url"]
    url: HttpUrl


class OtherSource(Open):
    # Upstream-specific sources (an uploaded file id, plain text for a document) pass through.
    type: Literal["file", "text", "content"]


MediaSource = Annotated[Any, by_shape(
    by_type({"base64": Base64Source, "url": UrlSource, "file": OtherSource, "text": OtherSource,
              "content": OtherSource}),
    "must be a source object")]


class MessagesMediaPart(Open):
    type: Literal["image", "document"]
    source: MediaSource
    cache_control: CacheControl | None = None


class MessagesToolUsePart(Open):
    type: Literal["tool_use"]
    id: NonEmptyStr
    name: NonEmptyStr
    input: dict[str, Any]


class MessagesToolResultPart(Open):
    type: Literal["tool_result"]
    tool_use_id: NonEmptyStr


class MessagesThinkingPart(Open):
    type: Literal["thinking"]
    thinking: Str


class MessagesOtherPart(Open):
    # Newer part types (redacted_thinking, server tool results, search results...) are the
    # upstream's business: we check only that they name their type.
    type: NonEmptyStr


MessagesPart = Annotated[Any, by_shape(
    by_type({"text": MessagesTextPart, "image": MessagesMediaPart, "document": MessagesMediaPart,
              "tool_use": MessagesToolUsePart, "tool_result": MessagesToolResultPart,
              "thinking": MessagesThinkingPart}, MessagesOtherPart),
    "must be a content part object with a type")]


MessagesContent = Annotated[Any, by_shape(string_or_list(MessagesPart),
                                           "must be a string or an array of content parts")]
MessagesSystem = Annotated[Any, by_shape(string_or_list(MessagesTextPart),
                                          "must be a string or an array of text parts")]


class MessagesMessage(Open):
    role: Literal["user", "assistant"]
    content: MessagesContent


class MessagesTool(Open):
    name: NonEmptyStr
    input_schema: dict[str, Any] | None = None


class Thinking(Open):
    type: Literal["enabled"]
    budget_tokens: Annotated[Int, Field(gt=1024, lt=MAX_OUTPUT_TOKENS)]


class MessagesRequest(Open):
    model: ModelName
    messages: Annotated[list[MessagesMessage], Field(min_length=1)]
    system: MessagesSystem | None = None
    max_tokens: OutputTokens | None = None
    temperature: Annotated[Num, Field(ge=0, le=2)] | None = None
    top_p: Annotated[Num, Field(ge=0, le=1)] | None = None
    top_k: Annotated[Int, Field(ge=0)] | None = None
    stream: Bool | None = None
    stop_sequences: list[Str] | None = None
    tools: list[MessagesTool] | None = None
    thinking: Thinking | None = None

    @field_validator("top_p")
    @classmethod
    def _not_with_temperature(cls, value: float | None, info: ValidationInfo) -> float | None:
        # The spec says to change top_p or temperature, not both; the upstream refuses both on
        # its newer models, so we reject the pair up front rather than fail on some channels only.
        if value is not None and info.data.get("temperature") is not None:
            raise ValueError("set temperature or top_p, not both")
        return value

    @field_validator("thinking")
    @classmethod
    def _budget_below_max_tokens(cls, value: Thinking | None, info: ValidationInfo) -> Thinking | None:
        max_tokens = info.data.get("max_tokens")
        if value is not None and max_tokens is not None and value.budget_tokens >= max_tokens:
            raise ValueError(f"budget_tokens must be smaller than max_tokens ({max_tokens})")
        return value

    @model_validator(mode="after")
    def _default_max_tokens(self) -> MessagesRequest:
        if self.max_tokens is None:
            # Assigning marks the field as set, so it is part of the payload sent upstream.
            budget = self.thinking.budget_tokens if self.thinking else 0
            self.max_tokens = min(DEFAULT_MAX_TOKENS + budget, MAX_OUTPUT_TOKENS)
        return self

    def estimate_input_tokens(self) -> int:
        return prompt_tokens(self, ("system", "messages", "tools"))

    def output_limit(self) -> int:
        return self.max_tokens or DEFAULT_MAX_TOKENS

    def choices(self) -> int:
        return 1
