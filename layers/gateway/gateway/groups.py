"""Groups: what a user's group does to prices and to the channels it reaches.

A user belongs to one group (`group` on the profile, `default` at sign-up); an operator prices
each group with the site option `GroupRatio` (new-api's key and shape: a JSON object of group
name to ratio, `{"default":1,"vip":1,"svip":1}` by default; its rule and a group name's:
`options.parse_ratios`) and moves a user with `PUT /api/user/ {id, group}`. A key may carry a
group of its own (`group` on the token), one its user may use (`usable`): the user's own group,
and every priced group when the operator set the profile's `can_use_self_group`. The group of a
request is fixed when its key is read (`auth.authenticate`, cached for the key cache's seconds),
so a change takes effect within them and never in the middle of a request: its hold and its
settlement use the same ratio (`prices.with_ratio`, applied by `admission.billing` only). A
channel may serve only some groups (`groups:` in the channels document,
`routing.channel.Channel.serves_group`).
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from gateway import options
from gateway.errors import InvalidRequest, shown

DEFAULT_GROUP = "default"


def ratios() -> dict[str, Decimal]:
    """The ratios in force (the option, read at most once per key cache period per instance)."""
    return options.current("GroupRatio")


def ratio_of(group: str) -> Decimal | None:
    """The group's ratio, or None for a group the operator has not priced."""
    return ratios().get(group)


def usable(profile: dict[str, Any] | None) -> list[str]:
    """The groups a user may put on a key: its own; with `can_use_self_group`, every priced group."""
    own = str((profile or {}).get("group") or DEFAULT_GROUP)
    if (profile or {}).get("can_use_self_group"):
        return sorted({own, *ratios()})
    return [own]


def self_groups(profile: dict[str, Any] | None) -> dict[str, Any]:
    """GET /api/user/self/groups, new-api's shape: `{data: {<group>: {ratio, desc}}}`."""
    own = str((profile or {}).get("group") or DEFAULT_GROUP)
    priced = ratios()
    data = {name: {"ratio": float(priced[name]) if name in priced else None,
                   "desc": "your group" if name == own else name}
            for name in usable(profile) if name in priced or name == own}
    return {"success": True, "message": "", "data": data}


def check_key_group(group: Any, profile: dict[str, Any] | None) -> str:
    """A key's `group` as given to /api/token/: empty (the user's group), or one the user may use."""
    if group in (None, ""):
        return ""
    if not isinstance(group, str) or group not in usable(profile) or group not in ratios():
        raise InvalidRequest(f"group: '{shown(group, 40)}' is not a group this account may use "
                             "(GET /api/user/self/groups lists them)", param="group")
    return group
