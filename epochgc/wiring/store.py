"""The composition root for the object store: config in, a ready store out.

Commands and daemons call ``open_store`` once; it starts the embedded S3
server when the configuration asks for one, builds the client with request
accounting attached, refuses a store without the semantics epochgc's safety
needs before anything writes to it, and stops everything it started on exit.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from epochgc.config import Config
from epochgc.events import EventChannel
from epochgc.storage.client import ClientSettings, make_s3_client
from epochgc.storage.embedded import EmbeddedS3
from epochgc.storage.probe import ensure_store_capable
from epochgc.storage.request_stats import RequestStats
from epochgc.storage.s3 import IF_MATCH_FORMS, IfMatchForm, S3ObjectStore
from epochgc.watermarks.layout import ensure_layout
from epochgc.wiring.settings import client_settings_of, retry_policy_of

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class StoreHandle:
    """A store with its request counters and where it points."""

    store: S3ObjectStore
    stats: RequestStats
    endpoint: str
    client_settings: ClientSettings
    """How to reach the store again (Spark tasks build their own clients)."""
    events: EventChannel
    """Where the store publishes ``Throttled``: hand it to the components
    that listen (a round's sweeper slows down on it)."""


def store_from_settings(
    config: Config, settings: ClientSettings, *, events: EventChannel | None = None
) -> tuple[S3ObjectStore, RequestStats]:
    """An ``S3ObjectStore`` with request accounting, using ``[store]``
    policies, publishing ``Throttled`` on ``events``."""
    client = make_s3_client(settings)
    stats = RequestStats()
    stats.attach(client)
    policy = retry_policy_of(config)
    store = S3ObjectStore(
        client,
        config.store.bucket,
        retry_policy=policy,
        delete_concurrency=config.store.delete_concurrency,
        events=events,
    )
    form = config.store.if_match_form
    if form in IF_MATCH_FORMS:
        store.use_if_match_form(form)
    return store, stats


class CapabilityCache:
    """The stores that passed the capability probes in this process, by
    (endpoint, bucket), so the probes run once per process whatever the
    number of rounds or commands; with each, the ``If-Match`` ETag form the
    probes found, handed to every later store of that endpoint and bucket.

    Example::

        cache = CapabilityCache()
        cache.ensure(store, "epochgc", "http://127.0.0.1:9000")  # probes
        cache.ensure(store, "epochgc", "http://127.0.0.1:9000")  # free
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._passed: dict[tuple[str, str], IfMatchForm] = {}

    def ensure(
        self, store: S3ObjectStore, root: str, endpoint: str, *, if_match_form: str = "auto"
    ) -> None:
        """Probe ``store`` unless it already passed in this process; leave it
        sending the ``If-Match`` form found (``if_match_form`` ``"auto"``) or
        the one configured (``"quoted"``/``"bare"``, tested as is).

        Raises:
            StoreCapabilityError: the store lacks what epochgc needs.
            PermanentStorageError: the bucket cannot be used at all.
        """
        key = (endpoint, store.bucket)
        with self._lock:
            if key in self._passed:
                store.use_if_match_form(self._passed[key])
                return
            ensure_store_capable(
                store, root, endpoint=endpoint, detect_if_match_form=if_match_form == "auto"
            )
            self._passed[key] = store.if_match_form
            log.debug(  # where the store is: DEBUG (docs/commands.md)
                "store capabilities checked: bucket=%s endpoint=%s if_match_form=%s",
                store.bucket,
                endpoint,
                store.if_match_form,
            )


PROCESS_CAPABILITIES = CapabilityCache()
"""This process's verdicts (the composition root's default)."""


@contextmanager
def open_store(
    config: Config,
    *,
    check_layout: bool = True,
    writes: bool = True,
    capabilities: CapabilityCache = PROCESS_CAPABILITIES,
    before_writes: Callable[[S3ObjectStore], object] | None = None,
) -> Iterator[StoreHandle]:
    """Yield a ready store; start (and finally stop) the embedded S3 if configured.

    Args:
        check_layout: refuse a root written in another bucket layout
            (``ensure_layout``); only commands that work below the layout
            (``check-store``, ``migrate``) turn it off.
        writes: the caller will write: refuse a store that fails the
            capability probes (once per process per endpoint and bucket).
            Only read-only commands pass ``False``: a store that ignores or
            rejects conditional writes could let two writers win one log
            slot, or leave leases that can never be renewed or released.
        capabilities: where verdicts are cached.
        before_writes: a check that runs before the capability probes
            write anything (the daemon's bucket settings check: on a bucket
            with object lock the probes' writes fail too, and this names why).

    Raises:
        LayoutMismatchError: the root was written by an older epochgc.
        StoreCapabilityError: ``writes`` and the store failed a probe.
        PermanentStorageError: the bucket cannot be used at all.
    """
    embedded: EmbeddedS3 | None = None
    try:
        if config.store.embedded:
            embedded = EmbeddedS3(bucket=config.store.bucket, port=config.store.embedded_port)
            embedded.start()
            settings = embedded.client_settings()
        else:
            settings = client_settings_of(config)
        events = EventChannel()
        store, stats = store_from_settings(config, settings, events=events)
        endpoint = settings.endpoint_url or f"aws:{settings.region}"
        log.debug("object store: bucket=%s endpoint=%s", config.store.bucket, endpoint)
        if before_writes is not None:
            before_writes(store)
        if writes:
            capabilities.ensure(
                store, config.layout.root, endpoint, if_match_form=config.store.if_match_form
            )
        if check_layout:
            ensure_layout(store, config.layout.root)
        yield StoreHandle(store, stats, endpoint, settings, events)
    finally:
        if embedded is not None:
            embedded.stop()
