"""The one way quota is added to an account by money or codes: exactly once, with its log entry.

A credit is one DynamoDB transaction of three kinds of write:

- the **claim**: the conditional write that makes the source spent (a code marked used while it is
  unused and unexpired, an order marked paid while it is pending, ...), first, so that a second
  credit of the same source fails its condition and changes nothing;
- the **profile update**: `ADD quota` (and whatever else moves with it, e.g. reward units), only on
  an existing profile;
- the **log entry**: a top-up entry (new-api's log type 1) in the user's ledger, keyed by the
  credit's id, written only if absent.

All or nothing: a crash before the transaction changes nothing, after it everything is there.
A retry of the same call after a lost answer carries botocore's `ClientRequestToken`, which
DynamoDB treats as the same transaction for ten minutes; a later retry meets the claim's condition
(`ClaimFailed`), and the caller answers from the source's state (the same user's code: redeemed).
A transaction cancelled only by another transaction's conflict is asked again (`admission.transactions.transact`).

An account that owes units (`owed_quota`: a refund or a dispute took back more than it held,
`commerce.reversals`) repays them first: the credit's units go to the debt, the rest to the
quota, conditioned on the debt just read (asked again if a reversal moved it meanwhile).

Top-up entries carry `units: 0` (nothing was spent: usage and spend never count them) and the
credited amount in `credited_units`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from gateway.admission.ledger import LOG_TOPUP
from gateway.aws_failures import cancellation_reasons
from gateway.settings import get_settings
from gateway.store.aws import to_item, to_values
from gateway.store.table import PROFILE, user_pk
from gateway.store.usage import ledger_pk, usage_sk


class ClaimFailed(Exception):
    """The credit's claim (the write at `index` of the claims) found its source already spent, or
    its condition otherwise false: nothing was written."""

    def __init__(self, index: int):
        super().__init__(f"claim {index} failed its condition")
        self.index = index


class ProfileRefused(Exception):
    """The credited profile does not exist, or failed the credit's `profile_condition`: nothing
    was written."""


@dataclass(frozen=True)
class Credit:
    credit_id: str  # unique per source (a code's, an order's id): the log entry's request id
    user_id: int
    units: int  # quota units added
    route: str  # what the log names as the source: "redemption", "stripe", "aff_transfer", ...
    detail: Mapping[str, Any] = field(default_factory=dict)
    #: other counters of the profile that move with the quota (e.g. `aff_quota: -units`)
    profile_adds: Mapping[str, int] = field(default_factory=dict)
    #: attributes of the profile set with the credit (e.g. `has_payment_method: True`)
    profile_sets: Mapping[str, Any] = field(default_factory=dict)
    #: a condition on the profile beyond its existence, with its values (e.g. `aff_quota >= :want`)
    profile_condition: str = ""
    profile_values: Mapping[str, Any] = field(default_factory=dict)


def _table() -> str:
    return get_settings().accounts_table


def log_entry(credit: Credit, now: datetime) -> dict[str, Any]:
    """The ledger item of a credit (a top-up in the request log)."""
    item = {
        "pk": ledger_pk(credit.user_id, credit.credit_id), "sk": usage_sk(now, credit.credit_id),
        "request_id": credit.credit_id, "key_id": "", "model": "", "route": credit.route, "units": 0,
        "credited_units": int(credit.units), "reserved_units": 0, "outcome": "credited",
        "at": int(now.timestamp() * 1000), "detail": dict(credit.detail) or None, "log_type": LOG_TOPUP,
    }
    retention = get_settings().ledger_retention_days
    if retention:
        item["expires_ttl"] = int(now.timestamp()) + retention * 86400
    return item


def profile_update(credit: Credit, owed: int = 0) -> dict[str, Any]:
    """The profile's share of a credit; `owed` (the debt just read) is repaid first."""
    repaid = min(max(int(owed), 0), int(credit.units))
    adds = {"quota": int(credit.units) - repaid, **{name: int(v) for name, v in credit.profile_adds.items()}}
    if owed:
        adds["owed_quota"] = adds.get("owed_quota", 0) - repaid
    names = {f"#a{n}": name for n, name in enumerate(adds)}
    names.update({f"#s{n}": name for n, name in enumerate(credit.profile_sets)})
    values: dict[str, Any] = {f":a{n}": amount for n, amount in enumerate(adds.values())}
    values.update({f":s{n}": value for n, value in enumerate(credit.profile_sets.values())})
    values.update(credit.profile_values)
    values[":owed_was"] = int(owed)
    debt = "owed_quota = :owed_was" if owed else "(attribute_not_exists(owed_quota) OR owed_quota = :owed_was)"
    condition = f"attribute_exists(pk) AND {debt}" + \
        (f" AND ({credit.profile_condition})" if credit.profile_condition else "")
    expression = "ADD " + ", ".join(f"#a{n} :a{n}" for n in range(len(adds)))
    if credit.profile_sets:
        expression += " SET " + ", ".join(f"#s{n} = :s{n}" for n in range(len(credit.profile_sets)))
    return {"Update": {"TableName": _table(), "Key": to_item({"pk": user_pk(credit.user_id), "sk": PROFILE}),
                       "UpdateExpression": expression,
                       "ConditionExpression": condition, "ExpressionAttributeNames": names,
                       "ExpressionAttributeValues": to_values(values)}}


def writes(credit: Credit, claims: Sequence[dict[str, Any]], now: datetime | None = None,
           owed: int = 0) -> list[dict[str, Any]]:
    """The transaction of a credit: its claims, then the profile update, then the log entry."""
    if credit.units < 0:
        raise ValueError("a credit adds units; it never takes them")
    now = now or datetime.now(UTC)
    return [*claims, profile_update(credit, owed),
            {"Put": {"TableName": _table(), "Item": to_item(log_entry(credit, now)),
                     "ConditionExpression": "attribute_not_exists(pk)"}}]


def apply(credit: Credit, claims: Sequence[dict[str, Any]], now: datetime | None = None) -> None:
    """Adds the credit exactly once with its claims (see the module); `ClaimFailed` or
    `ProfileRefused` when a condition fails, with nothing written."""
    from gateway.admission.transactions import transact

    for _ in range(DEBT_ATTEMPTS):
        owed = _owed(credit.user_id)
        try:
            transact(writes(credit, claims, now, owed))
            return
        except Exception as exc:
            reasons = cancellation_reasons(exc)
            if not reasons:
                raise
            for index, reason in enumerate(reasons[:len(claims)]):
                if reason == "ConditionalCheckFailed":
                    raise ClaimFailed(index) from None
            if len(reasons) > len(claims) and reasons[len(claims)] == "ConditionalCheckFailed":
                if _owed(credit.user_id) != owed:
                    continue  # a refund or a dispute moved the debt meanwhile: read it again
                raise ProfileRefused(credit.user_id) from None
            raise
    raise ProfileRefused(credit.user_id)


#: Credits asked again while reversals keep moving the debt they repay.
DEBT_ATTEMPTS = 5


def _owed(user_id: int) -> int:
    from gateway.store.aws import client, from_item

    found = from_item(client("dynamodb").get_item(
        TableName=_table(), Key=to_item({"pk": user_pk(user_id), "sk": PROFILE}), ConsistentRead=True,
        ProjectionExpression="owed_quota").get("Item")) or {}
    return int(found.get("owed_quota") or 0)
