"""The operator's site options, under new-api's keys (`GET /api/option/`, `PUT /api/option/`), and
what the public may read of them (`GET /api/status`).

Every option has a kind, a default and a rule; a value is stored as text (new-api's `Option`
table: `{key, value}`), so its clients carry over. An unknown key or a value that breaks its rule
is a 400 naming it, and nothing is stored. Secrets (payment keys, webhook secrets) are never
options here: they live in Secrets Manager (or the environment under `make run`).

Each instance reads the options at most once per `GATEWAY_KEY_CACHE_SECONDS` (the same seconds a
changed key or user takes to be seen); the instance that changes one sees it at once. They are
kept in one item of the accounts table (`store.options`); `groups` (a group's ratio), `commerce`
(sign-up, top-up) and `routing` (the operator's prices) read them here.
"""

from __future__ import annotations

import json
import math
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from gateway.errors import InvalidRequest, shown
from gateway.prices import UNITS_PER_USD, parse_option
from gateway.settings import get_settings
from gateway.store.options import OptionsRepository
from gateway.validation import MAX_DEPTH, parse_json


@dataclass(frozen=True)
class Option:
    default: str
    parse: Callable[[str], Any]
    public: bool = False  # shown to anyone by GET /api/status
    describe: str = ""


def _bool(text: str) -> bool:
    if text not in ("true", "false"):
        raise ValueError("must be true or false")
    return text == "true"


def _int(low: int, high: int) -> Callable[[str], int]:
    def parse(text: str) -> int:
        if not (text.lstrip("-").isdigit() and text.isascii() and len(text) <= 19):
            raise ValueError("must be a whole number")
        value = int(text)
        if not low <= value <= high:
            raise ValueError(f"must be {low} to {high}")
        return value
    return parse


def _positive(high: float) -> Callable[[str], float]:
    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise ValueError("must be a number") from None
        if not 0 < value <= high or value != value:
            raise ValueError(f"must be more than 0 and at most {high:g}")
        return value
    return parse


def _text(limit: int) -> Callable[[str], str]:
    def parse(text: str) -> str:
        if len(text) > limit:
            raise ValueError(f"must have at most {limit} characters")
        return text
    return parse


_QUOTA = _int(0, UNITS_PER_USD * 1_000_000)  # quota units, up to one million USD

#: new-api's default GroupRatio.
DEFAULT_RATIOS = '{"default":1,"vip":1,"svip":1}'
MAX_GROUPS = 100
MAX_GROUP_NAME = 64
MAX_RATIO = 1000


def parse_ratios(text: str) -> dict[str, Decimal]:
    """The GroupRatio option's rule: a JSON object of group names (1 to 64 printable characters)
    to positive finite numbers (at most 1000), at most 100 groups. `ValueError` names what broke."""
    try:
        value = json.loads(text)
    except ValueError:
        raise ValueError("must be a JSON object of group names to ratios") from None
    if not isinstance(value, dict) or not value:
        raise ValueError("must be a non-empty JSON object of group names to ratios")
    if len(value) > MAX_GROUPS:
        raise ValueError(f"may name at most {MAX_GROUPS} groups")
    found: dict[str, Decimal] = {}
    for name, ratio in value.items():
        if not valid_group_name(name):
            raise ValueError(f"group '{shown(name, 40)}': a name has 1 to {MAX_GROUP_NAME} printable characters, "
                             "no spaces")
        if isinstance(ratio, bool) or not isinstance(ratio, (int, float)) or not math.isfinite(ratio) \
                or not 0 < ratio <= MAX_RATIO:
            raise ValueError(f"group '{name}': the ratio must be a number more than 0 and at most {MAX_RATIO}")
        found[name] = Decimal(str(ratio))
    return found


def valid_group_name(name: Any) -> bool:
    """A group's name as GroupRatio takes it (and a channel's `groups`, `routing.channels`)."""
    return isinstance(name, str) and 0 < len(name) <= MAX_GROUP_NAME and name.isprintable() and not any(
        c.isspace() for c in name)

#: new-api's option keys this gateway reads, with their defaults (new-api's, unless said).
OPTIONS: dict[str, Option] = {
    "SystemName": Option("Unified AI Gateway", _text(64), public=True, describe="the site's name"),
    "Notice": Option("", _text(4000), public=True, describe="a notice shown on the console's first page"),
    "RegisterEnabled": Option("true", _bool, public=True, describe="anyone may sign up"),
    "PasswordRegisterEnabled": Option("true", _bool, public=True, describe="sign-up with a password"),
    "EmailVerificationEnabled": Option("false", _bool, public=True,
                                       describe="sign-up needs a code sent to the email address"),
    "QuotaForNewUser": Option("0", _QUOTA, describe="quota units a new user starts with"),
    "QuotaForInviter": Option("0", _QUOTA, describe="quota units an inviter earns at an invitee's first payment"),
    "QuotaForInvitee": Option("0", _QUOTA, describe="quota units a user who signs up with an invitation gets"),
    # What a person pays for one USD of quota (new-api's StripeUnitPrice, in the payment's currency).
    "StripeUnitPrice": Option("1", _positive(1000), public=True, describe="price of 1 USD of quota"),
    "StripeMinTopUp": Option("1", _int(1, 100_000), public=True, describe="the smallest top-up, in USD"),
    # Not new-api options (its limits are environment settings): the critical limit of sign-up,
    # verification and password reset, per address and per email (new-api: 20 per 20 minutes).
    "CriticalRateLimitNum": Option("20", _int(1, 100_000), describe="sign-up, code and reset requests per window"),
    "CriticalRateLimitDurationSeconds": Option("1200", _int(1, 86_400), describe="that window, in seconds"),
    # Not new-api options: Checkout Sessions one user, and one address, may open per window (`payments`).
    "TopUpRateLimitNum": Option("10", _int(1, 100_000), describe="top-up orders per user and per address per window"),
    "TopUpRateLimitDurationSeconds": Option("600", _int(1, 86_400), describe="that window, in seconds"),
    # new-api's GroupRatio: every price of a user's group multiplied by its ratio (`gateway.groups`).
    "GroupRatio": Option(DEFAULT_RATIOS, parse_ratios, describe="a JSON object of group name to price ratio"),
    # new-api's ModelPrice key (its value there: model -> USD per call; ModelRatio and
    # CompletionRatio price tokens): here model -> our price fields (`prices.parse_option`), over
    # the channels document's and the shipped prices. The console's Pricing page edits it.
    "ModelPrice": Option("{}", parse_option, describe="a JSON object of model name to its prices in USD "
                         '(the channels document\'s fields: {"m-small": {"input_per_million": "0.5"}})'),
    # Not a new-api option (its pricing page is public): whether GET /api/pricing answers anyone.
    "PricingAnonymous": Option("true", _bool, public=True,
                               describe="the pricing page answers anyone (else signed-in users)"),
}


