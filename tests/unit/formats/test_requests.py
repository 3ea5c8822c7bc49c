"""Requests: a client's body in its dialect, rewritten for a channel speaking another."""

import pytest

from gateway.errors import Dialect, InvalidRequest
from gateway.formats import convert_request

PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk"
PDF = "JVBERi0xLjQKJcfsj6IKMSAwIG9iago="

WEATHER_SCHEMA = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}

CHAT_REQUEST = {
    "model": "public-model",
    "messages": [
        {"role": "system", "content": "You are terse."},
        {"role": "developer", "content": [{"type": "text", "text": "Answer in French."}]},
        {"role": "user", "content": [
            {"type": "text", "text": "What is in these?"},
            {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{PNG}", "detail": "low"}},
            {"type": "image_url", "image_url": {"url": "https://example.com/cat.jpg"}},
            {"type": "file", "file": {"filename": "report.pdf", "file_data": f"data:application/pdf;base64,{PDF}"}},
        ]},
        {"role": "assistant", "content": "Let me check the weather.", "tool_calls": [
            {"id": "call_abc", "type": "function",
             "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\"}"}}]},
        {"role": "tool", "tool_call_id": "call_abc", "content": "{\"temp_c\": 21}"},
        {"role": "user", "content": "And tomorrow?"},
    ],
    "tools": [{"type": "function", "function": {"name": "get_weather", "description": "Current weather",
                                                "parameters": WEATHER_SCHEMA}}],
    "tool_choice": "auto",
    "temperature": 0.7, "top_p": 0.9, "max_tokens": 500, "stop": "###", "user": "user-42",
}


# ---- chat → messages ----

def test_chat_to_messages_moves_system_images_documents_tools_and_sampling():
    # When a full chat request goes to a messages channel
    body = convert_request(CHAT_REQUEST, source="chat", target="messages", model="upstream-model")
    # Then system and developer messages become the system prompt
    assert body["model"] == "upstream-model"
    assert body["system"] == [{"type": "text", "text": "You are terse."},
                              {"type": "text", "text": "Answer in French."}]
    # And images and the PDF become base64/url sources
    assert body["messages"][0] == {"role": "user", "content": [
        {"type": "text", "text": "What is in these?"},
        {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": PNG}},
        {"type": "image", "source": {"type": "url", "url": "https://example.com/cat.jpg"}},
        {"type": "document", "source": {"type": "base64", "media_type": "application/pdf", "data": PDF}},
    ]}
    # And the tool call and its answer become tool_use and a tool_result opening the next user turn
    assert body["messages"][1] == {"role": "assistant", "content": [
        {"type": "text", "text": "Let me check the weather."},
        {"type": "tool_use", "id": "call_abc", "name": "get_weather", "input": {"city": "Paris"}}]}
    assert body["messages"][2] == {"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": "call_abc", "content": [{"type": "text", "text": "{\"temp_c\": 21}"}]},
        {"type": "text", "text": "And tomorrow?"}]}
    assert body["tools"] == [{"name": "get_weather", "description": "Current weather", "input_schema": WEATHER_SCHEMA}]
    assert body["tool_choice"] == {"type": "auto"}
    # And sampling parameters keep their meaning
    assert (body["max_tokens"], body["temperature"], body["top_p"]) == (500, 0.7, 0.9)
    assert body["stop_sequences"] == ["###"]
    assert body["metadata"] == {"user_id": "user-42"}
    assert "stream" not in body


def test_chat_to_messages_gives_the_documented_default_max_tokens():
    body = convert_request({"model": "m", "messages": [{"role": "user", "content": "hi"}]},
                           source="chat", target="messages", model="u")
    assert body["max_tokens"] == 4096
    assert body["messages"] == [{"role": "user", "content": [{"type": "text", "text": "hi"}]}]


def test_chat_to_messages_clamps_temperature_to_the_dialects_range():
    body = convert_request({"model": "m", "temperature": 1.6, "messages": [{"role": "user", "content": "hi"}]},
                           source="chat", target="messages", model="u")
    assert body["temperature"] == 1.0


