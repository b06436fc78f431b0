"""The reference write path: the producer that packs records of many
partitions into one L0 object and appends epoch-pinned placeholders.

Imports ``storage``, ``leases`` and ``watermarks``; never ``gc`` or
``reconciler``.
"""
