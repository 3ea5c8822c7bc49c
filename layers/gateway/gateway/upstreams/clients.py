"""The synchronous protocols' clients, by the protocol a channel names (and its Vertex AI flavour; an
azure channel's api-version)."""

from __future__ import annotations

from typing import Any

import httpx

from gateway.upstreams.azure import AzureClient
from gateway.upstreams.base import Timeouts, UpstreamClient
from gateway.upstreams.bedrock import BedrockClient
from gateway.upstreams.chat import ChatClient
from gateway.upstreams.content import ContentClient, VertexContentClient
from gateway.upstreams.messages import MessagesClient
from gateway.upstreams.rerank import CohereClient, JinaClient

#: The synchronous protocols' clients (text, and rerank's: `upstreams/rerank.py`).
TEXT_CLIENTS: dict[str, type[UpstreamClient]] = {"chat": ChatClient, "messages": MessagesClient,
                                                 "content": ContentClient, "azure": AzureClient,
                                                 "bedrock": BedrockClient, "cohere": CohereClient, "jina": JinaClient}


def client_for(channel: Any, http: httpx.AsyncClient, timeouts: Timeouts | None = None) -> UpstreamClient:
    """The client of `channel`'s protocol, on its Vertex AI site when it names one."""
    site = getattr(channel, "vertex", None)
    if site is not None and channel.protocol == "content":
        explicit = sorted(m for m in channel.models if m != "*")
        return VertexContentClient(channel.base_url, channel.api_key, http, timeouts, site=site,
                                   **({"probe_model": channel.upstream_model(explicit[0])} if explicit else {}))
    if channel.protocol == "azure":
        return AzureClient(channel.base_url, channel.api_key, http, timeouts, api_version=channel.api_version)
    if channel.protocol == "jina":
        return JinaClient(channel.base_url, channel.api_key, http, timeouts, variant=getattr(channel, "variant", None))
    if channel.protocol == "bedrock":
        explicit = sorted(m for m in channel.models if m != "*")
        return BedrockClient(channel.base_url, channel.api_key, http, timeouts, region=channel.region,
                             global_profiles=channel.global_profiles,
                             probe_model=channel.upstream_model(explicit[0]) if explicit else None)
    return TEXT_CLIENTS[channel.protocol](channel.base_url, channel.api_key, http, timeouts)
