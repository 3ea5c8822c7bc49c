"""Channels: upstream accounts from the channels document, and which to try for a model.

The document (architecture.md, "Operator contracts") comes from `GATEWAY_CHANNELS_FILE` locally,
or from the SSM parameter `GATEWAY_CHANNELS_PARAMETER` / the secret `GATEWAY_CHANNELS_SECRET`
deployed. A channel's `api_key_env: NAME` is read from the environment, else from the JSON object
of the secret `GATEWAY_CHANNEL_KEYS_SECRET` (deployed, nothing sets a function's environment to a
key), so the document itself need hold no key. A configured source that cannot be read (missing,
access denied, a KMS key the function may not use) is a `ChannelsConfigError` naming it and the
cause, at cold start: never a silent empty catalog. With none of them and `GATEWAY_SIMULATOR_URL`
set (the local runner), every model routes to the built-in simulator of each protocol. A channel
may list `"*"` to serve any model.

Selection: the healthy channels only (`routing/health.py`), the highest priority first; inside
one priority a weighted random order, the protocol the client speaks first. When none is healthy,
the cooling channel whose cooldown ends soonest; a channel an operator disabled, never.
"""

from __future__ import annotations

import functools
import json
import os
import random
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal
from urllib.parse import urlsplit

from gateway.errors import NotFound, Unavailable, shown
from gateway.prices import Price, PriceTable
from gateway.routing import health
from gateway.settings import get_settings
from gateway.store.aws import store_call_ahead

if TYPE_CHECKING:
    from gateway.upstreams.vertex import VertexSite

PROTOCOLS = ("chat", "messages", "content", "alpha", "beta", "gamma", "delta", "epsilon", "zeta", "imgtask")
ANY_MODEL = "*"
#: A channel's `variant` (imgtask only): the open-source midjourney-proxy or its extended build.
VARIANTS = ("basic", "extended")
#: The key of each built-in simulator channel, where its protocol needs a shape of its own.
SIMULATOR_KEYS = {"alpha": "simulator|simulator-secret-of-at-least-32-bytes"}
_REMOTE_TTL = 60.0  # seconds a document read from SSM or Secrets Manager is reused


@dataclass(frozen=True)
class Channel:
    name: str
    protocol: str
    base_url: str
    api_key: str = field(repr=False)
    models: frozenset[str]
    model_map: dict[str, str] = field(default_factory=dict, hash=False, compare=False)
    priority: int = 0
    weight: int = 1
    #: Hosts the upstream may name in a polling URL of its own (`allows_poll_url`).
    poll_hosts: frozenset[str] = frozenset()
    #: The user groups this channel serves (`gateway.groups`); empty: every group.
    groups: frozenset[str] = frozenset()
    #: Which build of its protocol the upstream runs, where a protocol has several (imgtask:
    #: `basic`, the open-source midjourney-proxy, or `extended`, the default); None: the default.
    variant: str | None = None
    #: A Vertex AI channel's project and region (content and delta); its key is a service-account key file.
    vertex: VertexSite | None = None

    def serves(self, model: str) -> bool:
        return model in self.models or ANY_MODEL in self.models

    def serves_group(self, group: str | None) -> bool:
        """Whether a request of `group` may be routed here (None: any caller, the operator's views)."""
        return group is None or not self.groups or group in self.groups

    def allows_poll_url(self, url: str) -> bool:
        """Whether the gateway may send this channel's key to `url`, a polling URL the upstream
        named: an https URL of the base URL's host or of a `poll_hosts` entry (`api.example.com`,
        or `*.example.com` for its subdomains). An entry written as an origin with its scheme
        (`http://127.0.0.1:9001`) allows exactly that origin, plain http included: the local
        runner's simulators need it; a real channel should never list one."""
        try:
            parts = urlsplit(url)
            port = parts.port
        except ValueError:
            return False
        host = (parts.hostname or "").lower()
        if not host or parts.username is not None or parts.password is not None:
            return False
        origin = f"{parts.scheme}://{host}" + (f":{port}" if port is not None else "")
        if origin in self.poll_hosts:
            return True
        if parts.scheme != "https":
            return False
        base = urlsplit(self.base_url)
        if base.scheme == "https" and (base.hostname or "").lower() == host:
            return True
        return any(host == entry or (entry.startswith("*.") and host.endswith(entry[1:]))
                   for entry in self.poll_hosts if "://" not in entry)

    def upstream_model(self, model: str) -> str:
        return self.model_map.get(model, model)


