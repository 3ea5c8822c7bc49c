"""The channels in force: the channels document's (`routing/document.py`), the channels operators
added through /api/channel/ (`routing/channel_store.py`, re-read every few seconds, the document
winning a name), and the prices with the operator's `ModelPrice` option over them.

Every routing function calls `check_at_start` at import, so a bad or unreadable document fails
its cold start; a request reads `get_catalog()` and tries its channels (`Catalog.serving`).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

from gateway.routing import document, health
from gateway.routing.catalog import Catalog
from gateway.routing.channel import Channel, channel_of, spec_model
from gateway.settings import get_settings
from gateway.store.aws import store_call_ahead


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
                built.append((record, channel_of(spec, key_of(record.key_ref, record.key_version))))
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
    base = document.document_catalog()
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
    document.forget()
    _added.forget()
    from gateway.routing import channel_keys

    channel_keys.forget()
    health.reset()
