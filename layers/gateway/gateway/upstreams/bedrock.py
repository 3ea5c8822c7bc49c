"""Amazon Bedrock (the `bedrock` protocol): Converse and ConverseStream for text, InvokeModel for
embeddings, signed with SigV4 by botocore.

Operations and shapes: botocore's service model of `bedrock-runtime` (2023-09-30; signing name
`bedrock`; `POST /model/{modelId}/converse`, `/converse-stream`, `/invoke`, the model id a URI
label percent-encoded whole) and AWS's API reference (docs.aws.amazon.com/bedrock/latest/
APIReference/API_Operations_Amazon_Bedrock_Runtime.html).

Credentials, by the channel's key (new-api's `AK|SK|REGION` convention, relay/channel/aws):
- no key: the function's own role, through botocore's default chain (on Lambda the environment's
  AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY / AWS_SESSION_TOKEN), the session token signed with
  them (higress#4065: role credentials without their token are refused);
- `AK|SK|REGION`: the channel's own IAM user, signed with no session token at all: mixing the
  channel's keys with the environment's token is refused ("The security token included in the
  request is invalid", anthropic-sdk-typescript#537);
- `KEY|REGION` or a lone key: a Bedrock API key, sent as `Authorization: Bearer`
  (docs.aws.amazon.com/bedrock/latest/userguide/api-keys.html).

A ConverseStream answer is an AWS event stream (`application/vnd.amazon.eventstream`), decoded by
botocore's `EventStreamBuffer`, which checks both CRCs of every frame; an exception frame inside
the 200 becomes an `UpstreamError` of its kind.

Inference profiles: Claude 3.7 and later (and Nova 2) refuse on-demand calls by their bare id
("Invocation of model ID ... with on-demand throughput isn’t supported. Retry your request with
the ID or ARN of an inference profile that contains this model.", anthropic-sdk-python#894,
cline#2482). A bare id of such a model is sent as the profile of the channel's geography (`us.`,
`eu.`, `apac.`, `us-gov.`; `global.` when the channel asks for it): at once when `PROFILE_ONLY`
knows the model, else after Bedrock's refusal says so, remembered per channel for the instance.
"""

from __future__ import annotations

import base64
import json
import re
import struct
import threading
from collections.abc import AsyncGenerator, Awaitable, Callable
from contextlib import aclosing
from typing import Any, TypeVar
from urllib.parse import quote

import httpx

from gateway.sse import SSEEvent
from gateway.upstreams.base import EventStream, Timeouts, UpstreamClient
from gateway.upstreams.errors import (
    ACCOUNT,
    CAPACITY,
    CLIENT,
    UPSTREAM,
    ErrorTable,
    Rule,
    UpstreamError,
    parse_retry_after,
)

SERVICE = "bedrock"  # the signing name in botocore's service model (its endpoint prefix is bedrock-runtime)
_MODEL_DOC = "botocore/data/bedrock-runtime/2023-09-30/service-2.json"
_ERRORS_DOC = "docs.aws.amazon.com/bedrock/latest/userguide/troubleshooting-api-error-codes.html"
_ON_DEMAND = "with on-demand throughput isn"  # before the curly apostrophe of "isn’t"
_GEO_PREFIXES = ("us.", "eu.", "apac.", "us-gov.", "jp.", "au.", "ca.", "global.")
#: Bare ids (their beginnings) that Bedrock serves only through an inference profile.
PROFILE_ONLY = ("anthropic.claude-3-7-", "anthropic.claude-sonnet-4", "anthropic.claude-opus-4",
                "anthropic.claude-haiku-4", "amazon.nova-2-", "amazon.nova-premier-", "meta.llama4-",
                "deepseek.r1-")


def default_url(region: str) -> str:
    return f"https://bedrock-runtime.{region}.amazonaws.com"


def key_region(api_key: str) -> str | None:
    """The region a channel's key names (`AK|SK|REGION`, `KEY|REGION`), if it names one."""
    parts = api_key.split("|")
    return parts[-1].strip() or None if len(parts) in (2, 3) else None