def test_chat_reasoning_effort_becomes_a_thinking_budget_under_max_tokens():
    # Given a chat request asking for high effort with no max_tokens and a custom temperature
    request = {"model": "m", "reasoning_effort": "high", "temperature": 0.3, "top_k": 5,
               "messages": [{"role": "user", "content": "Prove it."}]}
    # When it goes to a messages channel
    body = convert_request(request, source="chat", target="messages", model="u")
    # Then thinking gets the high budget and max_tokens leaves room for the answer
    assert body["thinking"] == {"type": "enabled", "budget_tokens": 24576}
    assert body["max_tokens"] == 24576 + 4096
    # And the sampling the dialect refuses with thinking is left out
    assert "temperature" not in body and "top_k" not in body


def test_a_thinking_budget_shrinks_to_fit_the_clients_max_tokens():
    request = {"model": "m", "reasoning_effort": "medium", "max_completion_tokens": 3000,
               "messages": [{"role": "user", "content": "x"}]}
    body = convert_request(request, source="chat", target="messages", model="u")
    assert body["max_tokens"] == 3000
    assert body["thinking"] == {"type": "enabled", "budget_tokens": 2999}
    tiny = dict(request, max_completion_tokens=800)
    assert "thinking" not in convert_request(tiny, source="chat", target="messages", model="u")


def test_forced_tool_choice_goes_without_thinking_on_messages():
    request = {"model": "m", "reasoning_effort": "low", "messages": [{"role": "user", "content": "x"}],
               "tools": CHAT_REQUEST["tools"],
               "tool_choice": {"type": "function", "function": {"name": "get_weather"}},
               "parallel_tool_calls": False}
    body = convert_request(request, source="chat", target="messages", model="u")
    assert body["tool_choice"] == {"type": "tool", "name": "get_weather", "disable_parallel_tool_use": True}
    assert "thinking" not in body


@pytest.mark.parametrize("choice,expected", [
    ("auto", {"type": "auto"}), ("required", {"type": "any"}), ("none", {"type": "none"})])
def test_chat_tool_choice_words_map_to_messages(choice, expected):
    request = {"model": "m", "messages": [{"role": "user", "content": "x"}], "tools": CHAT_REQUEST["tools"],
               "tool_choice": choice}
    assert convert_request(request, source="chat", target="messages", model="u")["tool_choice"] == expected


def test_tool_ids_are_made_safe_for_messages_and_still_pair():
    request = {"model": "m", "messages": [
        {"role": "user", "content": "x"},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "fc:1/a", "type": "function", "function": {"name": "f", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "fc:1/a", "content": "ok"}]}
    body = convert_request(request, source="chat", target="messages", model="u")
    assert body["messages"][1]["content"][0]["id"] == "fc_1_a"
    assert body["messages"][2]["content"][0]["tool_use_id"] == "fc_1_a"


def test_chat_streaming_request_streams_on_messages():
    body = convert_request({"model": "m", "stream": True, "messages": [{"role": "user", "content": "x"}]},
                           source="chat", target="messages", model="u")
    assert body["stream"] is True


def test_chat_file_by_id_is_refused_with_the_field_named():
    request = {"model": "m", "messages": [{"role": "user", "content": [
        {"type": "file", "file": {"file_id": "file-123"}}]}]}
    with pytest.raises(InvalidRequest) as caught:
        convert_request(request, source="chat", target="messages", model="u")
    assert caught.value.param == "messages[0].content[0].file"


def test_chat_n_above_one_is_refused_for_other_dialects():
    with pytest.raises(InvalidRequest):
        convert_request({"model": "m", "n": 2, "messages": [{"role": "user", "content": "x"}]},
                        source="chat", target="content", model="u")


# ---- messages → chat ----

MESSAGES_REQUEST = {
    "model": "public-model",
    "max_tokens": 16000,
    "system": [{"type": "text", "text": "You read documents.", "cache_control": {"type": "ephemeral"}}],
    "messages": [
        {"role": "user", "content": [
            {"type": "document", "source": {"type": "base64", "media_type": "application/pdf", "data": PDF}},
            {"type": "image", "source": {"type": "url", "url": "https://example.com/chart.png"}},
            {"type": "text", "text": "Summarise and check the weather."}]},
        {"role": "assistant", "content": [
            {"type": "thinking", "thinking": "I should call the tool.", "signature": "sig-1"},
            {"type": "tool_use", "id": "toolu_01", "name": "get_weather", "input": {"city": "Oslo"}}]},
        {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "toolu_01", "is_error": True,
             "content": [{"type": "text", "text": "service down"}]}]},
    ],
    "tools": [{"name": "get_weather", "description": "Current weather", "input_schema": WEATHER_SCHEMA}],
    "tool_choice": {"type": "any", "disable_parallel_tool_use": True},
    "thinking": {"type": "enabled", "budget_tokens": 10000},
    "top_k": 40, "stop_sequences": ["END"], "stream": True, "metadata": {"user_id": "u-1"},
}


