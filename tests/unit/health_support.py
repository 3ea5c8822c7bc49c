"""Channel health without AWS: the store in memory (same contract as the accounts table's items)
and a clock the test moves."""

from __future__ import annotations

import dataclasses
import threading

from gateway.routing.health import ChannelHealth


class MemoryHealthStore:
    def __init__(self) -> None:
        self._items: dict[str, ChannelHealth] = {}
        self._lock = threading.Lock()
        self.writes = 0
        self.reads = 0

    def all(self) -> list[ChannelHealth]:
        with self._lock:
            self.reads += 1
            return list(self._items.values())

    def get(self, name: str) -> ChannelHealth:
        with self._lock:
            return self._items.get(name) or ChannelHealth(name)

    def put(self, health: ChannelHealth) -> bool:
        with self._lock:
            stored = self._items.get(health.name)
            if (stored.version if stored else 0) != health.version - 1:
                return False
            self._items[health.name] = dataclasses.replace(health)
            self.writes += 1
            return True


class Clock:
    def __init__(self, now: float = 1_800_000_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds
