"""Leases and partition ownership: the lease timing rules, role leases
(the ``gc`` and ``ticker`` singletons), node leases, and the balanced
assignment of partitions to nodes with the records that make it durable.

``assignment`` and ``timing`` are pure; ``codec`` turns documents into
values; ``role_leases``, ``node_lease``, ``ownership_store`` and
``cluster_view`` talk to the store; ``ownership_round`` drives one round.

Imports ``storage``; never ``watermarks``, ``gc``, ``reconciler`` or ``ingest``.
"""
