"""The catalog: the channels and prices in force at one moment, and which channels to try for a model.

Selection: the healthy channels only (`routing/health.py`), the highest priority first; inside
one priority a weighted random order, the protocol the client speaks first. When none is healthy,
the cooling channel whose cooldown ends soonest; a channel an operator disabled, never. A channel
serves the user groups it names (none: every group); a model no channel of the caller's group
serves does not exist for the caller.
"""

from __future__ import annotations

import os
import random
from collections.abc import Iterable, Sequence
from typing import Any
from urllib.parse import urlsplit

from gateway.errors import NotFound, Unavailable, shown
from gateway.prices import Price, PriceTable
from gateway.routing import health
from gateway.routing.channel import ANY_MODEL, PROTOCOLS, Channel, ChannelsConfigError, channel_of, document_model
from gateway.settings import get_settings

#: The key of each built-in simulator channel, where its protocol needs a shape of its own.
SIMULATOR_KEYS = {"alpha": "simulator|simulator-secret-of-at-least-32-bytes",
                  # an IAM user's keys and Region, as a bedrock channel holds them (the simulator checks the signature)
                  "bedrock": "AKIASIMULATEDBEDROCK|simulated-bedrock-secret|us-east-1"}
#: The simulators tried only once the others failed: the bedrock simulator refuses what Bedrock
#: refuses (an image by URL, say), which the demo's requests were not written for.
_SIMULATOR_PRIORITY = {"bedrock": -1}


class Catalog:
    """The channels and prices in force."""

    def __init__(self, channels: Sequence[Channel], prices: PriceTable, *, added: Iterable[str] = (),
                 shadowed: Iterable[str] = ()):
        self.channels = list(channels)
        self.prices = prices
        #: Names of the channels operators added through /api/channel/ (the rest: the document's).
        self.added = frozenset(added)
        #: Added channels not in force: the document has a channel of the same name, and it wins.
        self.shadowed = frozenset(shadowed)

    @classmethod
    def from_document(cls, document: dict[str, Any], source: str = "channels document",
                      keys: dict[str, str] | None = None) -> Catalog:
        """`keys`: the channel keys secret's names (read by the caller, once per refresh)."""
        from pydantic import ValidationError

        from gateway.validation import describe

        try:
            parsed = document_model().model_validate(document or {})
        except ValidationError as exc:
            raise ChannelsConfigError(f"{source}: {describe(exc)[0]}") from None
        channels = []
        for spec in parsed.channels:
            api_key = spec.api_key or ""
            if spec.api_key_env and get_settings().channel_keys_needed:
                api_key = os.environ.get(spec.api_key_env, "") or (keys or {}).get(spec.api_key_env, "")
                if not api_key:
                    where = f" nor in secret {get_settings().channel_keys_secret}" \
                        if get_settings().channel_keys_secret else ""
                    raise ChannelsConfigError(f"{source}: channel {spec.name}: {spec.api_key_env} is not set "
                                              f"in the environment{where}")
            channels.append(channel_of(spec, api_key, source))
        try:
            prices = PriceTable(parsed.prices)
        except ValueError as exc:
            raise ChannelsConfigError(f"{source}: {exc}") from None
        return cls(channels, prices)

    @classmethod
    def simulated(cls, simulator_url: str) -> Catalog:
        """The local runner's channels: one per protocol, at the simulators. They may be polled
        at the simulators' own origin under both local names (the beta simulator names the other
        one, as a real upstream names a regional host), over plain http: allowed here explicitly."""
        base = simulator_url.rstrip("/")
        parts = urlsplit(base)
        port = f":{parts.port}" if parts.port else ""
        local = frozenset(f"{parts.scheme}://{host}{port}" for host in ("127.0.0.1", "localhost"))
        return cls([Channel(name=f"simulator-{p}", protocol=p, base_url=f"{base}/{p}",
                            api_key=SIMULATOR_KEYS.get(p, "simulator"), models=frozenset({ANY_MODEL}),
                            poll_hosts=local, priority=_SIMULATOR_PRIORITY.get(p, 0),
                            region="us-east-1" if p == "bedrock" else None) for p in PROTOCOLS], PriceTable())

    def candidates(self, model: str, protocols: Iterable[str], prefer: str | None = None, *,
                   group: str | None = None) -> list[Channel]:
        """The channels to try for `model`, in order, of those serving the caller's `group`.
        `NotFound` names the model when none serves it (for that group: a channel of another
        group is never tried, and a model only it serves does not exist for the caller)."""
        allowed = set(protocols)
        serving = [c for c in self.channels
                   if c.protocol in allowed and c.serves(model) and c.weight > 0 and c.serves_group(group)]
        if not serving:
            raise NotFound(f"model '{shown(model)}' is not served by any channel", param="model",
                           code="model_not_found")
        known = health.book().snapshot()
        states = {c.name: known.get(c.name) or health.ChannelHealth(c.name) for c in serving}
        healthy = [c for c in serving if states[c.name].state == health.HEALTHY]
        if healthy:
            return _order(healthy, prefer)
        cooling = [c for c in serving if states[c.name].state == health.COOLING]
        if cooling:  # nothing else left: the one back soonest, rather than failing unasked
            return [min(cooling, key=lambda c: states[c.name].cooling_until)]
        raise Unavailable(f"every channel serving model '{shown(model)}' is disabled by the operator")

    def named(self, name: str) -> Channel | None:
        return next((c for c in self.channels if c.name == name), None)

    def serving(self, model: str, protocols: Iterable[str], prefer: str | None = None, *,
                group: str | None = None) -> tuple[Price, list[Channel]]:
        """The price and the channels to try for one billed request: a model no channel (of the
        caller's group) serves is a 404 naming it, then a model with no price is refused, never
        served for free. The price is before the group's ratio (`admission.billing` applies it)."""
        channels = self.candidates(model, protocols, prefer, group=group)
        return self.prices.get(model), channels

    def models(self, protocols: Iterable[str] | None = None, *, group: str | None = None) -> list[str]:
        """Every model a channel (of `group`, None: any) names explicitly (a wildcard channel adds
        the priced ones)."""
        allowed = set(protocols) if protocols is not None else set(PROTOCOLS)
        names: set[str] = set()
        for channel in self.channels:
            if channel.protocol in allowed and channel.serves_group(group):
                names |= {m for m in channel.models if m != ANY_MODEL}
                if ANY_MODEL in channel.models:
                    names |= set(self.prices.models())
        return sorted(names)


def _order(channels: list[Channel], prefer: str | None) -> list[Channel]:
    ordered: list[Channel] = []
    for priority in sorted({c.priority for c in channels}, reverse=True):
        group = [c for c in channels if c.priority == priority]
        shuffled = []
        while group:  # weighted random order without replacement
            pick = random.choices(group, weights=[c.weight for c in group])[0]
            shuffled.append(pick)
            group.remove(pick)
        shuffled.sort(key=lambda c: c.protocol != prefer)  # stable: keeps the weighted order otherwise
        ordered.extend(shuffled)
    return ordered
