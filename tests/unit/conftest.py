"""Unit tests never reach AWS: channel health lives in memory for each test, and no channel is
added through /api/channel/ (the catalog is the document's alone)."""

from __future__ import annotations

import pytest

from gateway.routing import channels, health
from tests.unit.health_support import MemoryHealthStore


@pytest.fixture(autouse=True)
def health_store():
    """A fresh in-memory health store for the test (the real bookkeeping, without DynamoDB)."""
    store = MemoryHealthStore()
    health.use_store(store)
    channels.use_added_source(None)
    yield store
    health.use_store(None)
    channels.use_added_source(channels.stored_channels)
