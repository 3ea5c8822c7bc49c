"""Request models of the console's JSON API: sign-in, password change, and the operator's user
actions (`gateway.api.session`, `gateway.api.operator`)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, StrictBool, StrictInt, StrictStr

from gateway.schemas.tokens import LimitFields

#: A quota movement an operator may make in one call (units; 500000 per USD): one million USD.
MAX_QUOTA_UNITS = 500_000 * 1_000_000
USERNAME_PATTERN = r"^[A-Za-z0-9_.@-]{1,64}$"
# scrypt reads the whole password; a sign-in form never needs more than this.
MAX_PASSWORD_CHARS = 256
MIN_PASSWORD_CHARS = 8


#: new-api's roles: a user, an operator (admin) and the root user; 10 and above may use /api/admin.
ROLES = (1, 10, 100)


def _one_of(allowed: tuple[int, ...]) -> Callable[[int], int]:
    def check(value: int) -> int:
        if value not in allowed:
            raise ValueError(f"must be one of {', '.join(map(str, allowed))}")
        return value
    return check


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


Username = Annotated[StrictStr, Field(pattern=USERNAME_PATTERN, description="letters, digits, _ . @ - (1 to 64)")]
Password = Annotated[StrictStr, Field(min_length=MIN_PASSWORD_CHARS, max_length=MAX_PASSWORD_CHARS)]


class SignIn(_Strict):
    """POST /api/user/login (new-api's shape)."""

    username: Username
    password: Annotated[StrictStr, Field(min_length=1, max_length=MAX_PASSWORD_CHARS)]


class PasswordChange(_Strict):
    """PUT /api/user/self: the user's own password, the current one required."""

    original_password: Annotated[StrictStr, Field(min_length=1, max_length=MAX_PASSWORD_CHARS)]
    password: Password


class NewUser(_Strict):
    """POST /api/admin/users."""

    username: Username
    password: Password
    display_name: Annotated[StrictStr, Field(max_length=64)] = ""
    email: Annotated[StrictStr, Field(max_length=254)] = ""
    role: Annotated[StrictInt, AfterValidator(_one_of(ROLES)),
                    Field(description="1 user, 10 operator, 100 root", json_schema_extra={"enum": list(ROLES)})] = 1
    quota: Annotated[StrictInt, Field(ge=0, le=MAX_QUOTA_UNITS, description="initial quota in units")] = 0


class QuotaAddition(_Strict):
    """POST /api/admin/users/{id}/quota: units added on top of what is left."""

    quota: Annotated[StrictInt, Field(ge=1, le=MAX_QUOTA_UNITS, description="units to add (500000 per USD)")]


class UserStatus(_Strict):
    """PUT /api/admin/users/{id}/status: 1 enabled, 2 disabled (new-api's values)."""

    status: Annotated[StrictInt, AfterValidator(_one_of((1, 2))),
                      Field(description="1 enabled, 2 disabled", json_schema_extra={"enum": [1, 2]})]


class UserUpdate(_Strict):
    """PUT /api/user/ (new-api's admin edit of a user, the fields this gateway lets an operator
    change there): the user's group, priced by GroupRatio, and whether it may put any priced
    group on its keys. An absent field keeps its value."""

    id: Annotated[StrictInt, Field(ge=1, le=2**53)]
    group: Annotated[StrictStr, Field(min_length=1, max_length=64, description="a group of GroupRatio")] | None = None
    can_use_self_group: StrictBool | None = None


class UserLimits(LimitFields):
    """PUT /api/admin/users/{id}/limits: the user's own limits (each given field replaces its
    value, 0 clears it); every key of the user is held by them too."""
