"""Simulated Amazon Bedrock Runtime, mounted at `/bedrock`.

Routes (botocore's service model of `bedrock-runtime`, 2023-09-30): POST `/model/{modelId}/converse`,
`/model/{modelId}/converse-stream` and `/model/{modelId}/invoke` (Titan Text Embeddings V2 and
Cohere Embed bodies), also under `/fault/{fault}/`; batch inference's jobs and their S3 bucket
(`bedrock_batch`). Every request is checked as Bedrock checks it
(`rules.bedrock`): the SigV4 signature recomputed by botocore (a wrong secret: 403
InvalidSignatureException; an unknown key or a missing or stray session token: 403
UnrecognizedClientException) or a Bedrock API key; the body against the operation's input shape
by botocore's validator; a bare Claude 3.7+ id refused on demand; tool blocks without a toolConfig
refused; Claude's thinking rules.

Errors answer as Bedrock does: the status, `x-amzn-ErrorType: <Code>:http://internal.amazon.com/coral/com.amazon.bedrock/`
and `{"message": ...}` (fumito-ito/AnthropicSwiftSDK#19; no Retry-After: epam/ai-dial-adapter-bedrock#371).
ConverseStream answers real AWS event-stream frames (`application/vnd.amazon.eventstream`; the
encoding of docs.aws.amazon.com/transcribe/latest/dg/event-stream.html: prelude, its CRC32,
string headers, JSON payload, message CRC32), exceptions as `:message-type: exception` frames
inside the 200 (aws-samples/aws-genai-llm-chatbot#220).

Faults: `#fault=<status>` in the prompt or the `/fault/<status>` mount answers that status with its
exception (429 ThrottlingException, 503 ServiceUnavailableException, 408 ModelTimeoutException,
424 ModelErrorException, 403 AccessDeniedException, 500 InternalServerException); `#fault=streamthrottle`
and `#fault=streamerror` end a stream after its first events with a throttlingException or
modelStreamErrorException frame; `cut`/`cutN` as the other simulators. Prompt caching is simulated
as the messages simulator does it, by `cachePoint` blocks (usage: inputTokens without the cache
reads and writes, cacheDetails by TTL).
"""

from __future__ import annotations

import binascii
import datetime
import hashlib
import json
import struct
from typing import Any
from urllib.parse import unquote

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from gateway.tokens import estimate_tokens, estimate_value_tokens

from . import bedrock_batch
from ._honour import Tools
from ._text import Plan, before_answer, fault_of, fault_status, new_id, paced_stream, plan_answer, with_fault_prefix
from .chat import embedding_vector
from .rules import bedrock as rules
from .rules import messages as messages_rules

ERROR_TYPE = "{code}:http://internal.amazon.com/coral/com.amazon.bedrock/"
_EXCEPTIONS = {400: "ValidationException", 403: "AccessDeniedException", 404: "ResourceNotFoundException",
               408: "ModelTimeoutException", 424: "ModelErrorException", 429: "ThrottlingException",
               500: "InternalServerException", 503: "ServiceUnavailableException"}
_MESSAGES = {"ThrottlingException": "Too many requests, please wait before trying again.",
             "ServiceUnavailableException": "Bedrock is unable to process your request.",
             "AccessDeniedException": "You don't have access to the model with the specified model ID.",
             "ModelTimeoutException": "Model has timed out in processing the request.",
             "ModelErrorException": "The model returned an error.",
             "InternalServerException": "The server encountered an internal error."}
_STREAM_FAULTS = {"streamthrottle": ("throttlingException", "Too many requests, please wait before trying again."),
                  "streamerror": ("modelStreamErrorException",
                                  "An error occurred while streaming the response. Retry your request.")}
_STOP = {"stop": "end_turn", "stop_sequence": "stop_sequence", "length": "max_tokens", "tool": "tool_use"}
_cached_prefixes: set[str] = set()


def error(status: int, code: str, message: str) -> JSONResponse:
    return JSONResponse({"message": message}, status_code=status,
                        headers={"x-amzn-ErrorType": ERROR_TYPE.format(code=code),
                                 "x-amzn-RequestId": new_id("")})


# ---- event-stream frames (the encoding; botocore has a decoder only) ----

def _header(name: str, value: str) -> bytes:
    raw_name, raw_value = name.encode(), value.encode()
    return struct.pack("!B", len(raw_name)) + raw_name + b"\x07" + struct.pack("!H", len(raw_value)) + raw_value


