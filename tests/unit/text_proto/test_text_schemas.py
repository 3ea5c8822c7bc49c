"""Every rule of the text request models: a bad value is rejected naming the field, a good one
passes, and unknown fields survive for the upstream."""

import copy

import pytest

from gateway.errors import InvalidRequest, NotFound
from gateway.schemas.text.chat import ChatRequest
from gateway.schemas.text.content import ContentRequest, CountTokensRequest, EmbedContentRequest, parse_model_action
from gateway.schemas.text.embeddings import EMBEDDING_MAX_INPUT_TOKENS, EmbeddingsRequest
from gateway.schemas.text.messages import DEFAULT_MAX_TOKENS, MessagesRequest
from gateway.schemas.text.responses import ResponsesRequest
from gateway.tokens import MEDIA_TOKENS, estimate_tokens
from gateway.validation import parse_model

PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR4nGNgYGD4DwABBAEAHnOcQAAAAABJRU5ErkJggg=="

MESSAGES = {"model": "m-small", "messages": [{"role": "user", "content": "Hello"}]}
CONTENT = {"contents": [{"role": "user", "parts": [{"text": "Hello"}]}]}
CHAT = {"model": "m-small", "messages": [{"role": "user", "content": "Hello"}]}
RESPONSES = {"model": "m-small", "input": "Hello"}
EMBEDDINGS = {"model": "e-small", "input": "Hello"}


def with_(base, path, value):
    """A copy of `base` with the value at dotted `path` set (a `del` value removes it)."""
    data = copy.deepcopy(base)
    keys = [int(k) if k.isdigit() else k for k in path.split(".")]
    target = data
    for key in keys[:-1]:
        target = target[key]
    if value == "del":
        del target[keys[-1]]
    else:
        target[keys[-1]] = value
    return data


def rejected(model, data):
    with pytest.raises(InvalidRequest) as caught:
        parse_model(model, data)
    return caught.value


