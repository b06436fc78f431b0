"""Leases and partition ownership: the lease timing rules, one
compare-and-swap lease core with role leases (the ``gc`` and ``ticker``
singletons) and node leases on it, and the balanced assignment of
partitions to nodes with the records that make it durable.

``assignment`` and ``timing`` are pure; ``codec`` turns documents into
values; ``core`` (and ``role_leases``, ``node_lease`` on it),
``ownership_store`` and ``cluster_view`` talk to the store;
``ownership_round`` drives one round.

Imports ``storage``; never ``watermarks``, ``gc``, ``reconciler`` or ``ingest``.
"""