def geography(region: str) -> str | None:
    """The cross-Region inference profile prefix of a Region's geography (aws-cdk's
    `CrossRegionInferenceProfileRegion`; new-api's `awsRegionCrossModelPrefixMap`)."""
    if region.startswith("us-gov-"):
        return "us-gov"
    if region.startswith(("us-", "ca-")):
        return "us"
    if region.startswith("eu-"):
        return "eu"
    if region.startswith("ap-"):
        return "apac"
    return None


def base_model(model: str) -> str:
    """The foundation model an id names: a profile's without its geography."""
    for prefix in _GEO_PREFIXES:
        if model.startswith(prefix):
            return model[len(prefix):]
    return model


def profiled_id(model: str, region: str, global_profiles: bool) -> str:
    """A model id as a channel in `region` calls it: a bare id of a profile-only model (`PROFILE_ONLY`)
    as the inference profile of the Region's geography (`global.` when the channel asks for it)."""
    if not _bare(model) or not model.startswith(PROFILE_ONLY):
        return model
    prefix = "global" if global_profiles else geography(region)
    return f"{prefix}.{model}" if prefix else model


def static_keys(api_key: str) -> tuple[str, str] | None:
    """(access key, secret) of a channel key that is an IAM user's (`AK|SK|REGION`), else None."""
    parts = [p.strip() for p in api_key.split("|")] if api_key else []
    return (parts[0], parts[1]) if len(parts) == 3 else None


def error_code(body: Any, headers: httpx.Headers | None) -> str | None:
    """Bedrock's error code: the `x-amzn-ErrorType` header (`Code:http://internal.amazon.com/...`),
    as botocore's rest-json parser reads it, else the body's `code` / `__type`."""
    raw = headers.get("x-amzn-errortype") if headers is not None else None
    if not raw and isinstance(body, dict):
        raw = body.get("__type") or body.get("code") or body.get("Code")
    if not isinstance(raw, str) or not raw:
        return None
    return raw.split(":", 1)[0].split("#")[-1]


def _bare(model: str) -> bool:
    """A foundation model's own id (not a profile's, not an ARN)."""
    return not model.startswith("arn:") and base_model(model) == model


def _codes(body: Any) -> list[str]:
    code = body.get("__type") if isinstance(body, dict) else None
    return [code] if isinstance(code, str) else []


def _message(body: Any) -> str | None:
    if not isinstance(body, dict):
        return None
    message = body.get("message") or body.get("Message")
    return message if isinstance(message, str) else None


#: Bedrock's errors by code (`_MODEL_DOC` gives each exception's status; `_ERRORS_DOC` what it means).
ERRORS = ErrorTable("bedrock", [
    # The bare id of a model served only through an inference profile: the gateway's to fix, not the client's.
    Rule(UPSTREAM, code="ValidationException", message=_ON_DEMAND, source="anthropic-sdk-python#894"),
    Rule(CLIENT, code="ValidationException", source=_MODEL_DOC),  # 400
    Rule(CAPACITY, code="ThrottlingException", source=_MODEL_DOC),  # 429 "exceeding the account quotas"
    Rule(CAPACITY, code="ServiceUnavailableException", source=_ERRORS_DOC),  # 503 "high demand"
    Rule(CAPACITY, code="ServiceQuotaExceededException", source=_MODEL_DOC),  # 400 "resubmit your request later"
    Rule(ACCOUNT, code="AccessDeniedException", source=_MODEL_DOC),  # 403
    Rule(ACCOUNT, code="UnrecognizedClientException", source="anthropics/claude-code#2260"),  # 403 token invalid
    Rule(ACCOUNT, code="InvalidSignatureException", source="BerriAI/litellm#14763"),  # 403 wrong secret
    Rule(ACCOUNT, code="InvalidClientTokenId", source=_ERRORS_DOC),
    Rule(ACCOUNT, code="IncompleteSignature", source=_ERRORS_DOC),
    Rule(ACCOUNT, code="RequestExpired", source=_ERRORS_DOC),  # a clock skewed by more than 5 minutes
    Rule(ACCOUNT, code="NotAuthorized", source=_ERRORS_DOC),
    # "Model use case details have not been submitted for this account": the account's, not a wrong id.
    Rule(ACCOUNT, code="ResourceNotFoundException", message="use case details", source=_ERRORS_DOC),
    Rule(CLIENT, code="ResourceNotFoundException", source=_MODEL_DOC),  # 404 a model id that does not exist
    Rule(UPSTREAM, code="ModelTimeoutException", source=_MODEL_DOC),  # 408
    Rule(UPSTREAM, code="ModelErrorException", source=_MODEL_DOC),  # 424
    Rule(UPSTREAM, code="ModelStreamErrorException", source=_MODEL_DOC),  # 424, in a stream
    Rule(UPSTREAM, code="ModelNotReadyException", source=_MODEL_DOC),  # 429, a model warming up
    Rule(UPSTREAM, code="InternalServerException", source=_MODEL_DOC),  # 500
], codes=_codes, message=_message)