BAD = [
    # --- messages ---
    (MessagesRequest, MESSAGES, "model", "del", "model: is required"),
    (MessagesRequest, MESSAGES, "model", "", "model:"),
    (MessagesRequest, MESSAGES, "messages", [], "messages:"),
    (MessagesRequest, MESSAGES, "messages.0.role", "system", "messages[0].role:"),
    (MessagesRequest, MESSAGES, "messages.0.content", "del", "messages[0].content: is required"),
    (MessagesRequest, MESSAGES, "messages.0.content", 42, "messages[0].content: must be a string or an array"),
    (MessagesRequest, MESSAGES, "messages.0.content", [], "messages[0].content:"),
    (MessagesRequest, MESSAGES, "messages.0.content", [{"type": "text"}], "messages[0].content[0].text: is required"),
    (MessagesRequest, MESSAGES, "messages.0.content", [{"text": "x"}], "messages[0].content[0].type: is required"),
    (MessagesRequest, MESSAGES, "messages.0.content", [{"type": "image"}],
     "messages[0].content[0].source: is required"),
    (MessagesRequest, MESSAGES, "messages.0.content",
     [{"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "not base64!"}}],
     "messages[0].content[0].source.data: must be non-empty base64"),
    (MessagesRequest, MESSAGES, "messages.0.content",
     [{"type": "document", "source": {"type": "base64", "data": PNG}}],
     "messages[0].content[0].source.media_type: is required"),
    (MessagesRequest, MESSAGES, "messages.0.content",
     [{"type": "image", "source": {"type": "url", "url": "ftp://x"}}],
     "messages[0].content[0].source.url: must be an http"),
    (MessagesRequest, MESSAGES, "messages.0.content",
     [{"type": "image", "source": {"type": "s3", "url": "https://x"}}], "messages[0].content[0].source.type:"),
    (MessagesRequest, MESSAGES, "messages.0.content",
     [{"type": "image", "source": {"type": "url", "url": "https://x/a.png"}, "cache_control": {"type": "forever"}}],
     "messages[0].content[0].cache_control.type:"),
    (MessagesRequest, MESSAGES, "messages.0.content", [{"type": "tool_use", "id": "t1", "name": "f"}],
     "messages[0].content[0].input: is required"),
    (MessagesRequest, MESSAGES, "messages.0.content", [{"type": "tool_result"}],
     "messages[0].content[0].tool_use_id: is required"),
    (MessagesRequest, MESSAGES, "system", [{"type": "image"}], "system[0].type:"),
    (MessagesRequest, MESSAGES, "system", 3, "system: must be a string or an array of text parts"),
    (MessagesRequest, MESSAGES, "temperature", 2.5, "temperature: Input should be less than or equal to 2"),
    (MessagesRequest, MESSAGES, "temperature", -0.1, "temperature: Input should be greater than or equal to 0"),
    (MessagesRequest, MESSAGES, "temperature", "1", "temperature:"),
    (MessagesRequest, MESSAGES, "top_p", 1.5, "top_p: Input should be less than or equal to 1"),
    (MessagesRequest, MESSAGES, "top_k", -1, "top_k: Input should be greater than or equal to 0"),
    (MessagesRequest, MESSAGES, "top_k", 1.5, "top_k:"),
    (MessagesRequest, MESSAGES, "max_tokens", 0, "max_tokens: Input should be greater than or equal to 1"),
    (MessagesRequest, MESSAGES, "max_tokens", "100", "max_tokens:"),
    (MessagesRequest, MESSAGES, "stream", "yes", "stream: Input should be a valid boolean"),
    (MessagesRequest, MESSAGES, "stop_sequences", "END", "stop_sequences:"),
    (MessagesRequest, MESSAGES, "tools", {"name": "f"}, "tools:"),
    (MessagesRequest, MESSAGES, "tools", [{"input_schema": {}}], "tools[0].name: is required"),
    (MessagesRequest, MESSAGES, "thinking", {"type": "disabled", "budget_tokens": 2000}, "thinking.type:"),
    (MessagesRequest, MESSAGES, "thinking", {"type": "enabled"}, "thinking.budget_tokens: is required"),
    (MessagesRequest, MESSAGES, "thinking", {"type": "enabled", "budget_tokens": 1024},
     "thinking.budget_tokens: Input should be greater than 1024"),
    (MessagesRequest, {**MESSAGES, "max_tokens": 3000}, "thinking", {"type": "enabled", "budget_tokens": 3000},
     "thinking: budget_tokens must be smaller than max_tokens (3000)"),
    (MessagesRequest, {**MESSAGES, "temperature": 0.5}, "top_p", 0.9, "top_p: set temperature or top_p, not both"),
    # --- content generation ---
    (ContentRequest, CONTENT, "contents", "del", "contents: is required"),
    (ContentRequest, CONTENT, "contents", [], "contents:"),
    (ContentRequest, CONTENT, "contents.0.role", "assistant", "contents[0].role:"),
    (ContentRequest, CONTENT, "contents.0.role", "del", "contents[0].role: is required"),
    (ContentRequest, CONTENT, "contents.0.parts", "del", "contents[0].parts: is required"),
    (ContentRequest, CONTENT, "contents.0.parts", [], "contents[0].parts:"),
    (ContentRequest, CONTENT, "contents.0.parts", [{}], "contents[0].parts[0]: a part holds exactly one of"),
    (ContentRequest, CONTENT, "contents.0.parts", [{"text": "a", "inlineData": {"mimeType": "image/png", "data": PNG}}],
     "contents[0].parts[0]: a part holds exactly one of"),
    (ContentRequest, CONTENT, "contents.0.parts", [{"inlineData": {"data": PNG}}],
     "contents[0].parts[0].inlineData.mimeType: is required"),
    (ContentRequest, CONTENT, "contents.0.parts", [{"inlineData": {"mimeType": "image/png"}}],
     "contents[0].parts[0].inlineData.data: is required"),
    (ContentRequest, CONTENT, "contents.0.parts", [{"inlineData": {"mimeType": "image/png", "data": "%%%"}}],
     "contents[0].parts[0].inlineData.data: must be non-empty base64"),
    (ContentRequest, CONTENT, "contents.0.parts", [{"functionCall": {"args": {}}}],
     "contents[0].parts[0].functionCall.name: is required"),
    (ContentRequest, CONTENT, "generationConfig", {"temperature": 2.1}, "generationConfig.temperature:"),
    (ContentRequest, CONTENT, "generationConfig", {"topP": 1.1}, "generationConfig.topP:"),
    (ContentRequest, CONTENT, "generationConfig", {"topK": 2.5}, "generationConfig.topK:"),
    (ContentRequest, CONTENT, "generationConfig", {"maxOutputTokens": 0}, "generationConfig.maxOutputTokens:"),
    (ContentRequest, CONTENT, "generationConfig", {"candidateCount": 0}, "generationConfig.candidateCount:"),
    (ContentRequest, CONTENT, "generationConfig", {"stopSequences": "x"}, "generationConfig.stopSequences:"),
    (ContentRequest, CONTENT, "generationConfig", {"responseJsonSchema": {"type": "object"}},
     "generationConfig.responseJsonSchema: requires responseMimeType application/json"),
    (ContentRequest, CONTENT, "generationConfig",
     {"responseMimeType": "text/plain", "responseSchema": {"type": "OBJECT"}},
     "generationConfig.responseSchema: requires responseMimeType application/json"),
    (ContentRequest, CONTENT, "generationConfig", {"responseMimeType": "application/json", "responseJsonSchema": "x"},
     "generationConfig.responseJsonSchema:"),
    (ContentRequest, CONTENT, "generationConfig", {"thinkingConfig": {"thinkingLevel": "extreme"}},
     "generationConfig.thinkingConfig.thinkingLevel: must be one of minimal, low, medium, high"),
    (ContentRequest, CONTENT, "generationConfig", {"thinkingConfig": {"thinkingBudget": "lots"}},
     "generationConfig.thinkingConfig.thinkingBudget:"),
    (ContentRequest, CONTENT, "systemInstruction", {"parts": [{}]}, "systemInstruction.parts[0].text: is required"),
    (ContentRequest, CONTENT, "systemInstruction", {}, "systemInstruction.parts: is required"),
    (ContentRequest, CONTENT, "safetySettings", [{"category": "HARM_CATEGORY_HARASSMENT"}],
     "safetySettings[0].threshold: is required"),
    (ContentRequest, CONTENT, "safetySettings", [{"threshold": "BLOCK_NONE"}],
     "safetySettings[0].category: is required"),
    (ContentRequest, CONTENT, "tools", {"functionDeclarations": []}, "tools:"),
    # --- chat completions ---
    (ChatRequest, CHAT, "model", "del", "model: is required"),
    (ChatRequest, CHAT, "messages", [], "messages:"),
    (ChatRequest, CHAT, "messages.0.role", "robot", "messages[0].role:"),
    (ChatRequest, CHAT, "messages.0", "hello", "messages[0]: must be a message object"),
    (ChatRequest, CHAT, "messages.0.content", "del", "messages[0].content: is required"),
    (ChatRequest, CHAT, "messages.0.content", None, "messages[0].content:"),
    (ChatRequest, CHAT, "messages.0.content", [{"type": "video"}], "messages[0].content[0].type:"),
    (ChatRequest, CHAT, "messages.0.content", [{"type": "image_url", "image_url": {"url": "file:///etc/passwd"}}],
     "messages[0].content[0].image_url.url: must be an http(s) URL or a data: URL"),
    (ChatRequest, CHAT, "messages.0.content",
     [{"type": "image_url", "image_url": {"url": "https://x/a.png", "detail": "ultra"}}],
     "messages[0].content[0].image_url.detail:"),
    (ChatRequest, CHAT, "messages.0.content", [{"type": "input_audio", "input_audio": {"data": PNG, "format": "ogg"}}],
     "messages[0].content[0].input_audio.format:"),
    (ChatRequest, CHAT, "messages.0.content", [{"type": "file", "file": {"filename": "a.pdf"}}],
     "messages[0].content[0].file: file_data or file_id is required"),
    (ChatRequest, CHAT, "messages.0", {"role": "system", "content": [{"type": "image_url"}]},
     "messages[0].content[0].type:"),
    (ChatRequest, CHAT, "messages.0", {"role": "assistant", "content": None},
     "messages[0]: content is required unless tool_calls is given"),
    (ChatRequest, CHAT, "messages.0",
     {"role": "assistant", "content": None, "tool_calls": [{"id": "c1", "function": {"name": "f"}}]},
     "messages[0].tool_calls[0].function.arguments: is required"),
    (ChatRequest, CHAT, "messages.0", {"role": "tool", "content": "42"}, "messages[0].tool_call_id: is required"),
    (ChatRequest, CHAT, "temperature", 3, "temperature: Input should be less than or equal to 2"),
    (ChatRequest, CHAT, "top_p", -0.5, "top_p:"),
    (ChatRequest, CHAT, "n", 0, "n: Input should be greater than or equal to 1"),
    (ChatRequest, CHAT, "n", 129, "n: Input should be less than or equal to 128"),
    (ChatRequest, CHAT, "max_tokens", 0, "max_tokens:"),
    (ChatRequest, CHAT, "max_completion_tokens", -5, "max_completion_tokens:"),
    (ChatRequest, CHAT, "stream", 1, "stream: Input should be a valid boolean"),
    (ChatRequest, CHAT, "stream_options", {"include_usage": True},
     "stream_options: is only allowed when stream is true"),
    (ChatRequest, {**CHAT, "stream": True}, "stream_options", {"include_usage": "yes"},
     "stream_options.include_usage:"),
    (ChatRequest, CHAT, "tools", [{"type": "function"}], "tools[0]: function is required for a function tool"),
    (ChatRequest, CHAT, "tools", [{"type": "function", "function": {"name": "bad name!"}}], "tools[0].function.name:"),
    (ChatRequest, CHAT, "tools", [{"type": "retrieval"}], "tools[0].type:"),
    (ChatRequest, CHAT, "tool_choice", "sometimes", "tool_choice:"),
    (ChatRequest, CHAT, "stop", ["a", "b", "c", "d", "e"], "stop:"),
    (ChatRequest, CHAT, "stop", 5, "stop: must be a string or an array of at most 4 strings"),
    (ChatRequest, CHAT, "presence_penalty", 2.5, "presence_penalty:"),
    (ChatRequest, CHAT, "frequency_penalty", -2.5, "frequency_penalty:"),
    (ChatRequest, CHAT, "logit_bias", {"50256": 101}, "logit_bias.50256:"),
    (ChatRequest, CHAT, "top_logprobs", 21, "top_logprobs:"),
    (ChatRequest, CHAT, "response_format", {"type": "yaml"}, "response_format.type:"),
    (ChatRequest, CHAT, "response_format", {"type": "json_schema"},
     "response_format: json_schema is required when type is json_schema"),
    (ChatRequest, CHAT, "seed", "7", "seed:"),
    (ChatRequest, CHAT, "user", 7, "user:"),
    # --- responses ---
    (ResponsesRequest, RESPONSES, "model", "del", "model: is required"),
    (ResponsesRequest, RESPONSES, "input", 5, "input: must be a string or an array of input items"),
    (ResponsesRequest, RESPONSES, "input", [{"role": "robot", "content": "x"}], "input[0].role:"),
    (ResponsesRequest, RESPONSES, "input", [{"role": "user"}], "input[0].content: is required"),
    (ResponsesRequest, RESPONSES, "input", [{"role": "user", "content": [{"type": "input_text"}]}],
     "input[0].content[0].text: is required"),
    (ResponsesRequest, RESPONSES, "input", [{"role": "user", "content": [{"type": "input_image"}]}],
     "input[0].content[0]: image_url or file_id is required"),
    (ResponsesRequest, RESPONSES, "input", [{"type": "function_call_output", "output": "1"}],
     "input[0].call_id: is required"),
    (ResponsesRequest, RESPONSES, "input", [{"content": "x"}], "input[0].type: is required"),
    (ResponsesRequest, RESPONSES, "input", ["hello"], "input[0]: must be an input item object"),
    (ResponsesRequest, RESPONSES, "instructions", ["x"], "instructions:"),
    (ResponsesRequest, RESPONSES, "max_output_tokens", 0, "max_output_tokens:"),
    (ResponsesRequest, RESPONSES, "temperature", 2.01, "temperature:"),
    (ResponsesRequest, RESPONSES, "top_p", 2, "top_p:"),
    (ResponsesRequest, RESPONSES, "stream", "true", "stream:"),
    (ResponsesRequest, RESPONSES, "stream_options", {"include_obfuscation": False}, "stream_options: is only allowed"),
    (ResponsesRequest, RESPONSES, "tools", [{"name": "f"}], "tools[0].type: is required"),
    (ResponsesRequest, RESPONSES, "tools", [{"type": "function"}], "tools[0]: name is required for a function tool"),
    (ResponsesRequest, RESPONSES, "previous_response_id", "", "previous_response_id:"),
    (ResponsesRequest, RESPONSES, "truncation", "sometimes", "truncation:"),
    # --- embeddings ---
    (EmbeddingsRequest, EMBEDDINGS, "model", "del", "model: is required"),
    (EmbeddingsRequest, EMBEDDINGS, "input", "del", "input: is required"),
    (EmbeddingsRequest, EMBEDDINGS, "input", "", "input:"),
    (EmbeddingsRequest, EMBEDDINGS, "input", [], "input: must not be empty"),
    (EmbeddingsRequest, EMBEDDINGS, "input", ["a", ""], "input[1]:"),
    (EmbeddingsRequest, EMBEDDINGS, "input", ["a", 1], "input: must be a string, an array of strings, a token array"),
    (EmbeddingsRequest, EMBEDDINGS, "input", [1, -2], "input[1]:"),
    (EmbeddingsRequest, EMBEDDINGS, "input", [[1, 2], []], "input[1]:"),
    (EmbeddingsRequest, EMBEDDINGS, "input", {"text": "x"}, "input: must be a string"),
    (EmbeddingsRequest, EMBEDDINGS, "input", list(range(EMBEDDING_MAX_INPUT_TOKENS + 1)),
     "input: must be at most 8192 tokens (8193 given)"),
    (EmbeddingsRequest, EMBEDDINGS, "input", [[1], list(range(EMBEDDING_MAX_INPUT_TOKENS + 1))],
     "input[1]: must be at most 8192 tokens"),
    (EmbeddingsRequest, EMBEDDINGS, "input", ["ok", "x " * 8193], "input[1]: must be at most 8192 tokens"),
    (EmbeddingsRequest, EMBEDDINGS, "input", ["a"] * 2049, "input:"),
    (EmbeddingsRequest, EMBEDDINGS, "encoding_format", "int8", "encoding_format:"),
    (EmbeddingsRequest, EMBEDDINGS, "dimensions", 0, "dimensions: Input should be greater than or equal to 1"),
]


@pytest.mark.parametrize("model,base,path,value,message", BAD,
                         ids=[f"{m.__name__}-{p}-{i}" for i, (m, _, p, _, _) in enumerate(BAD)])
def test_a_bad_value_is_rejected_naming_the_field_and_rule(model, base, path, value, message):
    error = rejected(model, with_(base, path, value))
    assert error.message.startswith(message), error.message
    assert error.status == 400
    assert error.param and message.startswith(error.param)


GOOD = [
    (MessagesRequest, MESSAGES, "messages", [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Yo"},
                                             {"role": "user", "content": [{"type": "text", "text": "Again"}]}]),
    (MessagesRequest, MESSAGES, "messages.0.content", [
        {"type": "text", "text": "What is this?", "cache_control": {"type": "ephemeral"}},
        {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": PNG},
         "cache_control": {"type": "ephemeral", "ttl": "1h"}},
        {"type": "document", "source": {"type": "url", "url": "https://example.com/a.pdf"}},
        {"type": "document", "source": {"type": "text", "media_type": "text/plain", "data": "plain"}},
        {"type": "tool_result", "tool_use_id": "t1", "content": "42"},
        {"type": "redacted_thinking", "data": "opaque"},
    ]),
    (MessagesRequest, MESSAGES, "messages", [
        {"role": "user", "content": "weather?"},
        {"role": "assistant", "content": [{"type": "thinking", "thinking": "hmm", "signature": "s"},
                                          {"type": "tool_use", "id": "t1", "name": "weather",
                                           "input": {"city": "X"}}]}]),
    (MessagesRequest, MESSAGES, "system", "Be brief."),
    (MessagesRequest, MESSAGES, "system",
     [{"type": "text", "text": "Be brief.", "cache_control": {"type": "ephemeral"}}]),
    (MessagesRequest, MESSAGES, "temperature", 2),
    (MessagesRequest, MESSAGES, "temperature", 0),
    (MessagesRequest, MESSAGES, "top_p", 1),
    (MessagesRequest, MESSAGES, "top_k", 0),
    (MessagesRequest, MESSAGES, "max_tokens", 1),
    (MessagesRequest, MESSAGES, "stream", True),
    (MessagesRequest, MESSAGES, "stop_sequences", ["END"]),
    (MessagesRequest, MESSAGES, "tools", [{"name": "weather", "input_schema": {"type": "object"}},
                                          {"type": "web_search_20250305", "name": "web_search"}]),
    (MessagesRequest, {**MESSAGES, "max_tokens": 2000}, "thinking", {"type": "enabled", "budget_tokens": 1025}),
    (ContentRequest, CONTENT, "contents", [{"role": "user", "parts": [{"text": "Hi"}]},
                                           {"role": "model", "parts": [{"text": "Yo", "thoughtSignature": "x"}]}]),
    (ContentRequest, CONTENT, "contents.0.parts", [{"text": "what is this"},
                                                   {"inlineData": {"mimeType": "image/png", "data": PNG}},
                                                   {"fileData": {"fileUri": "https://x/y.pdf",
                                                                 "mimeType": "application/pdf"}},
                                                   {"functionResponse": {"name": "f", "response": {"ok": True}}}]),
    (ContentRequest, CONTENT, "generationConfig", {
        "temperature": 1.0, "topP": 0.9, "topK": 40, "maxOutputTokens": 100, "candidateCount": 1,
        "stopSequences": ["END"], "responseMimeType": "application/json",
        "responseJsonSchema": {"type": "object"}, "thinkingConfig": {"thinkingLevel": "low"}, "seed": 3}),
    (ContentRequest, CONTENT, "generationConfig", {"thinkingConfig": {"thinkingLevel": "HIGH", "thinkingBudget": -1}}),
    (ContentRequest, CONTENT, "systemInstruction", {"parts": [{"text": "Be brief."}]}),
    (ContentRequest, CONTENT, "safetySettings", [{"category": "HARM_CATEGORY_HARASSMENT", "threshold": "BLOCK_NONE"}]),
    (ContentRequest, CONTENT, "tools", [{"functionDeclarations": [{"name": "f"}]}, {"codeExecution": {}}]),
    (ChatRequest, CHAT, "messages", [
        {"role": "developer", "content": "Be brief."}, {"role": "system", "content": [{"type": "text", "text": "x"}]},
        {"role": "user", "content": [{"type": "text", "text": "look"},
                                     {"type": "image_url",
                                      "image_url": {"url": "data:image/png;base64," + PNG, "detail": "low"}},
                                     {"type": "input_audio", "input_audio": {"data": PNG, "format": "wav"}},
                                     {"type": "file", "file": {"file_id": "file-1"}}]},
        {"role": "assistant", "content": None,
         "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "42"},
        {"role": "assistant", "content": [{"type": "refusal", "refusal": "no"}]}]),
    (ChatRequest, CHAT, "n", 128),
    (ChatRequest, CHAT, "temperature", 0),
    (ChatRequest, CHAT, "top_p", 0.5),
    (ChatRequest, CHAT, "max_tokens", 1),
    (ChatRequest, CHAT, "max_completion_tokens", 100),
    (ChatRequest, {**CHAT, "stream": True}, "stream_options", {"include_usage": True}),
    (ChatRequest, CHAT, "tools", [{"type": "function", "function": {"name": "get_weather", "parameters": {}}}]),
    (ChatRequest, CHAT, "tool_choice", "required"),
    (ChatRequest, CHAT, "tool_choice", {"type": "function", "function": {"name": "get_weather"}}),
    (ChatRequest, CHAT, "stop", "END"),
    (ChatRequest, CHAT, "stop", ["a", "b", "c", "d"]),
    (ChatRequest, CHAT, "presence_penalty", -2),
    (ChatRequest, CHAT, "frequency_penalty", 2),
    (ChatRequest, CHAT, "logit_bias", {"50256": -100}),
    (ChatRequest, CHAT, "response_format", {"type": "json_schema", "json_schema": {"name": "x", "schema": {}}}),
    (ChatRequest, CHAT, "seed", 7),
    (ChatRequest, CHAT, "reasoning_effort", "low"),
    (ResponsesRequest, RESPONSES, "input", [
        {"role": "user", "content": "Hi"},
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "look"},
                                                        {"type": "input_image", "image_url": "https://x/a.png"},
                                                        {"type": "input_file", "file_id": "f1"}]},
        {"type": "function_call", "call_id": "c1", "name": "f", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "c1", "output": "42"},
        {"type": "reasoning", "id": "rs_1", "summary": []}]),
    (ResponsesRequest, RESPONSES, "instructions", "Be brief."),
    (ResponsesRequest, RESPONSES, "max_output_tokens", 16),
    (ResponsesRequest, RESPONSES, "tools",
     [{"type": "function", "name": "f", "parameters": {}}, {"type": "web_search"}]),
    (ResponsesRequest, RESPONSES, "previous_response_id", "resp_1"),
    (ResponsesRequest, {**RESPONSES, "stream": True}, "stream_options", {"include_obfuscation": False}),
    (EmbeddingsRequest, EMBEDDINGS, "input", ["a", "b"]),
    (EmbeddingsRequest, EMBEDDINGS, "input", [1, 2, 3]),
    (EmbeddingsRequest, EMBEDDINGS, "input", [[1, 2], [3]]),
    (EmbeddingsRequest, EMBEDDINGS, "input", list(range(EMBEDDING_MAX_INPUT_TOKENS))),
    (EmbeddingsRequest, EMBEDDINGS, "encoding_format", "base64"),
    (EmbeddingsRequest, EMBEDDINGS, "dimensions", 16),
]


