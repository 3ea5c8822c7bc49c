"""The operator's routes of the console (`/api/admin/...`, role 10 or more): users (list by
page, create with a password, enable or disable, add quota), the channels with their health, and
spend across all users per day and model, and each user's limits. Each answers new-api's envelope
(`{"success", "message", "data"}`); who may call is `session.require_operator`'s rule."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import date
from typing import Any

from gateway import groups
from gateway.admission import balances
from gateway.api.account import spend_answer, spend_rows, spend_span
from gateway.api.tokens import changed_limits
from gateway.errors import Conflict, InvalidRequest, NotFound, PermissionDenied, shown
from gateway.keys import new_secret
from gateway.limit_values import Limits
from gateway.passwords import hash_password
from gateway.routing.channels import get_catalog
from gateway.routing.health import book, channels_view
from gateway.schemas.account import NewUser, QuotaAddition, UserLimits, UserStatus, UserUpdate
from gateway.store.signin import SignInRepository
from gateway.store.table import UserNotFound
from gateway.store.users import NameTaken, UsersRepository
from gateway.validation import parse_body

PAGE_SIZE_DEFAULT, PAGE_SIZE_MAX = 20, 100
#: Spend across users reads each user's day totals: at most this many users per answer.
SPEND_USERS_MAX = 1000
_USER_FIELDS = ("id", "username", "display_name", "email", "role", "status", "quota", "owed_quota", "used_quota",
                "request_count", "group", "can_use_self_group", "created_at")


def _user_view(user: dict[str, Any]) -> dict[str, Any]:
    return {**{name: user.get(name) for name in _USER_FIELDS}, "owed_quota": int(user.get("owed_quota") or 0),
            **Limits.of(user).view()}


def _ok(data: Any) -> dict[str, Any]:
    return {"success": True, "message": "", "data": data}


def _number(query: dict[str, str] | None, name: str, default: int | None, low: int, high: int) -> int | None:
    text = ((query or {}).get(name) or "").strip()
    if not text:
        return default
    if not (text.isascii() and text.isdigit() and len(text) <= 19 and low <= int(text) <= high):
        raise InvalidRequest(f"{name}: must be a whole number from {low} to {high}, got '{shown(text, 40)}'",
                             param=name)
    return int(text)


def user_id_of(text: str) -> int:
    if not (text.isascii() and text.isdigit() and len(text) <= 19):
        raise InvalidRequest(f"id: must be a user id (digits), got '{shown(text, 40)}'", param="id")
    return int(text)


ROOT_ROLE = 100


def check_manages(manager: Mapping[str, Any], user_id: int) -> None:
    """new-api's rule: an operator manages only users of a role below its own; the root (100)
    manages everyone. A user that does not exist is the caller's 404 to meet."""
    role = int(manager.get("role", 1))
    target = balances.get_user(user_id)
    if target is None:
        raise NotFound(f"id: no user {user_id}", param="id")
    if role != ROOT_ROLE and int(target.get("role", 1)) >= role:
        raise PermissionDenied(f"id: user {user_id} has a role ({target.get('role')}) not below yours ({role}); "
                               "only the root manages it")


def users(query: dict[str, str] | None) -> dict[str, Any]:
    """GET /api/admin/users?page_size=&after=: users by id, a page at a time, each as the user sees
    itself (`balances`: what its open quota leases hold and have spent included)."""
    size = _number(query, "page_size", PAGE_SIZE_DEFAULT, 1, PAGE_SIZE_MAX) or PAGE_SIZE_DEFAULT
    after = _number(query, "after", None, 0, 2**63 - 1)
    page, last = balances.users_page(size, after)  # the user's own view: open leases included
    return _ok({"items": [_user_view(user) for user in page],
                "next_after": last})


def create_user(body: str | bytes | None, *, manager: Mapping[str, Any]) -> dict[str, Any]:
    """POST /api/admin/users: a user with a password (it signs in at once) and its access token.
    Only the root makes operators or roots; an operator makes users (a role below its own)."""
    accounts, sign_in = UsersRepository(), SignInRepository()
    request = parse_body(NewUser, body)
    role = int(manager.get("role", 1))
    if role != ROOT_ROLE and request.role >= role:
        raise PermissionDenied(f"role: only the root makes a user of role {request.role} (yours is {role})",
                               param="role")
    if sign_in.user_id_for_username(request.username) is not None:
        raise Conflict(f"username: '{request.username}' is taken", param="username")
    token = new_secret()
    try:  # the profile with its name's claim and its password: one transaction
        user = accounts.create_user(username=request.username, display_name=request.display_name,
                                    email=request.email, role=request.role, quota=request.quota,
                                    password_hash=hash_password(request.password))
    except NameTaken:
        raise Conflict(f"username: '{request.username}' is taken", param="username") from None
    accounts.set_access_token(int(user["id"]), token)
    sign_in.refresh_decoy(int(user["id"]))
    return _ok({**_user_view(user), "access_token": token})