#: The status each exception has as an HTTP answer (`_MODEL_DOC`), for the frames of a stream.
_STATUS = {"ValidationException": 400, "ThrottlingException": 429, "ServiceUnavailableException": 503,
           "InternalServerException": 500, "ModelStreamErrorException": 424, "ModelTimeoutException": 408,
           "ModelErrorException": 424, "ModelNotReadyException": 429, "AccessDeniedException": 403,
           "ServiceQuotaExceededException": 400, "ResourceNotFoundException": 404}


def needs_profile(exc: BaseException) -> bool:
    body = getattr(exc, "body", None)
    return (isinstance(exc, UpstreamError) and exc.status == 400 and _codes(body) == ["ValidationException"]
            and _ON_DEMAND in (_message(body) or "").lower())


# ---- credentials ----

_lock = threading.Lock()
_default: Any = None
# Profiles learned from Bedrock's refusals, by (channel's base URL, bare id): this instance's memory.
_learned: dict[tuple[str, str], str] = {}


def default_credentials() -> Any:
    """botocore's default chain, resolved once per instance (refreshable credentials refresh
    themselves); None when the chain finds nothing."""
    global _default
    with _lock:
        if _default is None:
            import botocore.session

            _default = botocore.session.get_session().get_credentials()
        return _default


def reset_default_credentials() -> None:
    """Forgets the resolved chain (tests that change the environment)."""
    global _default
    with _lock:
        _default = None


T = TypeVar("T")


