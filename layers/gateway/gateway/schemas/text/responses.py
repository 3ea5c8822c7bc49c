"""The request model of `POST /v1/responses` and `/v1/responses/compact`, with every rule of the spec."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field, field_validator, model_validator

from gateway.schemas.shared import HttpOrDataUrl
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


ResponsesPart = Annotated[Any, by_shape(
    by_type({"input_text": ResponsesInputText, "output_text": ResponsesInputText,
              "input_image": ResponsesInputImage}, ResponsesOtherPart),
    "must be a content part object with a type")]
ResponsesContent = Annotated[Any, by_shape(string_or_list(ResponsesPart, non_empty=False),
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


ResponsesItem = Annotated[Any, by_shape(
    _choose_item, "must be an input item object (a message with a role, or an item with a type)")]
ResponsesInput = Annotated[Any, by_shape(string_or_list(ResponsesItem, non_empty=False),
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

    check_stream_options = field_validator("stream_options")(only_when_streaming)

    def estimate_input_tokens(self) -> int:
        return prompt_tokens(self, ("instructions", "input", "tools"))

    def output_limit(self) -> int | None:
        return self.max_output_tokens

    def choices(self) -> int:
        return 1
