"""The request model of `POST /v1/chat/completions`, with every rule of the spec."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field, StrictStr, field_validator, model_validator

from gateway.schemas.shared import Base64, HttpOrDataUrl
from gateway.schemas.text.shapes import (
    Bool,
    Int,
    ModelName,
    NonEmptyStr,
    Num,
    Open,
    OutputTokens,
    Str,
    ToolChoice,
    by_shape,
    by_type,
    only_when_streaming,
    prompt_tokens,
    string_or_list,
)


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


ChatUserPart = Annotated[Any, by_shape(
    by_type({"text": ChatTextPart, "image_url": ChatImagePart, "input_audio": ChatAudioPart, "file": ChatFilePart}),
    "must be a content part object")]
ChatAssistantPart = Annotated[Any, by_shape(by_type({"text": ChatTextPart, "refusal": ChatRefusalPart}),
                                             "must be a content part object")]

ChatTextContent = Annotated[Any, by_shape(string_or_list(ChatTextPart), "must be a string or an array of text parts")]
ChatUserContent = Annotated[Any, by_shape(string_or_list(ChatUserPart),
                                           "must be a string or an array of content parts")]
ChatAssistantContent = Annotated[Any, by_shape(string_or_list(ChatAssistantPart, non_empty=False),
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


ChatMessage = Annotated[Any, by_shape(
    by_type({"system": ChatSystemMessage, "developer": ChatSystemMessage, "user": ChatUserMessage,
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


Stop = Annotated[Any, by_shape(
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

    check_stream_options = field_validator("stream_options")(only_when_streaming)

    def estimate_input_tokens(self) -> int:
        return prompt_tokens(self, ("messages", "tools"))

    def output_limit(self) -> int | None:
        return self.max_completion_tokens or self.max_tokens

    def choices(self) -> int:
        """Choices generated (`n`), each up to the output limit."""
        return self.n or 1
