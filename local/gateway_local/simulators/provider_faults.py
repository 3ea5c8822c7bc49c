"""The providers' own refusals of a channel's credentials or account, word for word, on command.

Every simulator is wrapped by `with_provider_faults(app, provider)`, which answers, before the
simulator sees the request:

- every request under the mount's `/account/<name>/` prefix (a base URL ending in
  `.../content/account/keyinvalid` is a channel whose key was revoked), or
- a request whose body holds `#fault=<name>` (anywhere: a prompt),

with the body the provider really sends for that fault (below, each with where it was seen).
Any other request goes to the simulator unchanged (its body replayed).
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
ASGIApp = Callable[[Scope, Callable[[], Awaitable[Message]], Callable[[Message], Awaitable[None]]], Awaitable[None]]

_DIRECTIVE = re.compile(rb"#fault=(\w+)")
_PREFIX = re.compile(r"^/account/(\w+)(/.*)?$")


def _google(status: int, word: str, message: str, reason: str | None = None,
            extra: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    details = [{"@type": "type.googleapis.com/google.rpc.ErrorInfo", "reason": reason, "domain": "googleapis.com",
                "metadata": {"service": "generativelanguage.googleapis.com"}}] if reason else []
    if reason:
        details.append({"@type": "type.googleapis.com/google.rpc.LocalizedMessage", "locale": "en-US",
                        "message": message})
    return {"error": {"code": status, "message": message, "status": word, "details": details + (extra or [])}}


def _request_id() -> str:
    return str(uuid.uuid4())


#: provider -> fault name -> (status, body, headers). Bodies as the providers send them.
FAULTS: dict[str, dict[str, Callable[[], tuple[int, Any, dict[str, str]]]]] = {
    "google": {
        # A revoked, expired or wrong key: a 400, its ErrorInfo reason API_KEY_INVALID
        # (continuedev/continue#8516, google/timesketch#3703).
        "keyinvalid": lambda: (400, _google(400, "INVALID_ARGUMENT", "API key not valid. Please pass a valid API key.",
                                            "API_KEY_INVALID"), {}),
        # ai.google.dev/gemini-api/docs/troubleshooting: 400 FAILED_PRECONDITION.
        "precondition": lambda: (400, _google(400, "FAILED_PRECONDITION", "Gemini API free tier is not available "
                                              "in your country. Please enable billing on your project in Google "
                                              "AI Studio."), {}),
        # A quota limit, with the wait in its RetryInfo (ai.google.dev/gemini-api/docs/rate-limits;
        # google.rpc.RetryInfo).
        "exhausted": lambda: (429, _google(429, "RESOURCE_EXHAUSTED", "You exceeded your current quota, please "
                                           "check your plan and billing details.", extra=[
                                               {"@type": "type.googleapis.com/google.rpc.RetryInfo",
                                                "retryDelay": "17s"}]), {}),
    },
    "dashscope": {
        # help.aliyun.com/zh/dashscope/return-status-code-description; tencentmusic/supersonic#1572.
        "arrearage": lambda: (400, {"request_id": _request_id(), "code": "Arrearage",
                                    "message": "Access denied, please make sure your account is in good standing."},
                              {}),
        "freetier": lambda: (403, {"request_id": _request_id(), "code": "AllocationQuota.FreeTierOnly",
                                   "message": "The free tier of the model has been exhausted. If you wish to "
                                              "continue access the model on a paid basis, please disable the "
                                              "\"use free tier only\" mode in the management console."}, {}),
    },
    "ark": {
        # volcengine.com/docs/82379/1299023; coze-dev/coze-studio#2195.
        "overdue": lambda: (403, {"error": {"code": "AccountOverdueError", "message": "The request failed because "
                                            "your account has an overdue balance. Request id: " + _request_id(),
                                            "param": "", "type": "Forbidden"}}, {}),
        "setlimit": lambda: (429, {"error": {"code": "SetLimitExceeded", "message": "Your account has reached its "
                                             "set inference limit for this model.", "param": "",
                                             "type": "TooManyRequests"}}, {}),
    },
    "kling": {
        # Kling API reference, General Information: Error Code.
        "arrears": lambda: (429, {"code": 1101, "message": "Account in arrears", "request_id": _request_id()}, {}),
        "packdepleted": lambda: (429, {"code": 1102, "message": "Resource pack depleted or expired",
                                       "request_id": _request_id()}, {}),
    },
    "openai": {
        # platform.openai.com/docs/guides/error-codes; plexpt/chatgpt-java#249.
        "quota": lambda: (429, {"error": {"message": "You exceeded your current quota, please check your plan and "
                                          "billing details.", "type": "insufficient_quota", "param": None,
                                          "code": "insufficient_quota"}}, {}),
    },
    "azure": {
        # The content filter refusing a prompt: a 400 `content_filter`, its categories in
        # `innererror` (learn.microsoft.com/azure/ai-services/openai/concepts/content-filter
        # "Scenario details"; the body as users meet it: vibrantlabsai/ragas#649).
        "content_filter": lambda: (400, {"error": {
            "message": "The response was filtered due to the prompt triggering Azure OpenAI's content management "
                       "policy. Please modify your prompt and retry. To learn more about our content filtering "
                       "policies please read our documentation: https://go.microsoft.com/fwlink/?linkid=2198766",
            "type": None, "param": "prompt", "code": "content_filter", "status": 400,
            "innererror": {"code": "ResponsibleAIPolicyViolation", "content_filter_result": {
                "hate": {"filtered": False, "severity": "safe"}, "jailbreak": {"filtered": False, "detected": False},
                "self_harm": {"filtered": False, "severity": "safe"}, "sexual": {"filtered": False, "severity": "safe"},
                "violence": {"filtered": True, "severity": "medium"}}}}}, {}),
        # A wrong or regenerated key (Azure OpenAI REST reference, "Authentication").
        "keyinvalid": lambda: (401, {"error": {"code": "401", "message": "Access denied due to invalid subscription "
                                               "key or wrong API endpoint. Make sure to provide a valid key for an "
                                               "active subscription and use a correct regional API endpoint for your "
                                               "resource."}}, {}),
    },
    "anthropic": {
        # anthropics/claude-code#4684, anthropics/claude-quickstarts#229.
        "credit": lambda: (400, {"type": "error", "error": {
            "type": "invalid_request_error", "message": "Your credit balance is too low to access the Anthropic API. "
                                                        "Please go to Plans & Billing to upgrade or purchase credits."},
            "request_id": "req_" + uuid.uuid4().hex[:24]}, {}),
    },
    "midjourney-proxy": {
        # novicezk/midjourney-proxy SubmitController: every Discord account disabled or disconnected.
        "noaccount": lambda: (200, {"code": 3, "description": "无可用的账号实例", "result": None,
                                    "properties": {}}, {}),
    },
}


def with_provider_faults(app: ASGIApp, provider: str) -> Any:
    """`app`, answering the provider's named faults first (module docstring). (Typed `Any`: the
    simulators' `app` stays what the runner mounts, whatever Starlette's own type.)"""
    table = FAULTS[provider]

    async def wrapped(scope: Scope, receive: Callable[[], Awaitable[Message]],
                      send: Callable[[Message], Awaitable[None]]) -> None:
        if scope["type"] != "http":
            await app(scope, receive, send)
            return
        path, root = scope["path"], scope.get("root_path", "")
        route = path[len(root):] if root and path.startswith(root) else path
        if (prefix := _PREFIX.match(route)) and prefix[1] in table:
            await _answer(send, *table[prefix[1]]())
            return
        chunks, more = [], True
        while more:
            message = await receive()
            chunks.append(message.get("body", b""))
            more = message.get("more_body", False) and message["type"] == "http.request"
        body = b"".join(chunks)
        named = next((m[1].decode() for m in _DIRECTIVE.finditer(body) if m[1].decode() in table), None)
        if named is not None:
            await _answer(send, *table[named]())
            return
        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        await app(scope, replay, send)

    return wrapped


async def _answer(send: Callable[[Message], Awaitable[None]], status: int, body: Any, headers: dict[str, str]) -> None:
    raw = json.dumps(body, ensure_ascii=False).encode()
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(raw)).encode()),
                            *((k.encode(), v.encode()) for k, v in headers.items())]})
    await send({"type": "http.response.body", "body": raw})
