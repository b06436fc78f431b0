"""The store's LastModified stamps on a real Ceph RADOS Gateway, as a
survivor reads them to count a dead peer's silence (``[ownership]
use_store_timestamps``): a peer's lease write, placed by its stamp against
the survivor's own lease's in one listing (``timing.written_by``), must
never be placed before it was sent (a failover that early could take a
partition from a node still acting) and should not be placed much after
it was answered (that would slow failover down)."""

from __future__ import annotations

import time

from epochgc.leases.node_lease import NodeLease
from epochgc.leases.timing import (
    STAMP_RESOLUTION_SECONDS,
    LeasePolicy,
    stamps_contradict,
    written_by,
)
from epochgc.storage.client import make_s3_client
from epochgc.storage.keys import nodes_prefix
from epochgc.storage.object_store import ObjectInfo
from epochgc.storage.s3 import S3ObjectStore
from tests.rgw.conftest import Gateway

ROOT = "stamps"
POLICY = LeasePolicy(ttl_seconds=60.0, renew_interval_seconds=20.0, skew_margin_seconds=2.0)


def _leases(store: S3ObjectStore) -> tuple[float, dict[str, ObjectInfo]]:
    """When a listing of the node leases began, and what it showed by node."""
    started = time.monotonic()
    infos = {i.key.rsplit("/", 1)[1]: i for i in store.list_objects(nodes_prefix(ROOT))}
    return started, infos


def test_a_peers_renewal_is_placed_between_its_send_and_its_answer(rgw: Gateway) -> None:
    store = S3ObjectStore(make_s3_client(rgw.settings), rgw.bucket, if_match_form="bare")
    survivor = NodeLease(store, ROOT, "survivor", policy=POLICY)
    peer = NodeLease(store, ROOT, "peer", policy=POLICY)
    assert survivor.try_acquire() and peer.try_acquire()
    # Pauses that land the two writes in the same second, the next one and
    # some seconds apart: the gateway's stamps are whole seconds or finer.
    for pause in (0.05, 0.6, 1.3, 2.7):
        own_sent = time.monotonic()
        survivor.renew()
        time.sleep(pause)
        seen_at, before = _leases(store)  # still shows the peer's previous write
        sent = time.monotonic()
        peer.renew()
        answered = time.monotonic()
        _listed_at, infos = _leases(store)
        assert infos["peer"].etag != before["peer"].etag
        own_answered = survivor.answered_at(infos["survivor"].etag)
        assert own_answered is not None, "the listing shows a write the survivor did not time"
        bound = written_by(
            own_answered, infos["survivor"].last_modified, infos["peer"].last_modified
        )
        assert bound >= sent, f"placed {sent - bound:.3f}s before it was sent (pause {pause})"
        # Stamps truncated to whole seconds lose up to one second each side.
        latest = answered + (own_answered - own_sent) + 2 * STAMP_RESOLUTION_SECONDS
        assert bound <= latest, f"placed {bound - answered:.3f}s after its answer (pause {pause})"
        assert not stamps_contradict(bound, seen_at)
