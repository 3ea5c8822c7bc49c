"""Invitations (new-api's `GET /api/user/aff`, `POST /api/user/aff_transfer`).

Each user has an invitation code (`aff_code`). Whoever signs up with it is their invitee
(`inviter_id`, counted in the inviter's `aff_count`); the inviter's reward (`QuotaForInviter`)
is paid into `aff_quota` and `aff_history_quota` at the invitee's first credited payment, never
at sign-up (`payments.credit_order`), so scripted sign-ups earn nothing. The inviter moves reward
into quota with `aff_transfer`: one transaction that takes the units from `aff_quota` on the
condition that they are there and adds them to `quota`, with a top-up log entry (`credits.apply`).
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from typing import Any

from gateway.commerce import credits
from gateway.errors import InvalidRequest
from gateway.prices import UNITS_PER_USD, usd_text

#: new-api's smallest transfer (model/user.go, TransferAffQuotaToQuota): one USD of quota.
MIN_TRANSFER_UNITS = UNITS_PER_USD


def aff(user: Mapping[str, Any]) -> dict[str, Any]:
    """GET /api/user/aff: the caller's invitation code in `data`."""
    return {"success": True, "message": "", "data": str(user.get("aff_code") or "")}


def transfer(user_id: int, units: int) -> dict[str, Any]:
    """POST /api/user/aff_transfer {quota}: reward units moved into quota, never below zero."""
    if units < MIN_TRANSFER_UNITS:
        raise InvalidRequest(f"quota: the smallest transfer is {usd_text(MIN_TRANSFER_UNITS)}", param="quota")
    credit = credits.Credit(credit_id=f"aff-{uuid.uuid4().hex}", user_id=user_id, units=units,
                            route="aff_transfer", detail={"from": "aff_quota"}, profile_adds={"aff_quota": -units},
                            profile_condition="aff_quota >= :want", profile_values={":want": units})
    try:
        credits.apply(credit, [])
    except credits.ProfileRefused:
        raise InvalidRequest("quota: more than the invitation reward you have not yet transferred",
                             param="quota") from None
    return {"success": True, "message": "", "data": units}
