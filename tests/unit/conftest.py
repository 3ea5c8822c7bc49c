"""Unit tests never reach AWS: channel health lives in memory for each test."""

from __future__ import annotations

import pytest

from gateway.routing import health
from tests.unit.health_support import MemoryHealthStore


@pytest.fixture(autouse=True)
def health_store():
    """A fresh in-memory health store for the test (the real bookkeeping, without DynamoDB)."""
    store = MemoryHealthStore()
    health.use_store(store)
    yield store
    health.use_store(None)
