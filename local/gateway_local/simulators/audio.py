"""Simulated speech, transcription, translation and moderation endpoints of the chat protocol
(dev-only), mounted inside the chat simulator (`routes`, paths relative to `/chat`).

- `POST /v1/moderations`: OpenAI's `CreateModerationResponse` (openai-openapi `openapi.yaml`;
  SDK `types/moderation.py`: every one of the 13 categories in `categories`, `category_scores`
  and `category_applied_input_types`, one result per input). Plain threats of violence (a small
  lexicon: "kill", "shoot", "stab", "hurt you", ...) are flagged as `violence` and
  `harassment/threatening`; anything else passes.

Errors in the chat envelope; `Authorization: Bearer <anything non-empty>` wanted.
"""

from __future__ import annotations

import re
import uuid
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from gateway.errors import InvalidRequest
from gateway.schemas.moderation import ModerationRequest, TextPart
from gateway.validation import parse_model

from ._text import error_json, fault_of, fault_status, json_body

CATEGORIES = ("harassment", "harassment/threatening", "hate", "hate/threatening", "illicit", "illicit/violent",
              "self-harm", "self-harm/intent", "self-harm/instructions", "sexual", "sexual/minors", "violence",
              "violence/graphic")
# Which categories an image can count in (SDK `CategoryAppliedInputTypes`): the rest are text only.
_IMAGE_CATEGORIES = frozenset({"self-harm", "self-harm/intent", "self-harm/instructions", "sexual", "violence",
                               "violence/graphic"})
_THREAT = re.compile(r"\b(kill|murder|shoot|stab|strangle|behead|hurt you|beat you|break your)\b", re.IGNORECASE)


def error(status: int, message: str, param: str | None = None) -> JSONResponse:
    kind = "invalid_request_error" if status < 500 else "server_error"
    return error_json(status, {"error": {"message": message, "type": kind, "param": param, "code": None}})


def _authorised(request: Request) -> bool:
    header = request.headers.get("authorization", "")
    return header.startswith("Bearer ") and bool(header[7:].strip())


def _result(text: str, kind: str) -> dict[str, Any]:
    threat = bool(_THREAT.search(text))
    flagged = {c: threat and c in ("violence", "harassment/threatening", "harassment") for c in CATEGORIES}
    scores = {c: (0.91 if flagged[c] else 0.0004) for c in CATEGORIES}
    applied = {c: ([kind] if kind == "text" or c in _IMAGE_CATEGORIES else []) for c in CATEGORIES}
    return {"flagged": threat, "categories": flagged, "category_scores": scores,
            "category_applied_input_types": applied}


async def moderations(request: Request) -> Response:
    if not _authorised(request):
        return error(401, "You didn't provide an API key.")
    body = await json_body(request)
    if body is None:
        return error(400, "We could not parse the JSON body of your request.")
    if status := fault_status(fault_of(request, str(body.get("input", "")) if isinstance(body, dict) else "")):
        return error(status, f"The simulated upstream failed with {status} as asked.")
    try:
        req = parse_model(ModerationRequest, body)
    except InvalidRequest as exc:
        return error(400, exc.message, exc.param)
    items = [req.input] if isinstance(req.input, str) else req.input
    results = [_result(item, "text") if isinstance(item, str) else
               _result(item.text, "text") if isinstance(item, TextPart) else _result("", "image") for item in items]
    return JSONResponse({"id": f"modr-{uuid.uuid4().hex}", "model": req.model, "results": results})


routes = [
    Route("/v1/moderations", moderations, methods=["POST"]),
]