@pytest.mark.parametrize("model,base,path,value", GOOD,
                         ids=[f"{m.__name__}-{p}-{i}" for i, (m, _, p, _) in enumerate(GOOD)])
def test_a_good_value_is_accepted_and_relayed_unchanged(model, base, path, value):
    data = with_(base, path, value)
    parsed = parse_model(model, data)
    dumped = parsed.model_dump(exclude_unset=True, mode="json")
    dumped.pop("max_tokens", None) if model is MessagesRequest and "max_tokens" not in data else None
    assert dumped == data


@pytest.mark.parametrize("model,base", [(MessagesRequest, MESSAGES), (ContentRequest, CONTENT), (ChatRequest, CHAT),
                                        (ResponsesRequest, RESPONSES), (EmbeddingsRequest, EMBEDDINGS)])
def test_unknown_fields_pass_through_at_every_level(model, base):
    data = copy.deepcopy(base)
    data["future_option"] = {"nested": [1, 2]}
    if "messages" in data:
        data["messages"][0]["x_hint"] = "keep me"
    if "contents" in data:
        data["contents"][0]["parts"][0]["x_hint"] = "keep me"
    dumped = parse_model(model, data).model_dump(exclude_unset=True)
    assert dumped["future_option"] == {"nested": [1, 2]}
    if "messages" in data:
        assert dumped["messages"][0]["x_hint"] == "keep me"
    if "contents" in data:
        assert dumped["contents"][0]["parts"][0]["x_hint"] == "keep me"