def test_messages_to_chat_moves_system_media_tools_and_thinking():
    # When a messages request goes to a chat channel
    body = convert_request(MESSAGES_REQUEST, source="messages", target="chat", model="gpt-up")
    # Then the system blocks become one system message and the PDF a file part
    assert body["messages"][0] == {"role": "system", "content": "You read documents."}
    assert body["messages"][1] == {"role": "user", "content": [
        {"type": "file", "file": {"filename": "document.pdf", "file_data": f"data:application/pdf;base64,{PDF}"}},
        {"type": "image_url", "image_url": {"url": "https://example.com/chart.png"}},
        {"type": "text", "text": "Summarise and check the weather."}]}
    # And tool_use becomes a tool call with JSON-text arguments, tool_result a tool message
    assert body["messages"][2] == {"role": "assistant", "content": None, "tool_calls": [
        {"id": "toolu_01", "type": "function",
         "function": {"name": "get_weather", "arguments": "{\"city\":\"Oslo\"}"}}]}
    assert body["messages"][3] == {"role": "tool", "tool_call_id": "toolu_01", "content": "service down"}
    assert body["tools"] == [{"type": "function", "function": {
        "name": "get_weather", "description": "Current weather", "parameters": WEATHER_SCHEMA}}]
    assert body["tool_choice"] == "required"
    assert body["parallel_tool_calls"] is False
    # And the thinking budget becomes an effort, which takes max_completion_tokens
    assert body["reasoning_effort"] == "medium"
    assert body["max_completion_tokens"] == 16000 and "max_tokens" not in body
    # And a streamed request asks the chat upstream for usage
    assert body["stream"] is True and body["stream_options"] == {"include_usage": True}
    # The stop sequences stay with the gateway, which can then tell the client which one ended it
    assert "stop" not in body and body["user"] == "u-1"
    assert "top_k" not in body


def test_messages_document_by_url_is_refused_by_a_chat_channel():
    request = {"model": "m", "max_tokens": 10, "messages": [{"role": "user", "content": [
        {"type": "document", "source": {"type": "url", "url": "https://example.com/a.pdf"}}]}]}
    with pytest.raises(InvalidRequest):
        convert_request(request, source="messages", target="chat", model="u")


def test_messages_plain_text_document_becomes_text():
    request = {"model": "m", "max_tokens": 10, "messages": [{"role": "user", "content": [
        {"type": "document", "source": {"type": "text", "media_type": "text/plain", "data": "Hello doc"}}]}]}
    body = convert_request(request, source="messages", target="chat", model="u")
    assert body["messages"] == [{"role": "user", "content": "Hello doc"}]


def test_messages_server_tools_are_refused():
    request = {"model": "m", "max_tokens": 10, "messages": [{"role": "user", "content": "x"}],
               "tools": [{"type": "web_search_20250305", "name": "web_search"}]}
    with pytest.raises(InvalidRequest) as caught:
        convert_request(request, source="messages", target="chat", model="u")
    assert caught.value.param == "tools[0].type"


# ---- chat → content ----

def test_chat_to_content_moves_roles_media_tools_and_config():
    # When a full chat request goes to a content channel
    request = dict(CHAT_REQUEST, reasoning_effort="low", seed=7, response_format={
        "type": "json_schema", "json_schema": {"name": "forecast", "schema": WEATHER_SCHEMA, "strict": True}})
    body = convert_request(request, source="chat", target="content", model="gemini-up")
    # Then the model and streaming stay out of the body (they are in the URL)
    assert "model" not in body and "stream" not in body
    assert body["systemInstruction"] == {"parts": [{"text": "You are terse."}, {"text": "Answer in French."}]}
    # And media become inlineData / fileData, the assistant the model role
    assert body["contents"][0] == {"role": "user", "parts": [
        {"text": "What is in these?"},
        {"inlineData": {"mimeType": "image/png", "data": PNG}},
        {"fileData": {"mimeType": "image/jpeg", "fileUri": "https://example.com/cat.jpg"}},
        {"inlineData": {"mimeType": "application/pdf", "data": PDF}}]}
    # (a call the upstream did not sign gets Google's documented placeholder signature)
    assert body["contents"][1] == {"role": "model", "parts": [
        {"text": "Let me check the weather."},
        {"functionCall": {"name": "get_weather", "args": {"city": "Paris"}},
         "thoughtSignature": "skip_thought_signature_validator"}]}
    # And the tool answer is a functionResponse named after the call it answers
    assert body["contents"][2] == {"role": "user", "parts": [
        {"functionResponse": {"name": "get_weather", "response": {"temp_c": 21}}},
        {"text": "And tomorrow?"}]}
    assert body["tools"] == [{"functionDeclarations": [
        {"name": "get_weather", "description": "Current weather", "parametersJsonSchema": WEATHER_SCHEMA}]}]
    assert body["toolConfig"] == {"functionCallingConfig": {"mode": "AUTO"}}
    assert body["generationConfig"] == {
        "temperature": 0.7, "topP": 0.9, "maxOutputTokens": 500, "seed": 7, "stopSequences": ["###"],
        "responseMimeType": "application/json", "responseJsonSchema": WEATHER_SCHEMA,
        "thinkingConfig": {"thinkingLevel": "low"}}