class BedrockClient(UpstreamClient):
    protocol = "bedrock"
    errors = ERRORS

    def __init__(self, base_url: str, api_key: str, client: httpx.AsyncClient, timeouts: Timeouts | None = None, *,
                 region: str, global_profiles: bool = False, probe_model: str | None = None):
        super().__init__(base_url or default_url(region), api_key, client, timeouts)
        self.region = region
        self.global_profiles = global_profiles
        self.probe_model = probe_model
        parts = [p.strip() for p in api_key.split("|")] if api_key else []
        self._static = static_keys(api_key)
        self._bearer = parts[0] if len(parts) in (1, 2) else None

    def redact(self, text: str) -> str:
        text = super().redact(text)
        for secret in (self._static[1] if self._static else None, self._bearer):
            if secret:
                text = text.replace(secret, "***")
        return text

    # --- requests ------------------------------------------------------------------------------

    def _credentials(self) -> Any:
        from botocore.credentials import Credentials

        if self._static is not None:
            return Credentials(*self._static)  # never the environment's session token
        chain = default_credentials()
        if chain is None:
            raise UpstreamError(403, "no AWS credentials: the function's role gave none and the channel has no key",
                                fault=ACCOUNT)
        return chain.get_frozen_credentials()  # one consistent key, secret and token per signature

    def _request(self, method: str, path: str, payload: dict[str, Any] | None, *, stream: bool) -> httpx.Request:
        url = self.base_url + path
        content = json.dumps(payload or {}, separators=(",", ":"), ensure_ascii=False).encode()
        headers = {"content-type": "application/json",
                   "accept": "application/vnd.amazon.eventstream" if stream else "application/json"}
        if self._bearer is not None:
            headers["authorization"] = f"Bearer {self._bearer}"
        else:
            from botocore.auth import SigV4Auth
            from botocore.awsrequest import AWSRequest

            signed = AWSRequest(method=method, url=url, data=content, headers=headers)
            SigV4Auth(self._credentials(), SERVICE, self.region).add_auth(signed)  # per attempt: its timestamp
            headers = dict(signed.headers.items())
        timeout = httpx.Timeout(connect=self.timeouts.connect, read=None, write=self.timeouts.idle,
                                pool=self.timeouts.connect)
        return self._client.build_request(method, url, content=content, headers=headers, timeout=timeout)

    def status_error(self, status: int, headers: httpx.Headers, content: bytes) -> UpstreamError:
        try:
            body = json.loads(content) if content else None
        except ValueError:
            body = None
        body = body if isinstance(body, dict) else {}
        code = error_code(body, headers)
        message = _message(body) or content[:200].decode("utf-8", "replace").strip() or "no detail"
        relayed = self._redact_json({"message": message, **({"__type": code} if code else {})})
        text = self.redact(f"upstream answered {status}{f' {code}' if code else ''}: {message.splitlines()[0]}")
        return ERRORS.error(status, text, relayed, retry_after=parse_retry_after(headers), relayed=relayed)

    def is_terminal(self, event: SSEEvent) -> bool:
        return event.event == "metadata"

    # --- inference profiles --------------------------------------------------------------------

    def model_id(self, model: str) -> str:
        """The id to call for `model`: a bare id of a profile-only model as the profile of the
        channel's geography (known or learned); anything else as given."""
        if not _bare(model):
            return model
        if learned := _learned.get((self.base_url, model)):
            return learned
        return profiled_id(model, self.region, self.global_profiles)

    def _profile(self, model: str) -> str | None:
        prefix = "global" if self.global_profiles else geography(self.region)
        return f"{prefix}.{model}" if prefix else None

    async def _profiled(self, model: str, attempt: Callable[[str], Awaitable[T]]) -> T:
        target = self.model_id(model)
        try:
            return await attempt(target)
        except UpstreamError as exc:
            profile = self._profile(model) if target == model and _bare(model) else None
            if profile is None or not needs_profile(exc):
                raise
        _learned[(self.base_url, model)] = profile
        return await attempt(profile)

    @staticmethod
    def model_path(model: str, action: str) -> str:
        return f"/model/{quote(model, safe='')}/{action}"

    # --- operations ----------------------------------------------------------------------------

    async def converse(self, model: str, payload: dict[str, Any]) -> dict[str, Any]:
        return await self._profiled(model, lambda m: self.call(self.model_path(m, "converse"), payload))

    def stream_converse(self, model: str, payload: dict[str, Any]) -> EventStream:
        return ConverseStream(self, model, payload)

    async def invoke(self, model: str, payload: dict[str, Any]) -> tuple[dict[str, Any], httpx.Headers]:
        return await self._profiled(model, lambda m: self.exchange(self.model_path(m, "invoke"), payload))

    async def embeddings(self, body: dict[str, Any]) -> dict[str, Any]:
        """An OpenAI embeddings request served by InvokeModel: Titan Text Embeddings (one text per
        call: docs.aws.amazon.com/bedrock/latest/userguide/model-parameters-titan-embed-text.html)
        or Cohere Embed (up to 96 texts a call: .../model-parameters-embed.html); the answer in
        OpenAI's shape, its usage the upstream's count (Titan's `inputTextTokenCount`, Cohere's
        `X-Amzn-Bedrock-Input-Token-Count` header)."""
        model, texts = str(body["model"]), _texts(body.get("input"))
        vectors: list[list[float]] = []
        tokens = 0
        if "cohere.embed" in model:
            for start in range(0, len(texts), 96):
                answer, headers = await self.invoke(model, {"texts": texts[start:start + 96],
                                                            "input_type": "search_document",
                                                            "embedding_types": ["float"]})
                found = answer.get("embeddings")
                vectors += found.get("float") or [] if isinstance(found, dict) else found or []
                tokens += _int(headers.get("x-amzn-bedrock-input-token-count"))
        elif "titan-embed" in model:
            for text in texts:
                request: dict[str, Any] = {"inputText": text}
                if body.get("dimensions"):
                    request["dimensions"] = body["dimensions"]
                answer, headers = await self.invoke(model, request)
                vectors.append(answer.get("embedding") or [])
                tokens += _int(answer.get("inputTextTokenCount")) or _int(
                    headers.get("x-amzn-bedrock-input-token-count"))
        else:
            raise UpstreamError(400, f"{model}: not an embeddings model a bedrock channel knows "
                                "(Titan Text Embeddings or Cohere Embed)", fault=CLIENT)
        if len(vectors) != len(texts):
            raise UpstreamError(None, "the upstream answered a different number of embeddings", retryable=True)
        as_base64 = body.get("encoding_format") == "base64"
        data = [{"object": "embedding", "index": i,
                 "embedding": base64.b64encode(struct.pack(f"<{len(v)}f", *v)).decode() if as_base64 else v}
                for i, v in enumerate(vectors)]
        return {"object": "list", "data": data, "model": model,
                "usage": {"prompt_tokens": tokens, "total_tokens": tokens}}

    async def probe(self) -> None:
        """A Converse with no messages: Bedrock checks the signature and the permission before the
        body, so a ValidationException proves the credentials work, and nothing is generated."""
        try:
            await self.call(self.model_path(self.model_id(self.probe_model or "amazon.nova-micro-v1:0"), "converse"),
                            {"messages": []})
        except UpstreamError as exc:
            if exc.fault != CLIENT:
                raise


