"""L0 -> L1 reconciliation: move each led partition's records out of shared
L0 objects into per-partition L1 objects, then record the progress that lets
``M(p)`` advance; the reader that serves a partition from L1 and L0; and
an operator's way past a stuck partition (``records_lost``).

Imports ``storage``, ``leases`` and ``watermarks``; never ``gc`` or ``ingest``.
"""