def set_status(user_id: int, body: str | bytes | None, *, operator_id: int,
               manager: Mapping[str, Any]) -> dict[str, Any]:
    """PUT /api/admin/users/{id}/status: 2 disables the user and refuses each of its keys at
    once; 1 enables it again (and the keys disabling took). An operator never disables itself
    (it would lock itself out of the console)."""
    request = parse_body(UserStatus, body)
    if user_id == operator_id and request.status != 1:
        raise InvalidRequest("id: an operator cannot disable its own account", param="id")
    check_manages(manager, user_id)
    try:
        changed = UsersRepository().set_user_enabled(user_id, request.status == 1)
    except UserNotFound:
        raise NotFound(f"id: no user {user_id}", param="id") from None
    return _ok({"id": user_id, "status": request.status, "keys_changed": changed})


def add_quota(user_id: int, body: str | bytes | None, *, manager: Mapping[str, Any]) -> dict[str, Any]:
    """POST /api/admin/users/{id}/quota: units added on top of what the user has left."""
    request = parse_body(QuotaAddition, body)
    check_manages(manager, user_id)
    try:
        quota = balances.add_user_quota(user_id, request.quota)
    except UserNotFound:
        raise NotFound(f"id: no user {user_id}", param="id") from None
    return _ok({"id": user_id, "quota": quota})


def set_limits(user_id: int, body: str | bytes | None, *, manager: Mapping[str, Any]) -> dict[str, Any]:
    """PUT /api/admin/users/{id}/limits: the user's rpm, tpm, max_parallel and budget."""
    request = parse_body(UserLimits, body)
    check_manages(manager, user_id)
    user = balances.get_user(user_id)
    if user is None:
        raise NotFound(f"id: no user {user_id}", param="id")
    limits = changed_limits(request, Limits.of(user))
    try:
        UsersRepository().set_limits(limits=limits.attributes(clearing=True), user_id=user_id)
    except UserNotFound:
        raise NotFound(f"id: no user {user_id}", param="id") from None
    return _ok({"id": user_id, **limits.view()})


def update_user(body: str | bytes | None, *, manager: Mapping[str, Any]) -> dict[str, Any]:
    """PUT /api/user/ {id, group, can_use_self_group}: moves a user to a group GroupRatio prices
    (another is a 400) and says whether it may choose any priced group for its keys. Its keys are
    priced and routed by the new group within the key cache's seconds, never mid-request."""
    request = parse_body(UserUpdate, body)
    check_manages(manager, request.id)
    changes: dict[str, Any] = {}
    if request.group is not None:
        ratio = groups.ratio_of(request.group)
        if ratio is None:
            raise InvalidRequest(f"group: '{shown(request.group, 40)}' has no ratio in GroupRatio "
                                 f"(one of {', '.join(sorted(groups.ratios()))})", param="group")
        changes["group"] = request.group
    if request.can_use_self_group is not None:
        changes["can_use_self_group"] = request.can_use_self_group
    if not changes:
        raise InvalidRequest("group: give group or can_use_self_group to change", param="group")
    try:
        user = UsersRepository().set_user_fields(request.id, changes)
    except UserNotFound:
        raise NotFound(f"id: no user {request.id}", param="id") from None
    return _ok(_user_view(user))


def channels() -> dict[str, Any]:
    """GET /api/admin/channels: every channel (never its key) with its health as every instance
    sees it (`routing/health`: healthy, cooling until when, disabled; failures, last error, last
    probe), read from the store itself."""
    return _ok(channels_view(get_catalog(), book().store.all()))


def spend(query: dict[str, str] | None, today: date | None = None) -> dict[str, Any]:
    """GET /api/admin/spend?days=7|30|90: every user's spend per UTC day and model, added up (one
    Query per user, up to SPEND_USERS_MAX users)."""
    accounts = UsersRepository()
    first, last = spend_span(query, today)
    rows: dict[tuple[str, str], list[int]] = {}
    page, after = accounts.users_page(PAGE_SIZE_MAX, None)
    seen = 0
    while page and seen < SPEND_USERS_MAX:
        for user in page:
            for key, counted in spend_rows(balances.day_totals(int(user["id"]), first, last)).items():
                row = rows.setdefault(key, [0] * len(counted))
                for n, value in enumerate(counted):
                    row[n] += value
        seen += len(page)
        if after is None:
            break
        page, after = accounts.users_page(PAGE_SIZE_MAX, after)
    return spend_answer(rows, first, last)