def test_chat_text_tool_answers_and_errors_wrap_in_output_or_error():
    request = {"model": "m", "messages": [
        {"role": "user", "content": "x"},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "lookup", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "plain text answer"}]}
    body = convert_request(request, source="chat", target="content", model="u")
    assert body["contents"][2]["parts"] == [
        {"functionResponse": {"name": "lookup", "response": {"output": "plain text answer"}}}]


def test_chat_json_object_format_asks_content_for_json():
    request = {"model": "m", "response_format": {"type": "json_object"},
               "messages": [{"role": "user", "content": "x"}]}
    config = convert_request(request, source="chat", target="content", model="u")["generationConfig"]
    assert config == {"responseMimeType": "application/json"}


@pytest.mark.parametrize("choice,expected", [
    ("none", {"mode": "NONE"}), ("required", {"mode": "ANY"}),
    ({"type": "function", "function": {"name": "get_weather"}},
     {"mode": "ANY", "allowedFunctionNames": ["get_weather"]})])
def test_chat_tool_choice_maps_to_function_calling_config(choice, expected):
    request = {"model": "m", "messages": [{"role": "user", "content": "x"}], "tools": CHAT_REQUEST["tools"],
               "tool_choice": choice}
    body = convert_request(request, source="chat", target="content", model="u")
    assert body["toolConfig"] == {"functionCallingConfig": expected}


# ---- content → chat ----

CONTENT_REQUEST = {
    "system_instruction": {"parts": [{"text": "You are a weather bot."}]},  # snake_case, as curl examples send
    "contents": [
        {"role": "user", "parts": [
            {"text": "Weather in Rome and Oslo? See the photo."},
            {"inline_data": {"mime_type": "image/jpeg", "data": PNG}}]},
        {"role": "model", "parts": [
            {"functionCall": {"name": "get_weather", "args": {"city": "Rome"}}},
            {"functionCall": {"name": "get_weather", "args": {"city": "Oslo"}}}]},
        {"role": "user", "parts": [
            {"functionResponse": {"name": "get_weather", "response": {"output": "sunny"}}},
            {"functionResponse": {"name": "get_weather", "response": {"error": "unknown city"}}}]},
    ],
    "tools": [{"functionDeclarations": [{"name": "get_weather", "description": "Current weather", "parameters": {
        "type": "OBJECT", "properties": {"city": {"type": "STRING"}}, "required": ["city"]}}]}],
    "toolConfig": {"functionCallingConfig": {"mode": "ANY", "allowedFunctionNames": ["get_weather"]}},
    "generationConfig": {"temperature": 0.2, "topP": 0.8, "topK": 20, "maxOutputTokens": 8192,
                         "stopSequences": ["STOP!"], "thinkingConfig": {"thinkingBudget": 2000},
                         "responseMimeType": "application/json",
                         "responseSchema": {"type": "OBJECT", "properties": {"x": {"type": "INTEGER"}}}},
}