def test_messages_max_tokens_defaults_and_is_sent_upstream():
    parsed = parse_model(MessagesRequest, MESSAGES)
    assert parsed.max_tokens == DEFAULT_MAX_TOKENS
    assert parsed.model_dump(exclude_unset=True)["max_tokens"] == DEFAULT_MAX_TOKENS


def test_messages_max_tokens_default_leaves_room_above_the_thinking_budget():
    parsed = parse_model(MessagesRequest, {**MESSAGES, "thinking": {"type": "enabled", "budget_tokens": 10000}})
    assert parsed.max_tokens == 10000 + DEFAULT_MAX_TOKENS


def test_messages_explicit_max_tokens_is_kept():
    assert parse_model(MessagesRequest, {**MESSAGES, "max_tokens": 10}).max_tokens == 10


def test_content_snake_case_keys_are_checked_and_sent_in_camel_case():
    parsed = parse_model(ContentRequest, {"contents": [{"role": "user", "parts": [
        {"inline_data": {"mime_type": "image/png", "data": PNG}}]}], "generation_config": {"max_output_tokens": 5},
        "system_instruction": {"parts": [{"text": "x"}]}})
    dumped = parsed.model_dump(exclude_unset=True)
    assert dumped["contents"][0]["parts"][0] == {"inlineData": {"mimeType": "image/png", "data": PNG}}
    assert dumped["generationConfig"] == {"maxOutputTokens": 5}
    assert parsed.output_limit() == 5
    error = rejected(ContentRequest,
                     {"contents": [{"role": "user", "parts": [{"inline_data": {"mime_type": "image/png"}}]}]})
    assert error.message.startswith("contents[0].parts[0].inlineData.data: is required")


