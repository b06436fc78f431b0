"""The collector: the eligibility rule, the page planner, the shard sweeper,
run reports, the daemon and the Spark job. Deletes only keys that parse as
L0 keys under the configured root with epoch <= M and old enough.

Imports ``storage``, ``leases`` and ``watermarks``; never ``reconciler`` or
``ingest``.
"""