def _check_variant(protocol: str, variant: str | None) -> None:
    if variant is not None and protocol != "imgtask":
        raise ValueError(f"variant: only an imgtask channel has one, not a {protocol} channel")


def _check_group(value: str) -> str:
    """A name in a channel's `groups`, as `GroupRatio` takes names (`gateway.options.valid_group_name`)."""
    from gateway.options import MAX_GROUP_NAME, valid_group_name

    if not valid_group_name(value):
        raise ValueError(f"{value!r}: a group name has 1 to {MAX_GROUP_NAME} printable characters, no spaces")
    return value


@functools.cache
def _document_model():
    # pydantic only when a document is read (not on every cold start of every function)
    from pydantic import AfterValidator, BaseModel, ConfigDict, Field, field_validator, model_validator

    from gateway.upstreams.vertex import valid_region

    class VertexSpec(BaseModel):
        model_config = ConfigDict(extra="forbid")
        project: str | None = Field(None, min_length=1, pattern=r"^[a-z][a-z0-9-]{4,61}[a-z0-9]$")
        region: str = Field(min_length=1)

        @field_validator("region")
        @classmethod
        def _region(cls, value: str) -> str:
            if not valid_region(value):
                raise ValueError(f"{value!r}: a Vertex AI location, such as us-central1 or global")
            return value

    class ChannelSpec(BaseModel):
        model_config = ConfigDict(extra="forbid")
        name: str = Field(min_length=1)
        protocol: Literal[PROTOCOLS]  # type: ignore[valid-type]
        base_url: str | None = None
        vertex: VertexSpec | None = None
        api_key: str | None = None
        api_key_env: str | None = None
        models: list[str] = Field(min_length=1)
        model_map: dict[str, str] = {}
        priority: int = 0
        weight: int = Field(1, ge=0)
        poll_hosts: list[str] = []
        groups: list[Annotated[str, AfterValidator(_check_group)]] = []

        variant: Literal[VARIANTS] | None = None  # type: ignore[valid-type]

        @field_validator("poll_hosts")
        @classmethod
        def _hosts(cls, values: list[str]) -> list[str]:
            for value in values:
                if "://" in value:
                    parts = urlsplit(value)
                    if parts.scheme not in ("http", "https") or not parts.hostname or parts.path not in ("", "/"):
                        raise ValueError(f"{value!r}: an origin is scheme://host[:port], nothing more")
                elif not value or "/" in value or ":" in value or "*" in value.removeprefix("*."):
                    raise ValueError(f"{value!r}: a host name, '*.' and a domain, or an origin")
            return [value.lower().rstrip("/") for value in values]

        @field_validator("base_url")
        @classmethod
        def _http(cls, value: str | None) -> str | None:
            if value is None:
                return None
            if not value.startswith(("http://", "https://")):
                raise ValueError("must be an http(s) URL")
            return value.rstrip("/")

        @model_validator(mode="after")
        def _one_key(self) -> ChannelSpec:
            if self.api_key and self.api_key_env:
                raise ValueError("give api_key or api_key_env, not both")
            if self.vertex is not None and self.protocol not in ("content", "delta"):
                raise ValueError("vertex: only the content and delta protocols have a Vertex AI flavour")
            if self.vertex is None and not self.base_url:
                raise ValueError("base_url: is required (a Vertex channel may leave it out)")
            _check_variant(self.protocol, self.variant)
            return self

    class Document(BaseModel):
        model_config = ConfigDict(extra="forbid")
        channels: list[ChannelSpec] = []
        prices: dict[str, dict[str, Any]] = {}

        @model_validator(mode="after")
        def _unique(self) -> Document:
            names = [c.name for c in self.channels]
            duplicated = sorted({n for n in names if names.count(n) > 1})
            if duplicated:
                raise ValueError(f"channel names must be unique: {', '.join(duplicated)}")
            return self

    return Document


def spec_model() -> Any:
    """The rules of one channel entry of the document (a pydantic model)."""
    return _document_model().model_fields["channels"].annotation.__args__[0]


