"""The text protocols' clients, by the protocol a channel names."""

from __future__ import annotations

from gateway.upstreams.base import UpstreamClient
from gateway.upstreams.chat import ChatClient
from gateway.upstreams.content import ContentClient
from gateway.upstreams.messages import MessagesClient

TEXT_CLIENTS: dict[str, type[UpstreamClient]] = {"chat": ChatClient, "messages": MessagesClient,
                                                 "content": ContentClient}
