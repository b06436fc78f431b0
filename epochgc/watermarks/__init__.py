"""Watermarks: the partition state machine (``partition``), the controller
log and cluster epoch, the epoch ticker, and the safe epoch ``M``
(``safe_epoch``). Pure logic (state, window, commands, codecs) has no I/O;
the rest talks to storage through ``ObjectStore`` only.

Imports ``storage`` and ``leases``; never ``gc``, ``reconciler`` or ``ingest``.
"""