def test_content_to_chat_pairs_id_less_calls_and_answers_in_order():
    # When a content request with two id-less calls to one function goes to a chat channel
    body = convert_request(CONTENT_REQUEST, source="content", target="chat", model="gpt-up", stream=False)
    # Then each call gets an id and the answers pair with the calls in order
    calls = body["messages"][2]["tool_calls"]
    assert [c["id"] for c in calls] == ["call_0", "call_1"]
    assert [c["function"]["arguments"] for c in calls] == ["{\"city\":\"Rome\"}", "{\"city\":\"Oslo\"}"]
    assert body["messages"][3:] == [
        {"role": "tool", "tool_call_id": "call_0", "content": "sunny"},
        {"role": "tool", "tool_call_id": "call_1", "content": "unknown city"}]


def test_content_to_chat_reads_snake_case_system_and_media():
    body = convert_request(CONTENT_REQUEST, source="content", target="chat", model="gpt-up", stream=True)
    assert body["model"] == "gpt-up"
    assert body["messages"][:2] == [
        {"role": "system", "content": "You are a weather bot."},
        {"role": "user", "content": [
            {"type": "text", "text": "Weather in Rome and Oslo? See the photo."},
            {"type": "image_url", "image_url": {"url": f"data:image/jpeg;base64,{PNG}"}}]}]


def test_content_pdf_by_url_cannot_go_to_chat_but_inline_pdf_can():
    request = {"contents": [{"role": "user", "parts": [
        {"fileData": {"mimeType": "application/pdf", "fileUri": "https://example.com/a.pdf"}}]}]}
    with pytest.raises(InvalidRequest):
        convert_request(request, source="content", target="chat", model="u")
    inline = {"contents": [{"role": "user", "parts": [{"inlineData": {"mimeType": "application/pdf", "data": PDF}}]}]}
    body = convert_request(inline, source="content", target="chat", model="u")
    assert body["messages"][0]["content"] == [
        {"type": "file", "file": {"filename": "document.pdf", "file_data": f"data:application/pdf;base64,{PDF}"}}]


def test_content_config_schema_and_thinking_map_to_chat():
    request = dict(CONTENT_REQUEST)
    request["contents"] = [{"role": "user", "parts": [{"text": "hi"}]}]
    body = convert_request(request, source="content", target="chat", model="gpt-up", stream=True)
    # Then generationConfig maps field by field; the capitalised schema types become JSON Schema
    assert body["response_format"] == {"type": "json_schema", "json_schema": {
        "name": "response", "schema": {"type": "object", "properties": {"x": {"type": "integer"}}}}}
    assert body["tools"][0]["function"]["parameters"] == WEATHER_SCHEMA
    assert body["tool_choice"] == {"type": "function", "function": {"name": "get_weather"}}
    assert body["reasoning_effort"] == "low"
    assert (body["temperature"], body["top_p"], body["max_completion_tokens"], body["stop"]) == (
        0.2, 0.8, 8192, ["STOP!"])
    assert body["stream"] is True and body["stream_options"] == {"include_usage": True}


def test_content_system_instruction_given_as_plain_text_is_accepted():
    request = {"systemInstruction": "Be kind.", "contents": [{"parts": [{"text": "hi"}]}]}
    body = convert_request(request, source="content", target="messages", model="u")
    assert body["system"] == "Be kind."


def test_content_thinking_level_is_the_chat_effort_word():
    request = {"contents": [{"parts": [{"text": "hi"}]}],
               "generationConfig": {"thinkingConfig": {"thinkingLevel": "HIGH"}}}
    assert convert_request(request, source="content", target="chat", model="u")["reasoning_effort"] == "high"


def test_content_search_tool_is_refused():
    request = {"contents": [{"parts": [{"text": "hi"}]}], "tools": [{"googleSearch": {}}]}
    with pytest.raises(InvalidRequest):
        convert_request(request, source="content", target="chat", model="u")


# ---- responses → chat ----

RESPONSES_REQUEST = {
    "model": "public-model",
    "instructions": "Be brief.",
    "input": [
        {"role": "developer", "content": "Prefer metric units."},
        {"type": "message", "role": "user", "content": [
            {"type": "input_text", "text": "Weather here?"},
            {"type": "input_image", "image_url": "https://example.com/street.jpg", "detail": "auto"},
            {"type": "input_file", "filename": "a.pdf", "file_data": f"data:application/pdf;base64,{PDF}"}]},
        {"type": "function_call", "id": "fc_1", "call_id": "call_9", "name": "get_weather",
         "arguments": "{\"city\":\"Lyon\"}"},
        {"type": "function_call_output", "call_id": "call_9", "output": "18C"},
        {"role": "assistant", "content": [{"type": "output_text", "text": "It is 18C."}]},
        {"role": "user", "content": "Thanks"},
    ],
    "tools": [{"type": "function", "name": "get_weather", "description": "Current weather",
               "parameters": WEATHER_SCHEMA, "strict": False}],
    "tool_choice": {"type": "function", "name": "get_weather"},
    "text": {"format": {"type": "json_schema", "name": "w", "schema": WEATHER_SCHEMA, "strict": True}},
    "reasoning": {"effort": "high"},
    "max_output_tokens": 900, "temperature": 1, "stream": True,
}


