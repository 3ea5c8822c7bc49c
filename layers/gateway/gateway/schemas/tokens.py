"""The self-service key routes (`/api/token/`, new-api's shape): what a user may send."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import AfterValidator, Field, StrictBool, StrictFloat, StrictInt, StrictStr

from gateway.schemas.shared import StrictBody

MAX_NAME_CHARS = 50


def _printable(name: str) -> str:
    """A key's name is shown in pages, logs and CSV cells: printable characters only (no CR, LF, VT...)."""
    if not name.isprintable():
        raise ValueError("a key's name has printable characters only (no line breaks or control characters)")
    return name
MAX_QUOTA = 10**15  # far above any real quota, far below a number DynamoDB or a float would round
MAX_RATE = 10**9
MAX_BUDGET_USD = 10**9

Rate = Annotated[StrictInt, Field(ge=0, le=MAX_RATE, description="0 for no limit")]


class LimitFields(StrictBody):
    """A principal's limits (a key's, or a user's set by an operator); an absent one keeps its value."""

    rpm: Rate | None = None
    tpm: Rate | None = None
    max_parallel: Rate | None = None
    budget_usd: Annotated[StrictInt | StrictFloat, Field(ge=0, le=MAX_BUDGET_USD, allow_inf_nan=False,
                                                          description="0 for no budget")] | None = None
    budget_period: Literal["daily", "weekly", "monthly"] | None = None


class TokenFields(LimitFields):
    """The fields a user sets on its own key; an absent one keeps its value (or its default)."""

    name: Annotated[StrictStr, Field(max_length=MAX_NAME_CHARS), AfterValidator(_printable)] | None = None
    expired_time: Annotated[StrictInt, Field(ge=-1, le=2**53, description="-1: never; else epoch seconds")] | None \
        = None
    remain_quota: Annotated[StrictInt, Field(ge=0, le=MAX_QUOTA, description="quota units (500000 per USD)")] | None \
        = None
    unlimited_quota: StrictBool | None = None
    model_limits_enabled: StrictBool | None = None
    model_limits: Annotated[StrictStr, Field(max_length=10_000, description="comma-separated model ids")] | None \
        = None
    group: Annotated[StrictStr, Field(max_length=64, description="the key's group: one of GET /api/user/self/groups; "
                                                                "empty: the user's own group")] | None = None

class NewToken(TokenFields):
    pass


class TokenUpdate(TokenFields):
    id: Annotated[StrictStr, Field(min_length=1, max_length=64)]


class TokenStatus(StrictBody):
    """`PUT /api/token/?status_only=true`: enable (1) or disable (2) a key."""

    id: Annotated[StrictStr, Field(min_length=1, max_length=64)]
    status: Literal[1, 2]
