"""The reference write path: L0 object layout, the batcher that packs records
of many partitions into one L0 object, and epoch-pinned placeholder appends.

Imports ``storage`` and ``watermarks``; never ``gc`` or ``reconciler``.
"""
