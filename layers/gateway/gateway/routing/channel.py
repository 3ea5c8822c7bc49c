"""A channel: one upstream account (a protocol, a base URL, a key, the models it serves), and the
rules of its entry in the channels document.

The channels document (architecture.md, "Operator contracts") lists channels and prices:
`routing/document.py` reads it, `routing/channels.py` keeps the channels in force (the document's,
and those operators add through /api/channel/, `routing/channel_store.py`). Both kinds of entry
are checked by the same rules (`spec_model`) and become a `Channel` the same way (`channel_of`).
A channel may list `"*"` to serve any model.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Annotated, Any, Literal
from urllib.parse import SplitResult, urlsplit

if TYPE_CHECKING:
    from gateway.upstreams.vertex import VertexSite

PROTOCOLS = ("chat", "messages", "content", "azure", "bedrock", "alpha", "beta", "gamma", "delta", "epsilon", "zeta",
             "imgtask", "cohere", "jina")
ANY_MODEL = "*"
#: A channel's `variant` (imgtask only): the open-source midjourney-proxy or its extended build.
VARIANTS = ("basic", "extended")
#: A jina channel's `variant`: Jina's own rerank (the default), Voyage's or TEI's (upstreams/rerank.py).
RERANK_VARIANTS = ("jina", "voyage", "tei")


@dataclass(frozen=True)
class BedrockBatch:
    """Where a bedrock channel's batch inference jobs read and write (the operator's bucket, in the
    channel's account) and the service role Bedrock runs them as (CreateModelInvocationJob's
    `roleArn`); `min_records`: the account's "Minimum number of records per batch inference job"
    quota, below which Bedrock refuses a job; `s3_endpoint`: an S3-compatible endpoint in place of
    the Region's (path-style), for a local stand-in."""

    s3_uri: str
    role_arn: str
    min_records: int = 100
    s3_endpoint: str | None = None


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
    #: An azure channel's data-plane api-version (None: `upstreams.azure.DEFAULT_API_VERSION`).
    api_version: str | None = None
    #: A bedrock channel's AWS Region, and whether a profile-only model goes through its `global.`
    #: inference profile rather than its geography's (`upstreams/bedrock.py`).
    region: str | None = None
    global_profiles: bool = False
    #: A bedrock channel's batch inference settings (None: it runs no batches).
    bedrock_batch: BedrockBatch | None = None

    def serves(self, model: str) -> bool:
        return model in self.models or ANY_MODEL in self.models

    def serves_group(self, group: str | None) -> bool:
        """Whether a request of `group` may be routed here (None: any caller, the operator's views)."""
        return group is None or not self.groups or group in self.groups

    def allows_poll_url(self, url: str) -> bool:
        """Whether the gateway may send this channel's key to `url`, a polling or result URL the
        upstream named: the base URL's own origin, whatever its scheme (a relay on a private
        network is often plain http: its key already goes there with every request); an https
        URL of the base URL's host or of a `poll_hosts` entry (`api.example.com`, or
        `*.example.com` for its subdomains). An entry written as an origin with its scheme
        (`http://127.0.0.1:9001`) allows exactly that origin, plain http included."""
        try:
            parts = urlsplit(url)
            origin = _origin(parts)
            base = urlsplit(self.base_url)
            own = _origin(base)
        except ValueError:
            return False
        host = (parts.hostname or "").lower()
        if not host or parts.username is not None or parts.password is not None:
            return False
        if origin == own or origin in self.poll_hosts:
            return True
        if parts.scheme != "https":
            return False
        if (base.hostname or "").lower() == host:
            return True
        return any(host == entry or (entry.startswith("*.") and host.endswith(entry[1:]))
                   for entry in self.poll_hosts if "://" not in entry)

    def upstream_model(self, model: str) -> str:
        return self.model_map.get(model, model)


_DEFAULT_PORTS = {"http": 80, "https": 443}


def _origin(parts: SplitResult) -> str:
    """`scheme://host[:port]`, lower case, a scheme's default port left out (RFC 6454's origin:
    `http://relay` and `http://relay:80` are one). ValueError for a port that is no number."""
    scheme, host, port = parts.scheme.lower(), (parts.hostname or "").lower(), parts.port
    return f"{scheme}://{host}" + (f":{port}" if port is not None and port != _DEFAULT_PORTS.get(scheme) else "")


def _check_variant(protocol: str, variant: str | None) -> None:
    if variant is None:
        return
    allowed = {"imgtask": VARIANTS, "jina": RERANK_VARIANTS}.get(protocol)
    if allowed is None:
        raise ValueError(f"variant: only an imgtask or a jina channel has one, not a {protocol} channel")
    if variant not in allowed:
        raise ValueError(f"variant: a {protocol} channel's is one of {', '.join(allowed)}")


