"""Partition ownership: which node should own which partition (the
balanced ``assignment``), the view of every node's lease (``cluster_view``),
the ownership records that make an owner durable (``owner_records``), the
round that takes, hands back and fences them (``node_ownership``), and when
the next round runs (``pacing``).

``assignment`` and ``pacing`` are pure; the others talk to the store
through the runtime (``epochgc.runtime``), so the simulation runs them.

Imports ``leases`` and ``storage``; never ``watermarks``, ``gc``,
``reconciler`` or ``ingest``.
"""