def frame(headers: dict[str, str], payload: bytes) -> bytes:
    encoded = b"".join(_header(k, v) for k, v in headers.items())
    prelude = struct.pack("!II", 12 + len(encoded) + len(payload) + 4, len(encoded))
    prelude += struct.pack("!I", binascii.crc32(prelude) & 0xFFFFFFFF)
    message = prelude + encoded + payload
    return message + struct.pack("!I", binascii.crc32(message) & 0xFFFFFFFF)


def event_frame(kind: str, body: dict[str, Any]) -> bytes:
    # Real frames pad their payload with a "p" member that clients ignore.
    payload = json.dumps({**body, "p": "abcdefghijklmnopqrstuvwxyz"[:len(kind)]}).encode()
    return frame({":event-type": kind, ":content-type": "application/json", ":message-type": "event"}, payload)


def exception_frame(kind: str, message: str) -> bytes:
    return frame({":exception-type": kind, ":content-type": "application/json", ":message-type": "exception"},
                 json.dumps({"message": message}).encode())


# ---- a request: where it goes, who signed it ----

async def _checked(request: Request, operation: str) -> tuple[str, dict[str, Any], str | None] | Response:
    """(model id, body, the signing Region) of a request Bedrock would serve, else its refusal."""
    raw_path = request.scope.get("raw_path") or request.url.path.encode()
    encoded = raw_path.decode("latin-1").split("?", 1)[0]
    tail = encoded.rsplit("/model/", 1)[-1]
    model_id = unquote(tail.rsplit("/", 1)[0])
    body_bytes = await request.body()
    headers = {k.lower(): v for k, v in request.headers.items()}
    url = f"{request.url.scheme}://{headers.get('host', '')}{encoded}"
    if refused := rules.signature_refusal("POST", url, headers, body_bytes, datetime.datetime.now(datetime.UTC)):
        return error(403, *refused)
    try:
        body = json.loads(body_bytes) if body_bytes else {}
    except ValueError:
        return error(400, "SerializationException", "Could not parse the request body as JSON.")
    if not isinstance(body, dict):
        return error(400, "ValidationException", "The request body must be a JSON object.")
    if operation != "InvokeModel" and (report := rules.shape_refusal(operation, model_id, body)):
        return error(400, "ValidationException", report)
    region = rules.signing_region(headers)
    if refused_model := rules.model_refusal(model_id, region):
        return error(400, "ValidationException", refused_model)
    return model_id, body, region


def _texts(body: dict[str, Any]) -> list[str]:
    out: list[str] = []
    for message in body.get("messages") or []:
        for block in message.get("content") or []:
            if isinstance(block.get("text"), str):
                out.append(block["text"])
    return out


def _prompt(body: dict[str, Any]) -> tuple[str, int]:
    users = [m for m in body.get("messages") or [] if m.get("role") == "user"]
    if not users:
        return "", 0
    content = users[-1].get("content") or []
    texts = [b["text"] for b in content if isinstance(b.get("text"), str)]
    media = sum(1 for b in content if "image" in b or "document" in b)
    return " ".join(texts), media


def _cache_usage(body: dict[str, Any], model_id: str) -> tuple[int, int, int]:
    """(cache write, cache read, of the writes those kept an hour) tokens of the prefix ending at
    the last cachePoint (tools, then system, then messages: the order Bedrock caches them in)."""
    blocks: list[Any] = list((body.get("toolConfig") or {}).get("tools") or [])
    blocks += list(body.get("system") or [])
    for message in body.get("messages") or []:
        blocks += list(message.get("content") or [])
    marked = [i for i, b in enumerate(blocks) if isinstance(b, dict) and "cachePoint" in b]
    if not marked:
        return 0, 0, 0
    prefix = [b for b in blocks[: marked[-1]] if "cachePoint" not in b]
    tokens = estimate_value_tokens(prefix)
    key = hashlib.sha256(json.dumps([rules_base(model_id), prefix], sort_keys=True).encode()).hexdigest()
    if key in _cached_prefixes:
        return 0, tokens, 0
    _cached_prefixes.add(key)
    return tokens, 0, tokens if blocks[marked[-1]]["cachePoint"].get("ttl") == "1h" else 0