def test_responses_to_chat_moves_instructions_items_tools_and_format():
    body = convert_request(RESPONSES_REQUEST, source="responses", target="chat", model="gpt-up")
    assert body["messages"] == [
        {"role": "system", "content": "Be brief.\n\nPrefer metric units."},
        {"role": "user", "content": [
            {"type": "text", "text": "Weather here?"},
            {"type": "image_url", "image_url": {"url": "https://example.com/street.jpg"}},
            {"type": "file", "file": {"filename": "a.pdf", "file_data": f"data:application/pdf;base64,{PDF}"}}]},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "call_9", "type": "function",
             "function": {"name": "get_weather", "arguments": "{\"city\":\"Lyon\"}"}}]},
        {"role": "tool", "tool_call_id": "call_9", "content": "18C"},
        {"role": "assistant", "content": "It is 18C."},
        {"role": "user", "content": "Thanks"},
    ]
    assert body["tools"] == [{"type": "function", "function": {
        "name": "get_weather", "description": "Current weather", "parameters": WEATHER_SCHEMA}}]
    assert body["tool_choice"] == {"type": "function", "function": {"name": "get_weather"}}
    assert body["response_format"] == {"type": "json_schema", "json_schema": {
        "name": "w", "schema": WEATHER_SCHEMA, "strict": True}}
    assert body["reasoning_effort"] == "high" and body["max_completion_tokens"] == 900
    assert body["stream_options"] == {"include_usage": True}


def test_responses_string_input_is_one_user_message():
    body = convert_request({"model": "m", "input": "Hello"}, source="responses", target="chat", model="u")
    assert body == {"model": "u", "messages": [{"role": "user", "content": "Hello"}]}


def test_responses_previous_response_id_is_refused():
    with pytest.raises(InvalidRequest) as caught:
        convert_request({"model": "m", "input": "x", "previous_response_id": "resp_1"},
                        source="responses", target="chat", model="u")
    assert caught.value.param == "previous_response_id"


def test_responses_to_messages_and_content():
    # JSON output together with tools cannot reach a messages channel (see the format tests)
    without_format = {k: v for k, v in RESPONSES_REQUEST.items() if k != "text"}
    to_messages = convert_request(without_format, source="responses", target="messages", model="claude-up")
    assert to_messages["system"] == [{"type": "text", "text": "Be brief."},
                                     {"type": "text", "text": "Prefer metric units."}]
    assert to_messages["tool_choice"] == {"type": "tool", "name": "get_weather"}
    assert to_messages["messages"][1]["content"] == [
        {"type": "tool_use", "id": "call_9", "name": "get_weather", "input": {"city": "Lyon"}}]
    to_content = convert_request(RESPONSES_REQUEST, source="responses", target="content", model="gemini-up")
    assert to_content["generationConfig"]["thinkingConfig"] == {"thinkingLevel": "high"}
    assert to_content["contents"][2]["parts"][0] == {
        "functionResponse": {"name": "get_weather", "response": {"output": "18C"}}}


# ---- messages ↔ content ----

def test_messages_to_content_keeps_the_exact_budget_and_top_k():
    body = convert_request(MESSAGES_REQUEST, source="messages", target="content", model="gemini-up")
    assert body["systemInstruction"] == {"parts": [{"text": "You read documents."}]}
    assert body["contents"][0]["parts"] == [
        {"inlineData": {"mimeType": "application/pdf", "data": PDF}},
        {"fileData": {"mimeType": "image/png", "fileUri": "https://example.com/chart.png"}},
        {"text": "Summarise and check the weather."}]
    # Thinking is the model's own and is not sent back
    assert body["contents"][1] == {"role": "model", "parts": [
        {"functionCall": {"name": "get_weather", "args": {"city": "Oslo"}},
         "thoughtSignature": "skip_thought_signature_validator"}]}
    assert body["contents"][2] == {"role": "user", "parts": [
        {"functionResponse": {"name": "get_weather", "response": {"error": "service down"}}}]}
    # And thinking keeps its exact budget, with the thoughts sent back as messages clients expect
    assert body["generationConfig"] == {"topK": 40, "maxOutputTokens": 16000,  # stop sequences: the gateway's
                                        "thinkingConfig": {"thinkingBudget": 10000, "includeThoughts": True}}
    assert body["toolConfig"] == {"functionCallingConfig": {"mode": "ANY"}}