def _check_api_version(protocol: str, api_version: str | None) -> None:
    if api_version is not None and protocol != "azure":
        raise ValueError(f"api_version: only an azure channel has one, not a {protocol} channel")


def _check_site(spec: Any) -> None:
    """Where the channel's upstream is: a base URL, or what a Vertex or bedrock channel builds it from."""
    if (spec.region or spec.inference_profile or spec.batch) and spec.protocol != "bedrock":
        raise ValueError("region, inference_profile, batch: only a bedrock channel has them")
    if spec.vertex is None and not spec.base_url and spec.protocol != "bedrock":
        raise ValueError("base_url: is required (a Vertex or bedrock channel may leave it out)")


def _check_group(value: str) -> str:
    """A name in a channel's `groups`, as `GroupRatio` takes names (`gateway.options.valid_group_name`)."""
    from gateway.options import MAX_GROUP_NAME, valid_group_name

    if not valid_group_name(value):
        raise ValueError(f"{value!r}: a group name has 1 to {MAX_GROUP_NAME} printable characters, no spaces")
    return value


@functools.cache
def document_model() -> Any:
    """The rules of the channels document (a pydantic model of its `channels` and `prices`)."""
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

    class BatchSpec(BaseModel):
        model_config = ConfigDict(extra="forbid")
        s3_uri: str = Field(pattern=r"^s3://[a-z0-9][-.a-z0-9]{1,61}[a-z0-9](/[-!_*'().a-zA-Z0-9/]*)?$")
        role_arn: str = Field(pattern=r"^arn:aws(-[^:]+)?:iam::([0-9]{12})?:role/.+$", max_length=2048)
        min_records: int = Field(100, ge=1)
        s3_endpoint: str | None = Field(None, pattern=r"^https?://")

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

        variant: Literal[VARIANTS + RERANK_VARIANTS] | None = None  # type: ignore[valid-type]
        # azure only: a dated data-plane version (2024-10-21, 2025-04-01-preview)
        api_version: str | None = Field(None, pattern=r"^\d{4}-\d{2}-\d{2}(-preview)?$")
        # bedrock: its Region (else the key's third part) and which inference profiles it uses
        region: str | None = Field(None, pattern=r"^[a-z]{2}(-[a-z]+)+-\d+$")
        inference_profile: Literal["geography", "global"] | None = None
        # bedrock: batch inference (`BedrockBatch`); patterns of botocore's `bedrock` model (S3Uri, RoleArn)
        batch: BatchSpec | None = None

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
            return [_origin(urlsplit(value)) if "://" in value else value.lower() for value in values]

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
            _check_site(self)
            _check_variant(self.protocol, self.variant)
            _check_api_version(self.protocol, self.api_version)
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
    return document_model().model_fields["channels"].annotation.__args__[0]


class ChannelsConfigError(ValueError):
    """A channels document, or a channel's entry, that cannot be read or breaks a rule (naming where)."""


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
    if spec.protocol == "azure":
        from gateway.upstreams.azure import service_principal

        try:
            service_principal(api_key)
        except ValueError as exc:
            raise ChannelsConfigError(f"{source}: channel {spec.name}: {exc}") from None
    region = None
    if spec.protocol == "bedrock":
        from gateway.upstreams.bedrock import default_url, key_region

        region = spec.region or key_region(api_key or "")
        if not region:
            raise ChannelsConfigError(f"{source}: channel {spec.name}: region: is required (or the key's third "
                                      "part, AK|SK|REGION)")
        base_url = spec.base_url or default_url(region)
        if spec.batch is not None and key_region(api_key or "") not in (None, region):
            # A batch job's calls are signed for the key's Region (`tasks/families/batch/bedrock.py`).
            raise ChannelsConfigError(f"{source}: channel {spec.name}: batch: the key's Region and region "
                                      f"({region}) differ")
    return Channel(name=spec.name, protocol=spec.protocol, base_url=base_url, api_key=api_key,
                   models=frozenset(spec.models), model_map=dict(spec.model_map),
                   priority=spec.priority, weight=spec.weight, poll_hosts=frozenset(spec.poll_hosts),
                   groups=frozenset(spec.groups), variant=spec.variant, vertex=site,
                   api_version=spec.api_version, region=region,
                   global_profiles=spec.inference_profile == "global",
                   bedrock_batch=BedrockBatch(s3_uri=spec.batch.s3_uri.rstrip("/"), role_arn=spec.batch.role_arn,
                                              min_records=spec.batch.min_records,
                                              s3_endpoint=(spec.batch.s3_endpoint or "").rstrip("/") or None)
                   if spec.batch is not None else None)
