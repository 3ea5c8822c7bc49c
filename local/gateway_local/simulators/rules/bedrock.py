"""What Amazon Bedrock Runtime refuses, each rule with its source.

- The request's shape: botocore's own validator (`botocore.validate.ParamValidator`) against the
  operation's input shape in botocore's service model of `bedrock-runtime` (2023-09-30): unknown
  members, missing required ones, wrong types, lengths and ranges below the model's minimums.
- A signature: AWS Signature Version 4 recomputed by botocore's `SigV4Auth` with the secret the
  access key belongs to (docs.aws.amazon.com/IAM/latest/UserGuide/reference_sigv-troubleshooting.html;
  the 403 bodies as Bedrock's users quote them: BerriAI/litellm#14763 for a wrong secret,
  anthropics/claude-code#2260 for an unknown key or token).
- Profile-only models: a bare id of Claude 3.7 and later is refused on demand with the exact
  ValidationException users quote (anthropic-sdk-python#894, cline#2482); a geographic profile
  is served only from a Region of its geography (docs.aws.amazon.com/bedrock/latest/userguide/
  inference-profiles-support.html: each profile lists its source Regions).
- Tool blocks without a toolConfig (langgenius/dify#17545, patriceckhart/zot#18).
- Claude's thinking rules, relayed by Bedrock in Anthropic's words (spring-ai#6413,
  RooCode#11238): the messages simulator's rules (`rules.messages`) on the blocks translated.
"""

from __future__ import annotations

import datetime
import functools
import hmac
import re
from typing import Any

from gateway.routing.catalog import SIMULATOR_KEYS

from . import messages as messages_rules

# Credentials the simulator knows (an IAM user's: the simulator channel's; a role's with its
# session token; an API key).
ACCESS_KEY, SECRET_KEY, _ = SIMULATOR_KEYS["bedrock"].split("|")
ROLE_ACCESS_KEY, ROLE_SECRET_KEY, ROLE_TOKEN = "ASIASIMULATEDROLE", "simulated-role-secret", "simulated-session-token"
API_KEY = "ABSKc2ltdWxhdGVkLWJlZHJvY2stYXBpLWtleQ=="
SECRETS = {ACCESS_KEY: SECRET_KEY, ROLE_ACCESS_KEY: ROLE_SECRET_KEY}

_AUTH = re.compile(r"AWS4-HMAC-SHA256 Credential=([^/]+)/(\d{8})/([^/]+)/([^/]+)/aws4_request, "
                   r"SignedHeaders=([^,]+), Signature=([0-9a-f]{64})$")
INVALID_TOKEN = "The security token included in the request is invalid."
INVALID_SIGNATURE = ("The request signature we calculated does not match the signature you provided. Check your "
                     "AWS Secret Access Key and signing method. Consult the service documentation for details.")
ON_DEMAND = ("Invocation of model ID {model} with on-demand throughput isn’t supported. Retry your request with "
             "the ID or ARN of an inference profile that contains this model.")
TOOL_CONFIG = "The toolConfig field must be defined when using toolUse and toolResult content blocks."
INVALID_MODEL = "The provided model identifier is invalid."
_PROFILE_ONLY = re.compile(r"^anthropic\.claude-(3-7-|(sonnet|opus|haiku)-\d)")
_GEOGRAPHIES = {"us": ("us-", "ca-"), "eu": ("eu-",), "apac": ("ap-",), "us-gov": ("us-gov-",), "jp": ("ap-",),
                "au": ("ap-",)}


@functools.cache
def _service_model() -> Any:
    import botocore.session

    return botocore.session.get_session().get_service_model("bedrock-runtime")


def shape_refusal(operation: str, model_id: str, body: dict[str, Any]) -> str | None:
    """botocore's validation report for the operation's input, None when it is valid."""
    from botocore.validate import ParamValidator

    shape = _service_model().operation_model(operation).input_shape
    report = ParamValidator().validate({"modelId": model_id, **body}, shape)
    return report.generate_report() if report.has_errors() else None