def test_count_tokens_and_embed_content_bodies():
    assert parse_model(CountTokensRequest, CONTENT)
    assert rejected(CountTokensRequest, {}).message.startswith("contents or generateContentRequest is required")
    assert parse_model(EmbedContentRequest, {"content": {"parts": [{"text": "x"}]}, "outputDimensionality": 8})
    assert rejected(EmbedContentRequest, {"content": {"parts": []}}).param == "content.parts"


@pytest.mark.parametrize("proxy,expected", [
    ("m-small:generateContent", ("m-small", "generateContent")),
    ("m-small:streamGenerateContent", ("m-small", "streamGenerateContent")),
    ("m-small:countTokens", ("m-small", "countTokens")),
    ("text-embedding-004:embedContent", ("text-embedding-004", "embedContent")),
    ("e-small:batchEmbedContents", ("e-small", "batchEmbedContents")),
    ("vendor:model-v1:generateContent", ("vendor:model-v1", "generateContent")),
])
def test_parse_model_action_splits_at_the_last_colon(proxy, expected):
    assert parse_model_action(proxy) == expected


@pytest.mark.parametrize("proxy,error", [
    ("m-small", NotFound), ("m-small:predict", NotFound), (":generateContent", InvalidRequest),
    ("a/b:generateContent", InvalidRequest),
])
def test_parse_model_action_rejects_unknown_actions_and_models(proxy, error):
    with pytest.raises(error):
        parse_model_action(proxy)