class ChannelsConfigError(ValueError):
    pass


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
            parsed = _document_model().model_validate(document or {})
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
            channels.append(cls.channel_of(spec, api_key, source))
        try:
            prices = PriceTable(parsed.prices)
        except ValueError as exc:
            raise ChannelsConfigError(f"{source}: {exc}") from None
        return cls(channels, prices)

    @staticmethod
    def channel_of(spec: Any, api_key: str, source: str = "channels document") -> Channel:
        """The channel a validated document entry (`spec_model()`) describes, with its key."""
        site, base_url = None, spec.base_url or ""
        if spec.vertex is not None:
            from gateway.upstreams.vertex import VertexSite, service_account_info

            try:
                info = service_account_info(api_key)
            except ValueError as exc:
                raise ChannelsConfigError(f"{source}: channel {spec.name}: {exc}") from None
            project = spec.vertex.project or info.get("project_id")
            if not isinstance(project, str) or not project:
                raise ChannelsConfigError(f"{source}: channel {spec.name}: vertex.project: is required (the "
                                          "service-account key file names no project_id)")
            site = VertexSite(project=project, region=spec.vertex.region)
            base_url = spec.base_url or site.host_url
        return Channel(name=spec.name, protocol=spec.protocol, base_url=base_url, api_key=api_key,
                       models=frozenset(spec.models), model_map=dict(spec.model_map),
                       priority=spec.priority, weight=spec.weight, poll_hosts=frozenset(spec.poll_hosts),
                       groups=frozenset(spec.groups), variant=spec.variant, vertex=site)

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
                            poll_hosts=local) for p in PROTOCOLS], PriceTable())

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


def report_failure(channel: Channel, exc: object) -> None:
    """A failed attempt that counts against `channel` (a retryable error, a timeout, refused credentials)."""
    health.book().failed(channel.name, health.Failure.of(exc))


def report_success(channel: Channel) -> None:
    """A served request: brings back a channel that was cooling (writes nothing otherwise)."""
    health.book().succeeded(channel.name)


def _parse_text(text: str, source: str) -> dict[str, Any]:
    import yaml

    try:
        document = json.loads(text) if text.lstrip().startswith("{") else yaml.safe_load(text)
    except (ValueError, yaml.YAMLError) as exc:
        raise ChannelsConfigError(f"{source}: not valid YAML or JSON: {exc}") from None
    if document is not None and not isinstance(document, dict):
        raise ChannelsConfigError(f"{source}: the document must be a mapping with 'channels' and 'prices'")
    return document or {}


_HINTS = {"ParameterNotFound": " (create it: docs/deploying.md)",
          "ResourceNotFoundException": " (create it: docs/deploying.md)",
          "AccessDeniedException": " (the function's role may not read it, or not use its KMS key: "
                                   "the template's ChannelsKmsKeyArn)",
          "AccessDenied": " (the function's role may not read it)"}


def _unreadable(source: str, exc: Exception) -> ChannelsConfigError:
    code = getattr(exc, "response", {}).get("Error", {}).get("Code") or type(exc).__name__
    return ChannelsConfigError(f"{source} cannot be read: {code}{_HINTS.get(code, '')}: {exc}")


def _secrets(*secret_ids: str) -> dict[str, str]:
    """The text of every secret one refresh needs (the channels document's, the channel keys'),
    by the id it was asked by: one BatchGetSecretValue call, not one GetSecretValue each."""
    wanted = list(dict.fromkeys(s for s in secret_ids if s))
    if not wanted:
        return {}
    from gateway.store.aws import client

    try:
        answer = client("secretsmanager").batch_get_secret_value(SecretIdList=wanted)
    except Exception as exc:
        raise _unreadable("secret " + ", ".join(wanted), exc) from None
    for error in answer.get("Errors") or []:
        code = error.get("ErrorCode", "")
        raise ChannelsConfigError(f"secret {error.get('SecretId')} cannot be read: {code}{_HINTS.get(code, '')}: "
                                  f"{error.get('Message', '')}")
    found: dict[str, str] = {}
    for value in answer.get("SecretValues") or []:
        for secret_id in wanted:
            if secret_id in (value.get("ARN"), value.get("Name")):
                found[secret_id] = value.get("SecretString", "")
    missing = [s for s in wanted if s not in found]
    if missing:
        raise ChannelsConfigError(f"secret {missing[0]} cannot be read: it was not returned")
    return found


def _channel_keys(secret_id: str, text: str) -> dict[str, str]:
    """The `api_key_env` names of the channel keys secret (a JSON object of strings)."""
    try:
        keys = json.loads(text)
    except ValueError:
        keys = None
    if not isinstance(keys, dict) or not all(isinstance(v, str) for v in keys.values()):
        raise ChannelsConfigError(f"secret {secret_id}: must be a JSON object of names to keys, "
                                  '{"MAIN_CHAT_KEY": "sk-..."}')
    return keys


