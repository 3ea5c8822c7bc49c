"""Request models of the people-and-money routes (`gateway.commerce`), in new-api's shapes."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, StrictInt, StrictStr, model_validator

from gateway.schemas.account import MAX_PASSWORD_CHARS, MAX_QUOTA_UNITS, Password, Username

#: new-api's limits: a code's name has 1 to 20 characters; at most 100 codes per request.
CODE_NAME_CHARS = 20
MAX_CODES_PER_REQUEST = 100
#: new-api's statuses of a redemption code.
CODE_ENABLED, CODE_DISABLED, CODE_USED = 1, 2, 3
# The last second any timestamp here may name (9999-12-31T23:59:59Z).
MAX_TIMESTAMP = 253402300799

Quota = Annotated[StrictInt, Field(ge=1, le=MAX_QUOTA_UNITS, description="quota units (500000 per USD)")]
ExpiredTime = Annotated[StrictInt, Field(ge=0, le=MAX_TIMESTAMP, description="epoch seconds; 0 never expires")]
CodeName = Annotated[StrictStr, Field(min_length=1, max_length=CODE_NAME_CHARS)]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class OptionUpdate(_Strict):
    """PUT /api/option/ (new-api's shape): the value as text, or a JSON boolean or number."""

    key: Annotated[StrictStr, Field(min_length=1, max_length=64)]
    value: Any


class NewCodes(_Strict):
    """POST /api/redemption/: `count` codes of `quota` units each."""

    name: CodeName
    quota: Quota
    count: Annotated[StrictInt, Field(ge=1, le=MAX_CODES_PER_REQUEST)] = 1
    expired_time: ExpiredTime = 0


class CodeUpdate(_Strict):
    """PUT /api/redemption/: a code's name, quota and expiry (an unused code only)."""

    id: Annotated[StrictInt, Field(ge=1)]
    name: CodeName
    quota: Quota
    expired_time: ExpiredTime = 0


class CodeStatus(_Strict):
    """PUT /api/redemption/?status_only=true: enable (1) or disable (2) an unused code."""

    id: Annotated[StrictInt, Field(ge=1)]
    status: Annotated[StrictInt, Field(ge=CODE_ENABLED, le=CODE_DISABLED, description="1 enabled, 2 disabled")]


class Redeem(_Strict):
    """POST /api/user/topup: a redemption code."""

    key: Annotated[StrictStr, Field(min_length=1, max_length=64)]


class PayRequest(_Strict):
    """POST /api/user/pay: `amount` USD of quota, paid through `payment_method` (stripe)."""

    amount: Annotated[StrictInt, Field(ge=1, le=1_000_000, description="USD of quota to buy")]
    payment_method: Annotated[StrictStr, Field(min_length=1, max_length=32)]


class PayCancel(_Strict):
    """POST /api/user/pay/cancel: the payer's pending order to end unpaid."""

    trade_no: Annotated[StrictStr, Field(min_length=1, max_length=64)]


class AffTransfer(_Strict):
    """POST /api/user/aff_transfer: invitation reward units moved into quota."""

    quota: Quota


class Register(_Strict):
    """POST /api/user/register (new-api's shape)."""

    username: Username
    password: Password
    email: Annotated[StrictStr, Field(max_length=254)] = ""
    verification_code: Annotated[StrictStr, Field(max_length=64)] = ""
    aff_code: Annotated[StrictStr, Field(max_length=32)] = ""
    # new-api's sign-up form sends the password twice.
    password2: Annotated[StrictStr, Field(max_length=MAX_PASSWORD_CHARS)] = ""

    @model_validator(mode="after")
    def _same_twice(self) -> Register:
        if self.password2 and self.password2 != self.password:
            raise ValueError("password2: must be the same as the password")
        return self


class PasswordReset(_Strict):
    """POST /api/user/reset: the emailed link's address and token."""

    email: Annotated[StrictStr, Field(min_length=3, max_length=254)]
    token: Annotated[StrictStr, Field(min_length=1, max_length=64)]
