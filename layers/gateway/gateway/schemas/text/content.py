"""The request models of `POST /v1beta/models/{model}:{action}` (generateContent, streamGenerateContent,
countTokens, embedContent, batchEmbedContents), with every rule of the spec; `parse_model_action`
reads the model and the action from the path."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, Field, ValidationInfo, field_validator, model_validator

from gateway.errors import InvalidRequest, NotFound
from gateway.schemas.shared import Base64
from gateway.schemas.text.shapes import (
    MAX_MODEL_NAME,
    MAX_OUTPUT_TOKENS,
    Bool,
    Int,
    ModelName,
    NonEmptyStr,
    Num,
    Open,
    OutputTokens,
    Str,
    prompt_tokens,
)


class GeminiObject(Open):
    """The upstream's JSON parser takes snake_case names too; we fold them to camelCase so the
    rules below see them (and the upstream gets the documented spelling)."""

    @model_validator(mode="before")
    @classmethod
    def _camel_case(cls, data: Any) -> Any:
        if not isinstance(data, dict) or not any("_" in key for key in data):
            return data
        out = {}
        for key, value in data.items():
            head, *rest = key.split("_")
            camel = head + "".join(word[:1].upper() + word[1:] for word in rest)
            out[camel if rest and camel in cls.model_fields and camel not in data else key] = value
        return out


class InlineData(GeminiObject):
    mimeType: NonEmptyStr
    data: Base64


class FileData(GeminiObject):
    fileUri: NonEmptyStr
    mimeType: Str | None = None


class FunctionCall(GeminiObject):
    name: NonEmptyStr
    args: dict[str, Any] | None = None


class FunctionResponse(GeminiObject):
    name: NonEmptyStr
    response: dict[str, Any] | None = None


_PART_DATA = ("text", "inlineData", "fileData", "functionCall", "functionResponse",
              "executableCode", "codeExecutionResult")


class GeminiPart(GeminiObject):
    text: Str | None = None
    inlineData: InlineData | None = None
    fileData: FileData | None = None
    functionCall: FunctionCall | None = None
    functionResponse: FunctionResponse | None = None
    executableCode: dict[str, Any] | None = None
    codeExecutionResult: dict[str, Any] | None = None
    thought: Bool | None = None

    @model_validator(mode="after")
    def _exactly_one_kind(self) -> GeminiPart:
        present = [name for name in _PART_DATA if getattr(self, name) is not None]
        if len(present) != 1:
            raise ValueError(f"a part holds exactly one of {', '.join(_PART_DATA)}"
                             + (f" (got {', '.join(present)})" if present else ""))
        return self


class GeminiContent(GeminiObject):
    role: Literal["user", "model"]
    parts: Annotated[list[GeminiPart], Field(min_length=1)]


_THINKING_LEVELS = ("minimal", "low", "medium", "high")


def _thinking_level(value: str) -> str:
    # The spec lists lower case; the upstream's own enum (and its SDK) uses upper case.
    if value.lower() not in _THINKING_LEVELS:
        raise ValueError(f"must be one of {', '.join(_THINKING_LEVELS)}")
    return value


class ThinkingConfig(GeminiObject):
    thinkingLevel: Annotated[Str, AfterValidator(_thinking_level)] | None = None
    thinkingBudget: Annotated[Int, Field(ge=-1, le=MAX_OUTPUT_TOKENS)] | None = None  # -1 lets the model decide
    includeThoughts: Bool | None = None


class GenerationConfig(GeminiObject):
    temperature: Annotated[Num, Field(ge=0, le=2)] | None = None
    topP: Annotated[Num, Field(ge=0, le=1)] | None = None
    topK: Annotated[Int, Field(ge=0)] | None = None
    maxOutputTokens: OutputTokens | None = None
    candidateCount: Annotated[Int, Field(ge=1)] | None = None
    stopSequences: list[Str] | None = None
    responseMimeType: Str | None = None
    responseSchema: dict[str, Any] | None = None
    responseJsonSchema: dict[str, Any] | None = None
    thinkingConfig: ThinkingConfig | None = None

    # A schema only means something for a JSON answer; the upstream rejects it otherwise, so we
    # say so up front. (responseSchema also serves the upstream's enum mode, text/x.enum.)
    @field_validator("responseJsonSchema")
    @classmethod
    def _json_schema_needs_json(cls, value: Any, info: ValidationInfo) -> Any:
        if value is not None and info.data.get("responseMimeType") != "application/json":
            raise ValueError("requires responseMimeType application/json")
        return value

    @field_validator("responseSchema")
    @classmethod
    def _schema_needs_json(cls, value: Any, info: ValidationInfo) -> Any:
        if value is not None and info.data.get("responseMimeType") not in ("application/json", "text/x.enum"):
            raise ValueError("requires responseMimeType application/json")
        return value


class SystemTextPart(GeminiObject):
    text: Str


class SystemInstruction(GeminiObject):
    parts: Annotated[list[SystemTextPart], Field(min_length=1)]


class SafetySetting(GeminiObject):
    category: NonEmptyStr
    threshold: NonEmptyStr


class ContentRequest(GeminiObject):
    contents: Annotated[list[GeminiContent], Field(min_length=1)]
    generationConfig: GenerationConfig | None = None
    systemInstruction: SystemInstruction | None = None
    safetySettings: list[SafetySetting] | None = None
    tools: list[Open] | None = None

    def estimate_input_tokens(self) -> int:
        return prompt_tokens(self, ("systemInstruction", "contents", "tools"))

    def output_limit(self) -> int | None:
        config = self.generationConfig
        return config.maxOutputTokens if config else None

    def choices(self) -> int:
        """Candidates generated, each up to the output limit."""
        config = self.generationConfig
        return (config.candidateCount if config else None) or 1


class CountTokensRequest(GeminiObject):
    contents: Annotated[list[GeminiContent], Field(min_length=1)] | None = None
    generateContentRequest: ContentRequest | None = None

    @model_validator(mode="after")
    def _something_to_count(self) -> CountTokensRequest:
        if self.contents is None and self.generateContentRequest is None:
            raise ValueError("contents or generateContentRequest is required")
        return self


class EmbedContent(GeminiObject):
    parts: Annotated[list[GeminiPart], Field(min_length=1)]


class EmbedContentRequest(GeminiObject):
    # batchEmbedContents names the model in each request (the gateway replaces it upstream).
    model: ModelName | None = None
    content: EmbedContent
    taskType: Str | None = None
    outputDimensionality: Annotated[Int, Field(ge=1)] | None = None


class BatchEmbedContentsRequest(GeminiObject):
    # The upstream's SDK embeds through this action, even for a single text.
    requests: Annotated[list[EmbedContentRequest], Field(min_length=1, max_length=100)]


# Actions after the colon of /v1beta/models/{model}:{action}, with the body model of each.
CONTENT_ACTIONS: dict[str, type[BaseModel]] = {
    "generateContent": ContentRequest,
    "streamGenerateContent": ContentRequest,
    "countTokens": CountTokensRequest,
    "embedContent": EmbedContentRequest,
    "batchEmbedContents": BatchEmbedContentsRequest,
}


def parse_model_action(proxy: str) -> tuple[str, str]:
    """`m-small:streamGenerateContent` (the `{proxy+}` of /v1beta/models/) -> (model, action)."""
    model, colon, action = proxy.rpartition(":")
    if not colon:
        raise NotFound(f"models/{proxy}: no action given; use one of :{', :'.join(CONTENT_ACTIONS)}")
    if not model or "/" in model:
        raise InvalidRequest("model: must be a model name", param="model")
    if len(model) > MAX_MODEL_NAME:
        raise InvalidRequest(f"model: must be at most {MAX_MODEL_NAME} characters", param="model")
    if action not in CONTENT_ACTIONS:
        raise NotFound(f"models/{model}:{action}: unknown action; use one of :{', :'.join(CONTENT_ACTIONS)}")
    return model, action
