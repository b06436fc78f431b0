"""The configuration every process of an ``epochgc verify`` run reads (the
run folder's ``verify.toml``), and the values of it that the driver's own
parts act on too: the store root every key lives under, and the lease TTL
(a process is SIGSTOPped past it; a node whose loop stalls has a few of
them to exit). One place, so no part of the driver assumes a value the
workers were not given.
"""

from __future__ import annotations

from epochgc.storage.embedded import EMBEDDED_ACCESS_KEY, EMBEDDED_SECRET_KEY

ROOT = "epochgc"
LEASE_TTL = 3.0


def config_text(endpoint: str, bucket: str, log_level: str) -> str:
    """The text of ``verify.toml``: the embedded S3 at ``endpoint``, and
    intervals short enough that a run of seconds goes through many epochs,
    rounds, compactions and lease turnovers."""
    return f"""
[logging]
level = "{log_level}"
[store]
bucket = "{bucket}"
endpoint_url = "{endpoint}"
access_key_id = "{EMBEDDED_ACCESS_KEY}"
secret_access_key = "{EMBEDDED_SECRET_KEY}"
addressing_style = "path"
max_attempts = 3
base_backoff_seconds = 0.01
max_backoff_seconds = 0.1
[layout]
root = "{ROOT}"
l0_shards = 8
[epoch]
interval_seconds = 1.0
cache_ttl_seconds = 0.5
# The daemons compete for the one ticker role (the nodes here run no ticker).
ticker = true
[lease]
ttl_seconds = {LEASE_TTL}
renew_interval_seconds = 0.5
skew_margin_seconds = 0.5
[ownership]
# The product's proportion (rounds a third of the lease TTL): a node that
# starts, or comes back from a pause with a new incarnation, waits one round
# before it takes partitions, and failover takes about a TTL plus one round.
round_interval_seconds = 1.0
[reconciler]
round_interval_seconds = 0.2
idle_interval_seconds = 1.0
snapshot_every_entries = 50
[reports]
interval_seconds = 0.5
[gc]
min_object_age_seconds = 0.0
max_delete_fraction = 1.0
# The leader's janitor and tidying run often, so a run exercises them.
maintenance_interval_seconds = 2.0
# Epochs last a second here: eligible objects wait at most about a round
# for their shard's listing, so deletions follow M closely (check (b) sees
# them while they may still be early) and quiesce ends soon.
max_lag_seconds = 1.0
[controller]
# The leader compacts the controller log every few seconds (the churn
# thread compacts at random moments too), so nodes and collectors open it
# from a snapshot and race truncations.
compact_interval_seconds = 3.0
compact_min_entries = 5
[daemon]
interval_seconds = 1.0
after_progress_seconds = 0.2
after_failure_seconds = 0.3
control_poll_seconds = 0.5
blocked_after_failures = 1000
[metrics]
listen = ""
"""