def signature_refusal(method: str, url: str, headers: dict[str, str], body: bytes,
                      now: datetime.datetime, service_name: str = "bedrock") -> tuple[str, str] | None:
    """(error code, message) of Bedrock's 403 for this request's credentials, None when they are good;
    `service_name` "s3" for the batch bucket's objects (S3's SigV4, botocore's `S3SigV4Auth`)."""
    from botocore.auth import S3SigV4Auth, SigV4Auth
    from botocore.awsrequest import AWSRequest
    from botocore.credentials import Credentials

    authorization = headers.get("authorization", "")
    if authorization.startswith("Bearer "):
        # An API key (docs.aws.amazon.com/bedrock/latest/userguide/api-keys.html); the refusal's wording unverified.
        return None if hmac.compare_digest(authorization[7:], API_KEY) else ("UnrecognizedClientException",
                                                                              INVALID_TOKEN)
    match = _AUTH.match(authorization)
    if not match:
        return "MissingAuthenticationTokenException", "Missing Authentication Token"
    access_key, _, region, service, signed, signature = match.groups()
    if service != service_name:  # the signing name in botocore's service model
        return "InvalidSignatureException", f"Credential should be scoped to correct service: '{service_name}'."
    secret = SECRETS.get(access_key)
    token = headers.get("x-amz-security-token")
    # A role's keys need their session token; an IAM user's keys with some token are refused too.
    if secret is None or (access_key == ROLE_ACCESS_KEY) != (token is not None) or \
            (token is not None and not hmac.compare_digest(token, ROLE_TOKEN)):
        return "UnrecognizedClientException", INVALID_TOKEN
    stamp = headers.get("x-amz-date", "")
    try:
        when = datetime.datetime.strptime(stamp, "%Y%m%dT%H%M%SZ").replace(tzinfo=datetime.UTC)
    except ValueError:
        return ("IncompleteSignatureException",
                "Authorization header requires existence of either a 'X-Amz-Date' header.")
    if abs((now - when).total_seconds()) > 300:  # SigV4: a signature is good for 5 minutes
        return "InvalidSignatureException", f"Signature expired: {stamp} is now earlier than the allowed window."
    names = signed.split(";")
    if any(name not in headers for name in names):
        return "InvalidSignatureException", INVALID_SIGNATURE
    request = AWSRequest(method=method, url=url, data=body, headers={n: headers[n] for n in names})
    request.context["timestamp"] = stamp
    signer = (S3SigV4Auth if service == "s3" else SigV4Auth)(Credentials(access_key, secret, token), service, region)
    expected = signer.signature(signer.string_to_sign(request, signer.canonical_request(request)), request)
    return None if hmac.compare_digest(expected, signature) else ("InvalidSignatureException", INVALID_SIGNATURE)


def signing_region(headers: dict[str, str]) -> str | None:
    match = _AUTH.match(headers.get("authorization", ""))
    return match.group(3) if match else None


def model_refusal(model_id: str, region: str | None) -> str | None:
    """The ValidationException of a model id Bedrock will not serve on demand in this Region."""
    if _PROFILE_ONLY.match(model_id):
        return ON_DEMAND.format(model=model_id)
    prefix, _, rest = model_id.partition(".")
    if prefix in _GEOGRAPHIES and rest.startswith("anthropic."):
        if region is not None and not region.startswith(_GEOGRAPHIES[prefix]):
            return INVALID_MODEL
    return None


def _has_tool_blocks(body: dict[str, Any]) -> bool:
    return any(isinstance(b, dict) and ("toolUse" in b or "toolResult" in b)
               for m in body.get("messages") or [] for b in m.get("content") or [])


def _anthropic_block(block: dict[str, Any]) -> dict[str, Any]:
    """A converse block as the messages dialect writes it, for Anthropic's own rules."""
    if "reasoningContent" in block:
        reasoning = block["reasoningContent"]
        if "redactedContent" in reasoning:
            return {"type": "redacted_thinking", "data": reasoning["redactedContent"]}
        text = reasoning.get("reasoningText") or {}
        return {"type": "thinking", "thinking": text.get("text") or "", "signature": text.get("signature") or ""}
    if "toolUse" in block:
        return {"type": "tool_use", "id": block["toolUse"].get("toolUseId"), "name": block["toolUse"].get("name")}
    if "toolResult" in block:
        return {"type": "tool_result", "tool_use_id": block["toolResult"].get("toolUseId")}
    return {"type": "text", "text": block.get("text") or ""}


def conversation_refusal(body: dict[str, Any]) -> str | None:
    """The ValidationException of a conversation Bedrock (or Claude behind it) refuses."""
    if _has_tool_blocks(body) and not body.get("toolConfig"):
        return TOOL_CONFIG
    extra = body.get("additionalModelRequestFields") or {}
    messages = [{"role": m.get("role"), "content": [_anthropic_block(b) for b in m.get("content") or []
                                                    if isinstance(b, dict) and "cachePoint" not in b]}
                for m in body.get("messages") or []]
    found = messages_rules._thinking_blocks({"thinking": extra.get("thinking"), "messages": messages})
    return found[0] if found else None