def _read_document() -> tuple[dict[str, Any], str, bool, dict[str, str]] | None:
    """(document, where it came from, whether it may change while we run, the channel keys), or None."""
    settings = get_settings()
    keys_secret = settings.channel_keys_secret if settings.channel_keys_needed else ""
    if settings.channels_file:
        path = Path(settings.channels_file)
        try:
            text = path.read_text()
        except OSError as exc:
            raise ChannelsConfigError(f"GATEWAY_CHANNELS_FILE: cannot read {path}: {exc}") from None
        secrets = _secrets(keys_secret)
        return _parse_text(text, str(path)), str(path), False, _keys_of(keys_secret, secrets)
    if settings.channels_secret:
        secrets = _secrets(settings.channels_secret, keys_secret)
        document = _parse_text(secrets[settings.channels_secret], f"secret {settings.channels_secret}")
        return document, "secret", True, _keys_of(keys_secret, secrets)
    if settings.channels_parameter:
        from gateway.store.aws import client

        try:
            text = client("ssm").get_parameter(Name=settings.channels_parameter,
                                               WithDecryption=True)["Parameter"]["Value"]
        except Exception as exc:
            raise _unreadable(f"parameter {settings.channels_parameter}", exc) from None
        secrets = _secrets(keys_secret)
        return (_parse_text(text, f"parameter {settings.channels_parameter}"), "parameter", True,
                _keys_of(keys_secret, secrets))
    return None


def _keys_of(secret_id: str, secrets: dict[str, str]) -> dict[str, str]:
    return _channel_keys(secret_id, secrets[secret_id]) if secret_id else {}


_lock = threading.Lock()  # one refresh at a time
_cached: tuple[float, Catalog] | None = None


def _fresh(cached: tuple[float, Catalog] | None) -> bool:
    return cached is not None and (cached[0] == float("inf") or time.monotonic() < cached[0])


def _document_catalog() -> Catalog:
    """The document's catalog, read once (a remote document is re-read every minute). While one
    thread re-reads it, the others go on with the catalog they had rather than wait on the lock;
    a re-read that fails keeps the catalog in force (logged) until the next minute."""
    global _cached
    cached = _cached
    if _fresh(cached):
        return cached[1]  # type: ignore[index]
    if not _lock.acquire(blocking=cached is None):
        return cached[1]  # type: ignore[index]
    try:
        if _fresh(_cached):
            return _cached[1]  # type: ignore[index]
        try:
            catalog, remote = _load()
        except ChannelsConfigError as exc:
            if _cached is None:
                raise  # the cold start: fail, naming the source and the cause
            from gateway.observability import logger

            logger.warning("channels document re-read failed; keeping the one in force", extra={"error": str(exc)})
            catalog, remote = _cached[1], True
        _cached = (time.monotonic() + _REMOTE_TTL if remote else float("inf"), catalog)
        return catalog
    finally:
        _lock.release()


def _load() -> tuple[Catalog, bool]:
    found = _read_document()
    if found is not None:
        document, source, remote, keys = found
        return Catalog.from_document(document, source, keys), remote
    if get_settings().simulator_url:
        return Catalog.simulated(get_settings().simulator_url), False
    return Catalog([], PriceTable()), True