def test_embeddings_inputs_and_exact_token_counts():
    assert parse_model(EmbeddingsRequest, {**EMBEDDINGS, "input": [5, 6, 7]}).token_counts() == [3]
    assert parse_model(EmbeddingsRequest, {**EMBEDDINGS, "input": [[5, 6], [7]]}).token_counts() == [2, 1]
    texts = parse_model(EmbeddingsRequest, {**EMBEDDINGS, "input": ["hello world", "hi"]})
    assert texts.inputs() == ["hello world", "hi"]
    assert texts.token_counts() == [estimate_tokens("hello world"), estimate_tokens("hi")]


@pytest.mark.parametrize("text,low,high", [
    ("", 0, 0),
    ("Hello", 1, 2),
    ("Hello, world!", 4, 5),  # real tokenizers: 4
    ("The quick brown fox jumps over the lazy dog.", 10, 13),  # real: 10
    ("a b c d e f g h", 8, 8),  # one per short word
    ("internationalization", 4, 6),  # real: 3-4
    ("\u4f60\u597d\u4e16\u754c", 4, 8),  # CJK: about one per character
    ("def f(x):\n    return x * 2\n", 10, 14),
])
def test_estimate_tokens_is_close_to_real_tokenizers_and_rarely_below(text, low, high):
    assert low <= estimate_tokens(text) <= high
    assert estimate_tokens(text) == estimate_tokens(text)  # deterministic


def test_prompt_estimates_count_text_and_media():
    with_image = with_(MESSAGES, "messages.0.content", [
        {"type": "text", "text": "What is this?"},
        {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": PNG}}])
    text_only = parse_model(MessagesRequest, MESSAGES).estimate_input_tokens()
    assert parse_model(MessagesRequest,
                       with_image).estimate_input_tokens() >= MEDIA_TOKENS + estimate_tokens("What is this?")
    assert text_only >= estimate_tokens("Hello")
    assert parse_model(ChatRequest, CHAT).estimate_input_tokens() >= estimate_tokens("Hello")
    assert parse_model(ResponsesRequest, {**RESPONSES, "instructions": "Be brief"}).estimate_input_tokens() >= 3
    assert parse_model(ContentRequest, CONTENT).estimate_input_tokens() >= 1
    assert parse_model(ChatRequest, {**CHAT, "max_tokens": 9, "max_completion_tokens": 7}).output_limit() == 7
