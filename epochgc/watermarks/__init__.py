"""Watermarks: the partition state machine and its epoch window, fencing,
partition replicas and leaders, the controller log and cluster epoch, and
leases. Pure logic (``state``, ``window``, ``commands``, ``records``) has no
I/O; the rest talks to storage through ``ObjectStore`` only.

Imports ``storage``; never ``gc``, ``reconciler`` or ``ingest``.
"""