class _Added:
    """The channels operators added through /api/channel/ (`routing/channel_store`), as this
    instance last read them: one Query every `GATEWAY_CHANNELS_REFRESH_SECONDS` (10), each key
    read once per version (`channel_keys.key_of`). A read that fails keeps the last channels in
    force (logged): a request never fails because this bookkeeping did."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.source: Callable[[], list[Any]] | None = stored_channels
        self.read_at: float | None = None
        self.built: list[tuple[Any, Channel]] = []  # (record, channel), by id
        self.merged: tuple[int, int, Catalog] | None = None  # (id of the base, generation, catalog)
        self.generation = 0

    def due(self) -> bool:
        return self.source is not None and (
            self.read_at is None or time.monotonic() - self.read_at >= get_settings().channels_refresh_seconds)

    def refresh(self) -> None:
        # One thread re-reads; the others go on with the channels they had (the first read waits).
        if not self.lock.acquire(blocking=self.read_at is None):
            return
        try:
            self._refresh()
        finally:
            self.lock.release()

    def _refresh(self) -> None:
        from gateway.observability import logger
        from gateway.routing.channel_keys import key_of

        if not self.due() or self.source is None:
            return
        self.read_at = time.monotonic()
        try:
            records = self.source()
        except Exception as exc:  # noqa: BLE001 - the last channels read stay in force
            logger.warning("added channels not read; the last ones stay in force", extra={"error": repr(exc)})
            return
        before = {record.name: (record, channel) for record, channel in self.built}
        built = []
        for record in records:
            known = before.get(record.name)
            if known and (known[0].version, known[0].key_version) == (record.version, record.key_version):
                built.append(known)
                continue
            try:
                spec = spec_model().model_validate({**record.spec, "name": record.name})
                built.append((record, Catalog.channel_of(spec, key_of(record.key_ref, record.key_version))))
            except Exception as exc:  # noqa: BLE001 - one bad channel never hides the others
                logger.warning("an added channel is not in force", extra={"channel": record.name,
                                                                          "error": repr(exc)})
                if known:
                    built.append(known)
        if [(r.name, r.version, r.key_version) for r, _ in built] != \
                [(r.name, r.version, r.key_version) for r, _ in self.built]:
            self.generation += 1
        self.built = built

    def catalog(self, base: Catalog) -> Catalog:
        """`base` with the added channels a document channel does not already name (the document wins)."""
        if not self.built:
            return base
        merged = self.merged
        if merged and merged[0] == id(base) and merged[1] == self.generation:
            return merged[2]
        taken = {c.name for c in base.channels}
        mine = [channel for _, channel in self.built if channel.name not in taken]
        catalog = Catalog([*base.channels, *mine], base.prices, added=[c.name for c in mine],
                          shadowed=[c.name for _, c in self.built if c.name in taken])
        self.merged = (id(base), self.generation, catalog)
        return catalog

    def forget(self) -> None:
        with self.lock:
            self.read_at, self.built, self.merged = None, [], None
            self.generation += 1


def stored_channels() -> list[Any]:
    from gateway.routing.channel_store import ChannelStore

    return ChannelStore().all()


_added = _Added()


def get_catalog(*, operator_prices: bool = True) -> Catalog:
    """The catalog in force: the document's channels (read once; a remote document is re-read
    every minute), the channels added through /api/channel/ (re-read every few seconds), and the
    prices with the operator's `ModelPrice` option over them (read with every site option, at
    most once per `GATEWAY_KEY_CACHE_SECONDS`, as `GroupRatio` is). A request takes its price
    from the catalog once and holds and settles at it (a task keeps it with the task).
    `operator_prices=False`: without the option (what was in force before it existed)."""
    catalog = _channels_catalog()
    return _priced(catalog) if operator_prices else catalog


def _channels_catalog() -> Catalog:
    base = _document_catalog()
    if _added.due():
        store_call_ahead()  # on an event loop under `no_wait`: again on a worker thread
        _added.refresh()
    return _added.catalog(base)


_priced_last: tuple[Catalog, Any, Catalog] | None = None  # (catalog, option, the catalog priced by it)


def _priced(catalog: Catalog) -> Catalog:
    """`catalog` with the operator's prices over its own; the same object while neither changes
    (the option's parse is cached per text, so an unchanged option is the same mapping)."""
    global _priced_last
    from gateway import options

    option = options.current("ModelPrice")
    last = _priced_last
    if last is not None and last[0] is catalog and last[1] is option:
        return last[2]
    priced = catalog if not option else Catalog(catalog.channels, catalog.prices.with_option(option),
                                                added=catalog.added, shadowed=catalog.shadowed)
    _priced_last = (catalog, option, priced)
    return priced


def reread_added() -> None:
    """Reads the added channels again at the next request (after this instance changed them)."""
    with _added.lock:
        _added.read_at = None


def use_added_source(source: Callable[[], list[Any]] | None) -> None:
    """Where added channels come from (tests: None, none at all; the default: the accounts table)."""
    _added.forget()
    _added.source = source


def check_at_start() -> None:
    """Reads the channels document when a function starts, so a bad or unreadable one fails the
    cold start (and the local runner) at once, naming the source and the field and rule or the
    cause, instead of every request answering 500 or an empty catalog answering 404 (the
    operator's prices are read with the first request, as the site options are)."""
    _channels_catalog()


def reset_catalog() -> None:
    """Forget the catalog and what this instance knows of channel health (tests, and the local
    runner after a change)."""
    global _cached
    with _lock:
        _cached = None
    _added.forget()
    from gateway.routing import channel_keys

    channel_keys.forget()
    health.reset()
