"""A reconciler node's figures for the metrics layer: one plain
``NodeSample`` built at scrape time from the node, its leader services and
its node lease and ownership (nothing is pushed ahead of time)."""

from __future__ import annotations

from epochgc.metrics.custom_collectors import NodeSample, StuckSample
from epochgc.reconciler.node import ReconcilerNode


def sample_node(node: ReconcilerNode) -> NodeSample:
    """Totals over the partitions led now plus those led before (so the
    counters never go down when a partition changes hands)."""
    services = node.led_services()
    lease = node.ownership.lease
    owned = node.ownership.totals
    stats = node.stats
    retired = stats.retired_fence
    fences = [s.fence.stats for s in services]
    states = [s.leader.replica.state for s in services]
    lags = [max(0, st.next_offset - 1 - st.lro) for st in states]
    return NodeSample(
        node_id=node.node_id,
        led_partitions=len(services),
        records_reconciled=stats.records_reconciled,
        bytes_reconciled=stats.bytes_reconciled,
        l1_objects=stats.l1_objects,
        housekeeping_advances=stats.housekeeping_advances,
        reports_published=stats.reports_published,
        errors=stats.errors,
        leaderships=stats.leaderships,
        lost_leaderships=stats.lost_leaderships,
        appends=stats.retired_appends + sum(s.stats.appended for s in services),
        fence_same_epoch=retired.accepted_same_epoch + sum(f.accepted_same_epoch for f in fences),
        fence_new_epoch=retired.accepted_new_epoch + sum(f.accepted_new_epoch for f in fences),
        fence_rejected=retired.rejected_below + sum(f.rejected_below for f in fences),
        window_slides=retired.window_slides + sum(f.window_slides for f in fences),
        last_rejection_gap=max((f.last_rejection_gap for f in fences), default=0),
        max_window_size=max(
            (st.max_applied_epoch - st.previous_applied_epoch for st in states), default=0
        ),
        lro_lag_sum=sum(lags),
        lro_lag_max=max(lags, default=0),
        # Partitions acquired and lost through ownership records (the
        # per-partition leases these counters once counted are gone), and
        # the node lease's failed renewals.
        lease_acquisitions=owned["taken"] + owned["taken_over"],
        lease_losses=owned["lost"] + lease.stats["lost"],
        lease_renew_failures=lease.stats["renew_failures"],
        partitions_owned=len(node.ownership.owned()),
        ownership_moves=tuple(
            (kind, owned[kind]) for kind in ("taken", "taken_over", "handed_back", "lost")
        ),
        node_lease_renew_seconds=lease.last_renew_seconds,
        stuck=tuple(
            StuckSample(pid.topic, pid.partition, cause.cause)
            for pid, cause in sorted(node.duties.stuck_partitions().items())
        ),
    )