def test_content_to_messages_pairs_tools_and_sets_thinking():
    request = dict(CONTENT_REQUEST)
    request["contents"] = CONTENT_REQUEST["contents"][1:]
    request["contents"] = [{"role": "user", "parts": [{"text": "Rome and Oslo?"}]}] + request["contents"]
    request["toolConfig"] = {"functionCallingConfig": {"mode": "AUTO"}}
    # JSON output together with tools cannot reach a messages channel (see the format tests)
    request["generationConfig"] = {k: v for k, v in CONTENT_REQUEST["generationConfig"].items()
                                   if k not in ("responseMimeType", "responseSchema", "responseJsonSchema")}
    body = convert_request(request, source="content", target="messages", model="claude-up", stream=True)
    assert body["system"] == "You are a weather bot."
    assert body["messages"][1] == {"role": "assistant", "content": [
        {"type": "tool_use", "id": "call_0", "name": "get_weather", "input": {"city": "Rome"}},
        {"type": "tool_use", "id": "call_1", "name": "get_weather", "input": {"city": "Oslo"}}]}
    assert body["messages"][2] == {"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": "call_0", "content": [{"type": "text", "text": "sunny"}]},
        {"type": "tool_result", "tool_use_id": "call_1", "is_error": True,
         "content": [{"type": "text", "text": "unknown city"}]}]}
    # The calls came without the thinking block the upstream would need to open that assistant
    # message (it answers 400 "Expected `thinking` or `redacted_thinking`, but found `tool_use`"),
    # so thinking is off for this request, and the sampling knobs go as asked
    assert "thinking" not in body
    assert body["max_tokens"] == 8192
    assert (body["temperature"], body["top_p"], body["top_k"]) == (0.2, 0.8, 20)
    assert body["stream"] is True


# ---- same dialect ----

def test_same_dialect_requests_only_get_the_channel_model_and_usage_for_chat_streams():
    request = {"model": "public", "stream": True, "messages": [{"role": "user", "content": "x"}]}
    body = convert_request(request, source=Dialect.CHAT, target=Dialect.CHAT, model="upstream")
    assert body == {"model": "upstream", "stream": True, "messages": [{"role": "user", "content": "x"}],
                    "stream_options": {"include_usage": True}}
    assert request["model"] == "public"  # the client's body is left alone
    content = {"contents": [{"parts": [{"text": "x"}]}]}
    assert convert_request(content, source="content", target="content", model="u") == content


def test_no_channel_speaks_responses():
    with pytest.raises(ValueError):
        convert_request({"input": "x"}, source="chat", target="responses", model="u")


def test_responses_reasoning_summary_asks_content_for_its_thoughts():
    request = {"model": "m", "input": "x", "reasoning": {"effort": "low", "summary": "auto"}}
    body = convert_request(request, source="responses", target="content", model="u")
    assert body["generationConfig"]["thinkingConfig"] == {"thinkingLevel": "low", "includeThoughts": True}


def test_inline_documents_reach_messages_as_pdf_or_text_and_others_are_refused():
    # Given content parts with a PDF, a plain-text file and a spreadsheet
    def request(mime_type, data):
        return {"contents": [{"role": "user", "parts": [{"inlineData": {"mimeType": mime_type, "data": data}}]}]}
    pdf = convert_request(request("application/pdf", PDF), source="content", target="messages", model="u")
    text = convert_request(request("text/plain", "aGVsbG8gd29ybGQ="), source="content", target="messages", model="u")
    # Then the PDF stays base64 and the text file travels as text
    assert pdf["messages"][0]["content"][0]["source"] == {"type": "base64", "media_type": "application/pdf",
                                                          "data": PDF}
    assert text["messages"][0]["content"][0] == {"type": "document", "source": {
        "type": "text", "media_type": "text/plain", "data": "hello world"}}
    with pytest.raises(InvalidRequest):
        convert_request(request("application/vnd.ms-excel", "AAAA"), source="content", target="messages", model="u")