def rules_base(model_id: str) -> str:
    return model_id.split(".", 1)[1] if model_id.split(".", 1)[0] in ("us", "eu", "apac", "global") else model_id


def _tools(body: dict[str, Any]) -> Tools:
    config = body.get("toolConfig") or {}
    offered = {t["toolSpec"]["name"]: (t["toolSpec"].get("inputSchema") or {}).get("json")
               for t in config.get("tools") or [] if "toolSpec" in t}
    choice = config.get("toolChoice") or {"auto": {}}
    mode = "required" if "any" in choice else str((choice.get("tool") or {}).get("name")) if "tool" in choice \
        else "auto"
    last = (body.get("messages") or [{}])[-1]
    results = any("toolResult" in b for b in last.get("content") or [])
    return Tools(offered, choice=mode, user_turn=last.get("role") == "user" and not results)


async def converse(request: Request) -> Response:
    return await _converse(request, stream=False)


async def converse_stream(request: Request) -> Response:
    return await _converse(request, stream=True)


async def _converse(request: Request, *, stream: bool) -> Response:
    checked = await _checked(request, "ConverseStream" if stream else "Converse")
    if isinstance(checked, Response):
        return checked
    model_id, body, _ = checked
    prompt, media = _prompt(body)
    fault = fault_of(request, prompt)
    if status := fault_status(fault):
        code = _EXCEPTIONS.get(status, "InternalServerException")
        return error(status, code, _MESSAGES.get(code, f"Simulated failure {status}"))
    if refused := rules.conversation_refusal(body):
        return error(400, "ValidationException", refused)
    await before_answer(fault)
    config = body.get("inferenceConfig") or {}
    thinking = ((body.get("additionalModelRequestFields") or {}).get("thinking") or {}).get("type") == "enabled"
    written, read, hour = _cache_usage(body, model_id)
    whole = estimate_value_tokens([body.get("system"), body.get("messages"), body.get("toolConfig")])
    plan = plan_answer(prompt, input_tokens=max(0, whole - written - read), max_tokens=config.get("maxTokens"),
                       stop=config.get("stopSequences"), tools=_tools(body), thinking=thinking, attachments=media)
    usage: dict[str, Any] = {"inputTokens": plan.input_tokens, "outputTokens": plan.output_tokens,
                             "totalTokens": plan.input_tokens + written + read + plan.output_tokens,
                             "cacheReadInputTokens": read, "cacheWriteInputTokens": written}
    if written:
        usage["cacheDetails"] = [d for d in ({"ttl": "1h", "inputTokens": hour},
                                             {"ttl": "5m", "inputTokens": written - hour}) if d["inputTokens"]]
    thought = "".join(plan.thinking)
    # Claude signs its thinking (the messages simulator's signature); Bedrock relays it unchanged.
    signature = messages_rules.signature_for("thinking", thought)
    tool_id = new_id("tooluse_")
    stop_reason = _STOP[plan.finish]
    if not stream:
        content: list[dict[str, Any]] = []
        if plan.thinking:
            content.append({"reasoningContent": {"reasoningText": {"text": thought, "signature": signature}}})
        if plan.tool_name:
            content.append({"toolUse": {"toolUseId": tool_id, "name": plan.tool_name, "input": _arguments(plan)}})
        else:
            content.append({"text": plan.text})
        return JSONResponse({"output": {"message": {"role": "assistant", "content": content}},
                             "stopReason": stop_reason, "usage": usage, "metrics": {"latencyMs": 1}})
    return paced_stream(_frames(plan, thought, signature, tool_id, stop_reason, usage, fault), fault,
                        media_type="application/vnd.amazon.eventstream")