def _texts(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return list(value)
    raise UpstreamError(400, "input: a bedrock channel embeds text only (a string or a list of strings)",
                        fault=CLIENT)


def _int(value: Any) -> int:
    try:
        return int(value)
    except (TypeError, ValueError):
        return 0


_EXCEPTION_CASE = re.compile(r"^[a-z]")


class ConverseStream(EventStream):
    """A ConverseStream answer: signed when opened (as the profile may change the path), its AWS
    event-stream frames decoded by botocore (both CRCs checked), each event handed on as an
    `SSEEvent` named by its `:event-type` with the JSON payload as its data."""

    def __init__(self, owner: BedrockClient, model: str, payload: dict[str, Any]):
        super().__init__(owner, None)  # type: ignore[arg-type]  # built in open()
        self._bedrock = owner
        self._model, self._payload = model, payload

    async def open(self) -> None:
        if self._response is not None:
            return

        async def attempt(model: str) -> None:
            # A first answer refused (the on-demand profile case) was read and closed: start afresh.
            self._response, self._closed = None, False
            self._request = self._bedrock._request("POST", self._bedrock.model_path(model, "converse-stream"),
                                                   self._payload, stream=True)
            await EventStream.open(self)

        await self._bedrock._profiled(self._model, attempt)

    async def _events(self) -> AsyncGenerator[SSEEvent]:
        from botocore.eventstream import EventStreamBuffer, ParserError

        await self.open()
        frames = EventStreamBuffer()
        try:
            async with aclosing(self._chunks()) as chunks:
                async for chunk in chunks:
                    frames.add_data(chunk)
                    try:
                        messages = list(frames)
                    except ParserError as exc:  # a CRC that does not match, a broken prelude
                        raise UpstreamError(None, f"upstream event stream is corrupt ({type(exc).__name__})",
                                            retryable=True) from None
                    for message in messages:
                        event = self._event(message)
                        if self._owner.is_terminal(event):
                            self.completed = True
                        yield event
            if not self.completed:
                raise UpstreamError(None, "upstream stream ended before its final event", retryable=True)
        finally:
            await self.aclose()

    def _event(self, message: Any) -> SSEEvent:
        headers = message.headers
        kind = headers.get(":message-type")
        if kind == "event":
            return SSEEvent(event=str(headers.get(":event-type")), data=message.payload.decode("utf-8", "replace"))
        if kind == "exception":
            code = str(headers.get(":exception-type") or "InternalServerException")
            try:
                body = json.loads(message.payload)
            except ValueError:
                body = {}
            detail = _message(body) or "no detail"
        else:  # an unmodelled error: its code and message in headers
            code, detail = str(headers.get(":error-code") or "InternalServerException"), \
                str(headers.get(":error-message") or "no detail")
        code = _EXCEPTION_CASE.sub(lambda m: m.group(0).upper(), code)  # throttlingException: the union's member
        status = _STATUS.get(code, 500)
        relayed = self._bedrock._redact_json({"message": detail, "__type": code})
        raise ERRORS.error(status, self._bedrock.redact(f"upstream stream failed: {code}: {detail}"), relayed,
                           relayed=relayed)
