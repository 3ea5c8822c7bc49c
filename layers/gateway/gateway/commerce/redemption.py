"""Redemption codes (new-api's `/api/redemption/` and `POST /api/user/topup`).

An operator makes codes in bulk (a random 32-character key each, like new-api's UUIDs without
dashes: 128 bits, not guessable), lists, edits, disables and deletes them. A user redeems one:
the code is marked used, with who and when, in the same transaction that adds its quota and
writes the top-up entry of the user's log (`credits.apply`), on the condition that it is
enabled, unexpired and still worth what was read. So two hundred users racing for one code on
any number of instances credit it once; an expired, disabled or used code changes nothing.
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from gateway.commerce import credits
from gateway.commerce.store import CommerceRepository, code_key
from gateway.errors import Conflict, InvalidRequest, NotFound
from gateway.prices import usd_text
from gateway.schemas.commerce import (
    CODE_DISABLED,
    CODE_ENABLED,
    CODE_USED,
    CodeStatus,
    CodeUpdate,
    NewCodes,
    Redeem,
)
from gateway.settings import get_settings
from gateway.store.aws import to_item, to_values
from gateway.validation import integer_param

PAGE_SIZE_DEFAULT, PAGE_SIZE_MAX = 20, 100
#: Pages reach back at most this many codes (p x page_size), as the request log's do.
MAX_EXAMINED = 1000
_SHOWN = ("id", "key", "name", "quota", "status", "created_time", "redeemed_time", "used_user_id",
          "expired_time", "user_id")


def _shown(code: Mapping[str, Any]) -> dict[str, Any]:
    return {name: code[name] for name in _SHOWN}  # `create` writes every one, and nothing removes one


def create(request: NewCodes, operator_id: int, repo: CommerceRepository | None = None,
           now: int | None = None) -> dict[str, Any]:
    """POST /api/redemption/: the new codes in `data` (new-api's answer)."""
    repo = repo or CommerceRepository()
    now = int(time.time()) if now is None else now
    if request.expired_time and request.expired_time <= now:
        raise InvalidRequest("expired_time: must be 0 (never) or a time in the future", param="expired_time")
    made: list[str] = []
    for code_id in repo.next_ids("REDEMPTION", request.count):
        key = secrets.token_hex(16)
        repo.put_code({"id": code_id, "key": key, "name": request.name, "quota": request.quota,
                       "status": CODE_ENABLED, "created_time": now, "redeemed_time": 0, "used_user_id": 0,
                       "expired_time": request.expired_time, "user_id": operator_id})
        made.append(key)
    return {"success": True, "message": "", "data": made}


def _page_params(query: Mapping[str, str] | None) -> tuple[int, int]:
    params = {k: v for k, v in (query or {}).items() if v is not None and str(v).strip() != ""}
    page = integer_param(params, "p", 1, 1, None)
    size = integer_param(params, "page_size", PAGE_SIZE_DEFAULT, 1, PAGE_SIZE_MAX)
    if page * size > MAX_EXAMINED:
        raise InvalidRequest(f"p: pages reach back at most {MAX_EXAMINED} codes (p x page_size)", param="p")
    return page, size


def listed(query: Mapping[str, str] | None, repo: CommerceRepository | None = None) -> dict[str, Any]:
    """GET /api/redemption/?p=&page_size=: codes newest first, new-api's page object."""
    repo = repo or CommerceRepository()
    page, size = _page_params(query)
    codes, more = repo.codes_page(limit=page * size, before_id=None)
    items = [_shown(code) for code in codes[(page - 1) * size:]]
    total = len(codes) + (1 if more else 0)  # at least: the page read stops where it must
    return {"success": True, "message": "", "data": {
        "items": items, "page": page, "page_size": size, "total": total, "has_more": more}}


def _code(code_id: int, repo: CommerceRepository) -> dict[str, Any]:
    code = repo.code_by_id(code_id)
    if code is None:
        raise NotFound(f"id: no redemption code {code_id}", param="id")
    return code


def one(code_id: int, repo: CommerceRepository | None = None) -> dict[str, Any]:
    """GET /api/redemption/{id}."""
    return {"success": True, "message": "", "data": _shown(_code(code_id, repo or CommerceRepository()))}


def code_id_of(text: str) -> int:
    if not (text.isascii() and text.isdigit() and len(text) <= 18):
        raise InvalidRequest(f"id: must be a redemption code's numeric id, got '{text[:40]}'", param="id")
    return int(text)


def update(request: CodeUpdate, repo: CommerceRepository | None = None, now: int | None = None) -> dict[str, Any]:
    """PUT /api/redemption/: name, quota and expiry of a code not yet used (a used one is a 409)."""
    repo = repo or CommerceRepository()
    now = int(time.time()) if now is None else now
    if request.expired_time and request.expired_time <= now:
        raise InvalidRequest("expired_time: must be 0 (never) or a time in the future", param="expired_time")
    code = _code(request.id, repo)
    changes = {"name": request.name, "quota": request.quota, "expired_time": request.expired_time}
    if not repo.update_unused(code["key"], changes, used=CODE_USED):
        raise Conflict(f"redemption code {request.id} has been used; a used code does not change", param="id")
    return {"success": True, "message": "", "data": _shown({**code, **changes})}


def set_status(request: CodeStatus, repo: CommerceRepository | None = None) -> dict[str, Any]:
    """PUT /api/redemption/?status_only=true: enable or disable a code not yet used."""
    repo = repo or CommerceRepository()
    code = _code(request.id, repo)
    if not repo.update_unused(code["key"], {"status": request.status}, used=CODE_USED):
        raise Conflict(f"redemption code {request.id} has been used; a used code does not change", param="id")
    return {"success": True, "message": "", "data": _shown({**code, "status": request.status})}


def delete(code_id: int, repo: CommerceRepository | None = None) -> dict[str, Any]:
    """DELETE /api/redemption/{id}: the code is gone (a used one too: its credit stays in the log)."""
    repo = repo or CommerceRepository()
    repo.delete_code(_code(code_id, repo)["key"])
    return {"success": True, "message": ""}


def _refusal(code: Mapping[str, Any] | None, now: int) -> str | None:
    """Why this code cannot be redeemed now (None: it can)."""
    if code is None:
        return "key: no such redemption code"
    if int(code["status"]) == CODE_USED:
        return "key: this redemption code has already been used"
    if int(code["status"]) == CODE_DISABLED:
        return "key: this redemption code is disabled"
    expires = int(code["expired_time"])
    if expires and expires <= now:
        return "key: this redemption code has expired"
    return None


def redeem(user_id: int, request: Redeem, repo: CommerceRepository | None = None,
           now: int | None = None) -> dict[str, Any]:
    """POST /api/user/topup {key}: the code's quota added to the caller's, once; `data` is the
    units added (new-api's answer)."""
    repo = repo or CommerceRepository()
    now = int(time.time()) if now is None else now
    for _ in range(3):  # only an operator's edit between the read and the claim asks again
        code = repo.code(request.key)
        refusal = _refusal(code, now)
        if refusal is not None:
            if code is not None and int(code["status"]) == CODE_USED and int(code["used_user_id"]) == user_id:
                # This user's own earlier redemption (say, a retry after a lost answer): said so,
                # never credited again.
                at = datetime.fromtimestamp(int(code["redeemed_time"]), UTC).strftime("%Y-%m-%d %H:%M UTC")
                refusal = (f"key: you redeemed this code already (on {at}); "
                           f"its {usd_text(int(code['quota']))} were added then")
            raise InvalidRequest(refusal, param="key", code="redemption_refused")
        assert code is not None
        units = int(code["quota"])
        claim = {"Update": {
            "TableName": get_settings().accounts_table, "Key": to_item(code_key(request.key)),
            "UpdateExpression": "SET #s = :used, used_user_id = :user, redeemed_time = :now",
            "ConditionExpression": "#s = :enabled AND quota = :q AND (expired_time = :never OR expired_time > :now)",
            "ExpressionAttributeNames": {"#s": "status"},
            "ExpressionAttributeValues": to_values({":used": CODE_USED, ":user": user_id, ":now": now,
                                                    ":enabled": CODE_ENABLED, ":q": units, ":never": 0})}}
        credit = credits.Credit(credit_id=f"redeem-{code['id']}", user_id=user_id, units=units, route="redemption",
                                detail={"code_id": int(code["id"]), "name": str(code["name"])})
        try:
            credits.apply(credit, [claim])
        except credits.ClaimFailed:
            continue  # used, disabled, expired or edited meanwhile: read it again and answer from that
        return {"success": True, "message": "", "data": units}
    raise Conflict("key: the redemption code changed while it was redeemed; try again", param="key")