def _frames(plan: Plan, thought: str, signature: str, tool_id: str, stop_reason: str, usage: dict[str, Any],
            fault: str | None) -> list[bytes]:
    frames = [event_frame("messageStart", {"role": "assistant"})]
    index = 0
    if plan.thinking:
        frames += [event_frame("contentBlockDelta", {"contentBlockIndex": index,
                                                     "delta": {"reasoningContent": {"text": piece}}})
                   for piece in plan.thinking]
        frames.append(event_frame("contentBlockDelta", {"contentBlockIndex": index,
                                                        "delta": {"reasoningContent": {"signature": signature}}}))
        frames.append(event_frame("contentBlockStop", {"contentBlockIndex": index}))
        index += 1
    if plan.tool_name:
        frames.append(event_frame("contentBlockStart", {"contentBlockIndex": index, "start": {
            "toolUse": {"toolUseId": tool_id, "name": plan.tool_name}}}))
        frames += [event_frame("contentBlockDelta", {"contentBlockIndex": index,
                                                     "delta": {"toolUse": {"input": piece}}})
                   for piece in plan.tool_arguments]
    else:
        frames += [event_frame("contentBlockDelta", {"contentBlockIndex": index, "delta": {"text": piece}})
                   for piece in plan.pieces]
    frames.append(event_frame("contentBlockStop", {"contentBlockIndex": index}))
    frames.append(event_frame("messageStop", {"stopReason": stop_reason}))
    frames.append(event_frame("metadata", {"usage": usage, "metrics": {"latencyMs": 1}}))
    if fault in _STREAM_FAULTS:  # after the first text, inside the 200
        frames = frames[:3] + [exception_frame(*_STREAM_FAULTS[fault])]
    return frames


def _arguments(plan: Plan) -> dict[str, Any]:
    try:
        return json.loads(plan.arguments)
    except ValueError:
        return {}


async def invoke(request: Request) -> Response:
    """InvokeModel for the embeddings models: Titan Text Embeddings V2 (`inputText`, `dimensions`
    256/512/1024; model-parameters-titan-embed-text.html) and Cohere Embed (`texts` up to 96,
    `input_type` required; model-parameters-embed.html), whose count is in the
    X-Amzn-Bedrock-Input-Token-Count header only (langchain4j#5057)."""
    checked = await _checked(request, "InvokeModel")
    if isinstance(checked, Response):
        return checked
    model_id, body, _ = checked
    texts = [body["inputText"]] if isinstance(body.get("inputText"), str) else body.get("texts")
    fault = fault_of(request, " ".join(t for t in texts or [] if isinstance(t, str)))
    if status := fault_status(fault):
        code = _EXCEPTIONS.get(status, "InternalServerException")
        return error(status, code, _MESSAGES.get(code, f"Simulated failure {status}"))
    if model_id.startswith("amazon.titan-embed-text"):
        dimensions = body.get("dimensions", 1024)
        if not isinstance(body.get("inputText"), str) or dimensions not in (256, 512, 1024):
            return error(400, "ValidationException", "Malformed input request: inputText and dimensions "
                         "(256, 512 or 1024) are required, please reformat your input and try again.")
        tokens = estimate_tokens(body["inputText"])
        return JSONResponse({"embedding": embedding_vector(body["inputText"], dimensions),
                             "inputTextTokenCount": tokens},
                            headers={"x-amzn-bedrock-input-token-count": str(tokens)})
    if model_id.startswith("cohere.embed"):
        if not isinstance(texts, list) or len(texts) > 96 or not body.get("input_type"):
            return error(400, "ValidationException", "Malformed input request: texts (at most 96) and input_type "
                         "are required, please reformat your input and try again.")
        vectors = [embedding_vector(t, 1024) for t in texts]
        tokens = sum(estimate_tokens(t) for t in texts)
        embeddings: Any = {"float": vectors} if body.get("embedding_types") else vectors
        return JSONResponse({"id": new_id(""), "texts": texts, "embeddings": embeddings,
                             "response_type": "embeddings_by_type" if body.get("embedding_types")
                             else "embeddings_floats"},
                            headers={"x-amzn-bedrock-input-token-count": str(tokens)})
    return error(400, "ValidationException", rules.INVALID_MODEL)


app = Starlette(routes=with_fault_prefix([
    Route("/model/{model:path}/converse", converse, methods=["POST"]),
    Route("/model/{model:path}/converse-stream", converse_stream, methods=["POST"]),
    Route("/model/{model:path}/invoke", invoke, methods=["POST"]),
]) + [
    # Batch inference's control plane and the S3 bucket its jobs use (`bedrock_batch`).
    Route("/model-invocation-job", bedrock_batch.create, methods=["POST"]),
    Route("/model-invocation-job/{identifier}", bedrock_batch.job_route, methods=["GET"]),
    Route("/model-invocation-job/{identifier}/stop", bedrock_batch.job_route, methods=["POST"]),
    Route("/s3/{bucket}/{key:path}", bedrock_batch.s3_object, methods=["GET", "PUT"]),
])
