"""Leases: the lease timing rules, one compare-and-swap lease core, the
role leases (the ``gc`` and ``ticker`` singletons) and the node leases on
it, and the one codec of their documents.

``timing`` is pure; ``holder_codec`` turns documents into values; ``core``
(and ``role_leases``, ``node_lease`` on it) talk to the store. Which node
owns which partition is the ``ownership`` layer above.

Imports ``storage``; never ``ownership``, ``watermarks``, ``gc``,
``reconciler`` or ``ingest``.
"""
