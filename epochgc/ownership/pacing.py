"""When a node's next ownership round runs (``reconciler/node.py``'s
ownership loop, and the simulation in ``bench/bench_ownership.py``). Pure:
the monotonic time comes in as an argument.

A node runs an ownership round a round interval after its last regular one
ended, and one more, early, just after another node's lease would turn
stale if it stays unchanged (``RoundReport.next_stale_at``), so a killed
node's partitions are taken over about a TTL after its last renewal, not up
to a round later. Two things keep a thousand nodes from listing one prefix
in the same instant:

* every survivor computes that moment from the same store stamps, so each
  looks at its own point of a window after it (``stale_look_fraction``,
  from a digest of the node id) as wide as the nodes need to stay well
  inside the store's rate on one prefix (``look_window``);
* an early look does not move the node's regular rounds: nodes that started
  at different moments keep their own phases, instead of all running their
  rounds from the one moment a node died.
"""

from __future__ import annotations

from dataclasses import dataclass

from epochgc.ownership.cluster_view import node_fraction

STALE_LOOK_DELAY = 0.05
"""How long after another node's lease would turn stale the early round
looks at the soonest: the judgement needs it unchanged for a whole TTL."""

LOOKS_PER_SECOND = 400
"""How many nodes' early looks the window holds a second. A look is a node
listing or two and a few GETs on ``meta/nodes/``: 400 a second is about
2,000 reads a second there, under half of the 5,500 S3 serves a prefix
(the rest is the nodes' regular rounds)."""


def look_window(nodes: int) -> float:
    """Seconds over which ``nodes`` nodes spread their early looks at one
    moment: 0.05 s at 20 nodes, 2.5 s at 1,000."""
    return max(0, nodes) / LOOKS_PER_SECOND


def stale_look_fraction(node_id: str) -> float:
    """This node's place in the window, in [0, 1): stable, so a node always
    looks at the same point of it."""
    return node_fraction(node_id, "stale-look")


@dataclass
class OwnershipPacing:
    """The schedule of one node's ownership rounds.

    Example::

        pacing = OwnershipPacing(interval=5.0, fraction=stale_look_fraction("node-1"))
        report = ownership.run_round(partitions)
        now = time.monotonic()
        await asyncio.sleep(pacing.after_round(now, report.next_stale_at, report.nodes))
    """

    interval: float
    fraction: float = 0.0
    """``stale_look_fraction`` of the node."""
    _regular_at: float | None = None
    _early: bool = False
    """The round about to run (or running) is an early look."""

    def after_round(self, now: float, next_stale_at: float | None, nodes: int = 0) -> float:
        """Seconds to wait after a round that ended at ``now`` whose report
        said ``next_stale_at`` (``None``: no silent node, or no report)
        and saw ``nodes`` node leases."""
        if not self._early or self._regular_at is None:
            self._regular_at = now + self.interval
        at, self._early = self._regular_at, False
        if next_stale_at is not None:
            offset = self.fraction * look_window(nodes)
            look = max(now + STALE_LOOK_DELAY, next_stale_at + STALE_LOOK_DELAY + offset)
            if look < at:
                at, self._early = look, True
        return max(0.0, at - now)