def parse_value(key: str, value: Any) -> tuple[str, Any]:
    """The option's text and its parsed value, or a 400 naming the key or the value. A JSON
    `true`, `5` or `1.5` counts as its text, as new-api takes them."""
    option = OPTIONS.get(key) if isinstance(key, str) else None
    if option is None:
        raise InvalidRequest(f"key: no option named '{shown(key, 64)}' (one of {', '.join(sorted(OPTIONS))})",
                             param="key")
    if isinstance(value, bool):
        text = "true" if value else "false"
    elif isinstance(value, (int, float)):
        text = repr(value) if isinstance(value, float) and not value.is_integer() else str(int(value))
    elif isinstance(value, str):
        text = value.strip()
    elif isinstance(value, dict) and key in ("GroupRatio", "ModelPrice"):  # the object, or its JSON text
        try:
            text = json.dumps(value, separators=(",", ":"), allow_nan=False)
        except ValueError:
            raise InvalidRequest(f"value: {key} must hold finite numbers", param="value") from None
    else:
        raise InvalidRequest(f"value: {key} takes a string, a number or a boolean", param="value")
    if key in ("GroupRatio", "ModelPrice"):  # a body's nesting limit before its own rule, which cannot read it
        try:
            parse_json(text, what=key)
        except InvalidRequest as exc:
            if f"deeper than {MAX_DEPTH}" in exc.message:  # any other broken JSON: the option's own rule says it
                said = exc.message.replace(f"{exc.param}: ", "", 1) if exc.param else exc.message  # the rule
                said = said if said.startswith(key) else f"{key} {said}"
                raise InvalidRequest(f"value: {said}", param="value") from None
    try:
        return text, option.parse(text)
    except ValueError as exc:
        # A JSON option's rule names the entry that broke it: its whole text is not echoed back.
        got = "" if key in ("GroupRatio", "ModelPrice") else f" (got '{shown(text, 40)}')"
        raise InvalidRequest(f"value: {key} {exc}{got}", param="value") from None


class _Cache:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.values: dict[str, str] | None = None
        self.read_at = 0.0


_cache = _Cache()


def forget() -> None:
    """Read the options again on next use (tests; an instance that changed one)."""
    with _cache.lock:
        _cache.values = None


def _stored() -> dict[str, str]:
    ttl = get_settings().key_cache_seconds
    now = time.monotonic()
    with _cache.lock:
        if _cache.values is not None and now - _cache.read_at < ttl:
            return _cache.values
    values = OptionsRepository().options()
    with _cache.lock:
        _cache.values, _cache.read_at = values, now
    return values


def current(key: str) -> Any:
    """The option's value now (its default until an operator sets it)."""
    option = OPTIONS[key]
    text = _stored().get(key, option.default)
    try:
        return option.parse(text)
    except ValueError:  # stored before its rule changed: the default, never a 500
        return option.parse(option.default)


def listed() -> dict[str, Any]:
    """GET /api/option/ (operators): every option with its value as text, new-api's shape."""
    stored = _stored()
    data = [{"key": key, "value": stored.get(key, option.default), "description": option.describe}
            for key, option in OPTIONS.items()]
    return {"success": True, "message": "", "data": data}


def update(body: Mapping[str, Any], operator_id: int) -> dict[str, Any]:
    """PUT /api/option/ {key, value} (operators)."""
    text, _ = parse_value(body.get("key"), body.get("value"))  # type: ignore[arg-type]
    OptionsRepository().put_option(str(body["key"]), text, by=operator_id, at=int(time.time()))
    forget()
    return {"success": True, "message": ""}


def status() -> dict[str, Any]:
    """GET /api/status (anyone): what a sign-up or top-up page needs to know, new-api's names."""
    return {"success": True, "message": "", "data": {
        "system_name": current("SystemName"),
        "notice": current("Notice"),
        "register_enabled": current("RegisterEnabled"),
        "password_register_enabled": current("PasswordRegisterEnabled"),
        "email_verification": current("EmailVerificationEnabled"),
        "quota_per_unit": UNITS_PER_USD,
        "display_in_currency": True,
        "stripe_unit_price": current("StripeUnitPrice"),
        "stripe_min_topup": current("StripeMinTopUp"),
        "pricing_anonymous": current("PricingAnonymous"),
    }}
