"""Request models of the text routes, carrying every rule of the spec for them.

Unknown fields are kept (`extra="allow"`): the gateway relays a request to an upstream that may
know newer fields than we do, and it must not drop them on the way.

Numbers and booleans are strict: `"stream": "true"` or `"max_tokens": 1.5` is an error, as it is
for the upstreams, instead of being silently coerced.

Error messages come out of `gateway.validation.describe` as "<field path>: <rule>". Fields that
may take several shapes (a string or a list of parts) are validated by `_by_shape`, which picks
the one shape that fits so the error names the real field instead of every union member.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import cache
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    PlainValidator,
    Strict,
    StrictBool,
    StrictStr,
    TypeAdapter,
    ValidationInfo,
    create_model,
    field_validator,
    model_validator,
)
from pydantic_core import PydanticCustomError

from gateway.errors import InvalidRequest, NotFound
from gateway.schemas.shared import Base64, HttpOrDataUrl, HttpUrl
from gateway.tokens import estimate_tokens, estimate_value_tokens

# ---------------------------------------------------------------------------------------------
# Building blocks.

Int = Annotated[int, Strict()]
Num = Annotated[float, Strict()]  # strict float still takes an int such as 1
Bool = StrictBool
Str = StrictStr
NonEmptyStr = Annotated[StrictStr, Field(min_length=1)]
# Longer than any model id, short enough to echo in an error.
MAX_MODEL_NAME = 256
ModelName = Annotated[StrictStr, Field(min_length=1, max_length=MAX_MODEL_NAME)]
# An output limit above this is no limit any model has: a 400 naming the field, rather than a
# reservation no quota could hold.
MAX_OUTPUT_TOKENS = 1_000_000
OutputTokens = Annotated[Int, Field(ge=1, le=MAX_OUTPUT_TOKENS)]


class Open(BaseModel):
    """A JSON object whose unknown fields pass through untouched."""

    model_config = ConfigDict(extra="allow")


@cache
def _adapter(target: Any) -> TypeAdapter:
    return TypeAdapter(target)


def _by_shape(choose: Callable[[Any], Any], expected: str) -> PlainValidator:
    """The validator of a field (`Annotated[Any, _by_shape(...)]`) that checks the value against the
    one shape `choose` picks for it.

    `choose` returns a type, or None when nothing fits (then the error says `expected`).
    """

    def validate(value: Any) -> Any:
        target = choose(value)
        if target is None:
            raise PydanticCustomError("invalid_shape", expected)
        return _adapter(target).validate_python(value)

    return PlainValidator(validate)


def _by_type(variants: dict[str, Any], fallback: Any = None, *, what: str = "type") -> Callable[[Any], Any]:
    """A `choose` for objects told apart by their `type` (or `what`) field.

    With no fallback, an unknown value is checked against the list of known ones, so the error
    lands on the field itself (`messages[0].role: Input should be 'user' or ...`).
    """
    if fallback is None:
        known: Any = (Literal[tuple(variants)], ...)  # built from the table, so only pydantic reads it
        fallback = create_model(f"Unknown_{what}", __base__=Open, **{what: known})

    def choose(value: Any) -> Any:
        if not isinstance(value, dict):
            return None
        kind = value.get(what)
        # An unhashable or non-string `type` / `role` gets the fallback, whose Literal names it.
        return variants.get(kind, fallback) if isinstance(kind, str) else fallback

    return choose


def _only_when_streaming(value: Any, info: ValidationInfo) -> Any:
    # The chat and responses upstreams refuse stream_options on a non-streamed request.
    if value is not None and info.data.get("stream") is not True:
        raise ValueError("is only allowed when stream is true")
    return value


def _prompt_tokens(model: BaseModel, fields: tuple[str, ...]) -> int:
    data = model.model_dump(include=set(fields), exclude_none=True)
    return sum(estimate_value_tokens(data[name], name) for name in fields if name in data)


# ---------------------------------------------------------------------------------------------
# POST /v1/messages

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


MediaSource = Annotated[Any, _by_shape(
    _by_type({"base64": Base64Source, "url": UrlSource, "file": OtherSource, "text": OtherSource,
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


MessagesPart = Annotated[Any, _by_shape(
    _by_type({"text": MessagesTextPart, "image": MessagesMediaPart, "document": MessagesMediaPart,
              "tool_use": MessagesToolUsePart, "tool_result": MessagesToolResultPart,
              "thinking": MessagesThinkingPart}, MessagesOtherPart),
    "must be a content part object with a type")]


def _string_or_list(item: Any, *, non_empty: bool = True) -> Callable[[Any], Any]:
    min_length = 1 if non_empty else 0
    parts = Annotated[list[item], Field(min_length=min_length)]
    return lambda value: str if isinstance(value, str) else parts if isinstance(value, list) else None


MessagesContent = Annotated[Any, _by_shape(_string_or_list(MessagesPart),
                                           "must be a string or an array of content parts")]
MessagesSystem = Annotated[Any, _by_shape(_string_or_list(MessagesTextPart),
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
        return _prompt_tokens(self, ("system", "messages", "tools"))

    def output_limit(self) -> int:
        return self.max_tokens or DEFAULT_MAX_TOKENS

    def choices(self) -> int:
        return 1


# ---------------------------------------------------------------------------------------------
# POST /v1beta/models/{model}:generateContent and :streamGenerateContent

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
        return _prompt_tokens(self, ("systemInstruction", "contents", "tools"))

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


# ---------------------------------------------------------------------------------------------
# POST /v1/chat/completions

class ChatTextPart(Open):
    type: Literal["text"]
    text: Str


class ImageUrl(Open):
    url: HttpOrDataUrl
    detail: Literal["auto", "low", "high"] | None = None


class ChatImagePart(Open):
    type: Literal["image_url"]
    image_url: ImageUrl


class InputAudio(Open):
    data: Base64
    format: Literal["wav", "mp3"]


class ChatAudioPart(Open):
    type: Literal["input_audio"]
    input_audio: InputAudio


class ChatFile(Open):
    file_data: Str | None = None
    file_id: Str | None = None
    filename: Str | None = None

    @model_validator(mode="after")
    def _data_or_id(self) -> ChatFile:
        if not self.file_data and not self.file_id:
            raise ValueError("file_data or file_id is required")
        return self


class ChatFilePart(Open):
    type: Literal["file"]
    file: ChatFile


class ChatRefusalPart(Open):
    type: Literal["refusal"]
    refusal: Str


ChatUserPart = Annotated[Any, _by_shape(
    _by_type({"text": ChatTextPart, "image_url": ChatImagePart, "input_audio": ChatAudioPart, "file": ChatFilePart}),
    "must be a content part object")]
ChatAssistantPart = Annotated[Any, _by_shape(_by_type({"text": ChatTextPart, "refusal": ChatRefusalPart}),
                                             "must be a content part object")]

ChatTextContent = Annotated[Any, _by_shape(_string_or_list(ChatTextPart), "must be a string or an array of text parts")]
ChatUserContent = Annotated[Any, _by_shape(_string_or_list(ChatUserPart),
                                           "must be a string or an array of content parts")]
ChatAssistantContent = Annotated[Any, _by_shape(_string_or_list(ChatAssistantPart, non_empty=False),
                                                "must be a string, an array of text parts or null")]


class ToolCallFunction(Open):
    name: NonEmptyStr
    arguments: Str


class ToolCall(Open):
    id: NonEmptyStr
    type: NonEmptyStr = "function"
    function: ToolCallFunction | None = None


class ChatSystemMessage(Open):
    role: Literal["system", "developer"]
    content: ChatTextContent
    name: Str | None = None


class ChatUserMessage(Open):
    role: Literal["user"]
    content: ChatUserContent
    name: Str | None = None


class ChatAssistantMessage(Open):
    role: Literal["assistant"]
    content: ChatAssistantContent | None = None
    tool_calls: list[ToolCall] | None = None
    name: Str | None = None

    @model_validator(mode="after")
    def _says_something(self) -> ChatAssistantMessage:
        # content may be null only when the message carries tool calls (or the legacy forms).
        if self.content is None and not self.tool_calls and not (self.model_extra or {}).get("function_call") \
                and not (self.model_extra or {}).get("audio"):
            raise ValueError("content is required unless tool_calls is given")
        return self


class ChatToolMessage(Open):
    role: Literal["tool"]
    content: ChatTextContent
    tool_call_id: NonEmptyStr


ChatMessage = Annotated[Any, _by_shape(
    _by_type({"system": ChatSystemMessage, "developer": ChatSystemMessage, "user": ChatUserMessage,
              "assistant": ChatAssistantMessage, "tool": ChatToolMessage}, what="role"),
    "must be a message object")]


class FunctionDefinition(Open):
    name: Annotated[StrictStr, Field(pattern=r"^[A-Za-z0-9_-]{1,64}$")]
    description: Str | None = None
    parameters: dict[str, Any] | None = None
    strict: Bool | None = None


class ChatTool(Open):
    type: Literal["function", "custom"]
    function: FunctionDefinition | None = None

    @model_validator(mode="after")
    def _function_tools_define_it(self) -> ChatTool:
        if self.type == "function" and self.function is None:
            raise ValueError("function is required for a function tool")
        return self


ToolChoice = Annotated[Any, _by_shape(
    lambda v: Literal["none", "auto", "required"] if isinstance(v, str) else Open if isinstance(v, dict) else None,
    "must be none, auto, required or an object")]
Stop = Annotated[Any, _by_shape(
    lambda v: Str if isinstance(v, str) else Annotated[list[Str], Field(max_length=4)] if isinstance(v, list) else None,
    "must be a string or an array of at most 4 strings")]


class StreamOptions(Open):
    include_usage: Bool | None = None


class JsonSchemaFormat(Open):
    # `schema` itself passes through as an unknown field: the name would shadow BaseModel.schema.
    name: Annotated[StrictStr, Field(pattern=r"^[A-Za-z0-9_-]{1,64}$")]
    strict: Bool | None = None


class ResponseFormat(Open):
    type: Literal["text", "json_object", "json_schema"]
    json_schema: JsonSchemaFormat | None = None

    @model_validator(mode="after")
    def _schema_given(self) -> ResponseFormat:
        if self.type == "json_schema" and self.json_schema is None:
            raise ValueError("json_schema is required when type is json_schema")
        return self


Penalty = Annotated[Num, Field(ge=-2, le=2)]


class ChatRequest(Open):
    model: ModelName
    messages: Annotated[list[ChatMessage], Field(min_length=1)]
    temperature: Annotated[Num, Field(ge=0, le=2)] | None = None
    top_p: Annotated[Num, Field(ge=0, le=1)] | None = None
    n: Annotated[Int, Field(ge=1, le=128)] | None = None
    max_tokens: OutputTokens | None = None
    max_completion_tokens: OutputTokens | None = None
    stream: Bool | None = None
    stream_options: StreamOptions | None = None
    tools: list[ChatTool] | None = None
    tool_choice: ToolChoice | None = None
    parallel_tool_calls: Bool | None = None
    stop: Stop | None = None
    presence_penalty: Penalty | None = None
    frequency_penalty: Penalty | None = None
    logit_bias: dict[str, Annotated[Num, Field(ge=-100, le=100)]] | None = None
    logprobs: Bool | None = None
    top_logprobs: Annotated[Int, Field(ge=0, le=20)] | None = None
    response_format: ResponseFormat | None = None
    seed: Int | None = None
    user: Str | None = None
    store: Bool | None = None
    metadata: dict[str, Str] | None = None

    check_stream_options = field_validator("stream_options")(_only_when_streaming)

    def estimate_input_tokens(self) -> int:
        return _prompt_tokens(self, ("messages", "tools"))

    def output_limit(self) -> int | None:
        return self.max_completion_tokens or self.max_tokens

    def choices(self) -> int:
        """Choices generated (`n`), each up to the output limit."""
        return self.n or 1


# ---------------------------------------------------------------------------------------------
# POST /v1/responses and /v1/responses/compact

class ResponsesInputText(Open):
    type: Literal["input_text", "output_text"]
    text: Str


class ResponsesInputImage(Open):
    type: Literal["input_image"]
    image_url: HttpOrDataUrl | None = None
    file_id: Str | None = None
    detail: Literal["auto", "low", "high"] | None = None

    @model_validator(mode="after")
    def _url_or_file(self) -> ResponsesInputImage:
        if not self.image_url and not self.file_id:
            raise ValueError("image_url or file_id is required")
        return self


class ResponsesOtherPart(Open):
    type: NonEmptyStr


ResponsesPart = Annotated[Any, _by_shape(
    _by_type({"input_text": ResponsesInputText, "output_text": ResponsesInputText,
              "input_image": ResponsesInputImage}, ResponsesOtherPart),
    "must be a content part object with a type")]
ResponsesContent = Annotated[Any, _by_shape(_string_or_list(ResponsesPart, non_empty=False),
                                            "must be a string or an array of content parts")]


class ResponsesMessage(Open):
    type: Literal["message"] | None = None
    role: Literal["user", "assistant", "system", "developer"]
    content: ResponsesContent


class FunctionCallOutput(Open):
    type: Literal["function_call_output"]
    call_id: NonEmptyStr
    output: Any


class FunctionCallItem(Open):
    type: Literal["function_call"]
    call_id: NonEmptyStr
    name: NonEmptyStr
    arguments: Str


class ResponsesOtherItem(Open):
    type: NonEmptyStr


def _choose_item(value: Any) -> Any:
    if not isinstance(value, dict):
        return None
    if "role" in value and value.get("type") in (None, "message"):
        return ResponsesMessage
    items: dict[Any, Any] = {"function_call_output": FunctionCallOutput, "function_call": FunctionCallItem}
    return items.get(value.get("type"), ResponsesOtherItem)


ResponsesItem = Annotated[Any, _by_shape(
    _choose_item, "must be an input item object (a message with a role, or an item with a type)")]
ResponsesInput = Annotated[Any, _by_shape(_string_or_list(ResponsesItem, non_empty=False),
                                          "must be a string or an array of input items")]


class ResponsesTool(Open):
    type: NonEmptyStr
    name: Str | None = None

    @model_validator(mode="after")
    def _function_has_name(self) -> ResponsesTool:
        if self.type == "function" and not self.name:
            raise ValueError("name is required for a function tool")
        return self


class ResponsesStreamOptions(Open):
    include_obfuscation: Bool | None = None


class ResponsesRequest(Open):
    model: ModelName
    # Absent is allowed (previous_response_id may carry the conversation); null is not a value.
    input: ResponsesInput = None
    instructions: Str | None = None
    max_output_tokens: OutputTokens | None = None
    temperature: Annotated[Num, Field(ge=0, le=2)] | None = None
    top_p: Annotated[Num, Field(ge=0, le=1)] | None = None
    stream: Bool | None = None
    stream_options: ResponsesStreamOptions | None = None
    tools: list[ResponsesTool] | None = None
    tool_choice: ToolChoice | None = None
    parallel_tool_calls: Bool | None = None
    previous_response_id: NonEmptyStr | None = None
    store: Bool | None = None
    background: Bool | None = None
    metadata: dict[str, Str] | None = None
    include: list[Str] | None = None
    truncation: Literal["auto", "disabled"] | None = None
    top_logprobs: Annotated[Int, Field(ge=0, le=20)] | None = None
    max_tool_calls: Annotated[Int, Field(ge=1)] | None = None
    user: Str | None = None

    check_stream_options = field_validator("stream_options")(_only_when_streaming)

    def estimate_input_tokens(self) -> int:
        return _prompt_tokens(self, ("instructions", "input", "tools"))

    def output_limit(self) -> int | None:
        return self.max_output_tokens

    def choices(self) -> int:
        return 1


# ---------------------------------------------------------------------------------------------
# POST /v1/embeddings

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


EmbeddingInput = Annotated[Any, _by_shape(
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
