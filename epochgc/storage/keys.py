"""Key codecs for the bucket layout (docs/contract.md, "Bucket layout
(layout 2)"). Pure, no I/O.

Every parser returns ``None`` for anything that is not exactly the documented
shape; none raises and none guesses. The collector deletes only what
``parse_l0_key`` accepts, so this module is the first safety gate: a key that
is almost right (an unpadded shard, a negative epoch, an extra segment, a
sibling root such as ``epochgc2`` next to ``epochgc``) is not an L0 key.

Encoders, on the other hand, raise ``ValueError`` on out-of-range input: a
writer with a bug must fail loudly rather than stamp a key the collector would
misread.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass

SHARD_COUNT_MAX = 1000
"""Shards are written with three digits, so there are at most 1000."""

EPOCH_DIGITS = 18
EPOCH_MAX = 10**EPOCH_DIGITS - 1
OFFSET_DIGITS = 20
OFFSET_MAX = 10**OFFSET_DIGITS - 1

_ROOT_SEGMENT = re.compile(r"[A-Za-z0-9._=-]{1,255}")
_TOPIC = re.compile(r"[A-Za-z0-9._-]{1,249}")
_NODE_ID = re.compile(r"[A-Za-z0-9._-]{1,64}")
_LEASE_NAME = re.compile(r"[A-Za-z0-9._=-]{1,200}")
_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
_SHARD = re.compile(r"[0-9]{3}")
_EPOCH = re.compile(r"[0-9]{18}")
_OFFSET = re.compile(r"[0-9]{20}")
_PARTITION = re.compile(r"0|[1-9][0-9]{0,9}")
_REVISION = re.compile(r"[1-9][0-9]{0,19}")


@functools.lru_cache(maxsize=64)
def is_valid_root(root: str) -> bool:
    """A root is one or more ``/``-separated segments, none empty, none ``.``
    or ``..``; never empty and never ``/``.

    An empty root would make ``l0/`` a top-level prefix of the whole bucket,
    so the collector refuses it outright. Cached: ``parse_l0_key`` asks it
    for every listed key, and a process has one or two roots.
    """
    if not root:
        return False
    return all(_is_plain_segment(seg, _ROOT_SEGMENT) for seg in root.split("/"))


def is_valid_topic(topic: str) -> bool:
    """Topic names match ``[A-Za-z0-9._-]{1,249}`` and are not ``.`` or ``..``
    (which some tools treat as path navigation)."""
    return _is_plain_segment(topic, _TOPIC)


def is_valid_node_id(node_id: str) -> bool:
    """Node ids match ``[A-Za-z0-9._-]{1,64}`` and are not ``.`` or ``..``."""
    return _is_plain_segment(node_id, _NODE_ID)


def uuid_text(hex_id: str) -> str:
    """A 32-hex-digit random id (``Runtime.new_id``) written the canonical
    uuid way, as object ids in keys are."""
    if len(hex_id) != 32:
        raise ValueError(f"an object id needs 32 hex digits, got {hex_id!r}")
    h = hex_id.lower()
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


def is_valid_uuid(value: str) -> bool:
    """A canonical lowercase UUID (any version), as ``str(uuid.uuid4())``."""
    return _UUID.fullmatch(value) is not None


def _is_plain_segment(value: str, pattern: re.Pattern[str]) -> bool:
    return pattern.fullmatch(value) is not None and value not in (".", "..")


def _require_root(root: str) -> None:
    if not is_valid_root(root):
        raise ValueError(f"invalid root prefix root={root!r}")


# --- L0 -------------------------------------------------------------------


@dataclass(frozen=True, order=True)
class L0Key:
    """A parsed L0 key: ``{root}/l0/{shard:03d}/{epoch:018d}/{uuid}``."""

    shard: int
    epoch: int
    object_id: str
    root: str


def l0_prefix(root: str) -> str:
    """The prefix under which every L0 object of ``root`` lives (with slash)."""
    _require_root(root)
    return f"{root}/l0/"


def l0_shard_prefix(root: str, shard: int) -> str:
    """The listing prefix of one shard; keys under it sort by epoch."""
    _check_shard(shard)
    return f"{l0_prefix(root)}{shard:03d}/"


def encode_l0_key(root: str, shard: int, epoch: int, object_id: str) -> str:
    """Build an L0 key.

    Raises:
        ValueError: root, shard (0..999), epoch (0..10**18-1) or object id
            (canonical UUID) out of range.
    """
    _check_shard(shard)
    _check_epoch(epoch)
    if not is_valid_uuid(object_id):
        raise ValueError(f"L0 object id must be a canonical uuid, got {object_id!r}")
    return f"{l0_prefix(root)}{shard:03d}/{epoch:018d}/{object_id}"


def parse_l0_key(key: str, root: str) -> L0Key | None:
    """Parse ``key`` as an L0 key under ``root``, or return ``None``."""
    if not is_valid_root(root):
        return None
    prefix = f"{root}/l0/"
    if not key.startswith(prefix):
        return None
    parts = key[len(prefix) :].split("/")
    if len(parts) != 3:
        return None
    shard_text, epoch_text, object_id = parts
    if _SHARD.fullmatch(shard_text) is None or _EPOCH.fullmatch(epoch_text) is None:
        return None
    if not is_valid_uuid(object_id):
        return None
    return L0Key(shard=int(shard_text), epoch=int(epoch_text), object_id=object_id, root=root)


def _check_shard(shard: int) -> None:
    if not 0 <= shard < SHARD_COUNT_MAX:
        raise ValueError(f"shard must be in 0..{SHARD_COUNT_MAX - 1}, got {shard}")


def _check_epoch(epoch: int) -> None:
    if not 0 <= epoch <= EPOCH_MAX:
        raise ValueError(f"epoch must be in 0..{EPOCH_MAX}, got {epoch}")


# --- L1 -------------------------------------------------------------------


@dataclass(frozen=True, order=True)
class PartitionId:
    """One incarnation of one partition: ``(topic, revision, partition)``.

    A topic's revision is the controller offset of its ``create_topic``, so
    deleting a topic and creating one with the same name gives new
    partitions whose logs, snapshots, leases, L1 objects and report entries
    share nothing with the old ones. Keying anything by the name alone would
    let a new incarnation inherit the old one's state (and lose data).
    """

    topic: str
    revision: int
    partition: int

    def __str__(self) -> str:
        return f"{self.topic}/{self.partition}@{self.revision}"


def is_valid_revision(revision: int) -> bool:
    """Revisions are controller offsets, which start at 1."""
    return bool(1 <= revision <= OFFSET_MAX)


@dataclass(frozen=True)
class L1Key:
    """A parsed L1 key: ``{root}/l1/{topic}/{revision}/{partition}/``
    ``{first:020d}-{last:020d}-{uuid}``."""

    topic: str
    revision: int
    partition: int
    first_offset: int
    last_offset: int
    object_id: str
    root: str

    @property
    def partition_id(self) -> PartitionId:
        return PartitionId(self.topic, self.revision, self.partition)


def encode_l1_key(
    root: str, pid: PartitionId, first_offset: int, last_offset: int, object_id: str
) -> str:
    """Build an L1 key.

    Raises:
        ValueError: an invalid root, topic, revision, partition, offset range or id.
    """
    prefix = partition_l1_prefix(root, pid)
    _check_offset(first_offset)
    _check_offset(last_offset)
    if first_offset > last_offset:
        raise ValueError(f"first_offset={first_offset} > last_offset={last_offset}")
    if not is_valid_uuid(object_id):
        raise ValueError(f"L1 object id must be a canonical uuid, got {object_id!r}")
    return f"{prefix}{first_offset:020d}-{last_offset:020d}-{object_id}"


def l1_prefix(root: str) -> str:
    """Prefix (with slash) of every L1 object."""
    _require_root(root)
    return f"{root}/l1/"


def topic_l1_prefix(root: str, topic: str, revision: int) -> str:
    """Listing prefix of one topic incarnation's L1 objects."""
    return f"{root}/l1/{_topic_revision(root, topic, revision)}/"


def partition_l1_prefix(root: str, pid: PartitionId) -> str:
    """Listing prefix of one partition's L1 objects (they sort by offset)."""
    return f"{root}/l1/{_partition_path(root, pid)}/"


def parse_l1_key(key: str, root: str) -> L1Key | None:
    """Parse ``key`` as an L1 key under ``root``, or return ``None``."""
    if not is_valid_root(root):
        return None
    prefix = f"{root}/l1/"
    if not key.startswith(prefix):
        return None
    parts = key[len(prefix) :].split("/")
    if len(parts) != 4:
        return None
    topic, revision_text, partition_text, name = parts
    if not is_valid_topic(topic) or _PARTITION.fullmatch(partition_text) is None:
        return None
    if _REVISION.fullmatch(revision_text) is None:
        return None
    pieces = name.split("-", 2)
    if len(pieces) != 3:
        return None
    first_text, last_text, object_id = pieces
    if _OFFSET.fullmatch(first_text) is None or _OFFSET.fullmatch(last_text) is None:
        return None
    if not is_valid_uuid(object_id):
        return None
    first, last = int(first_text), int(last_text)
    if first > last:
        return None
    return L1Key(topic, int(revision_text), int(partition_text), first, last, object_id, root)


def _topic_revision(root: str, topic: str, revision: int) -> str:
    _require_root(root)
    if not is_valid_topic(topic):
        raise ValueError(f"invalid topic name topic={topic!r}: must match [A-Za-z0-9._-]{{1,249}}")
    if not is_valid_revision(revision):
        raise ValueError(f"revision must be in 1..{OFFSET_MAX}, got {revision}")
    return f"{topic}/{revision}"


def _partition_path(root: str, pid: PartitionId) -> str:
    if not 0 <= pid.partition <= 9_999_999_999:
        raise ValueError(f"partition must be a non-negative integer, got {pid.partition}")
    return f"{_topic_revision(root, pid.topic, pid.revision)}/{pid.partition}"


def _check_offset(offset: int) -> None:
    if not 0 <= offset <= OFFSET_MAX:
        raise ValueError(f"offset must be in 0..{OFFSET_MAX}, got {offset}")


# --- logs, snapshots, leases, reports, runs --------------------------------


def controller_log_prefix(root: str) -> str:
    """Prefix (with slash) of the controller log's entries."""
    _require_root(root)
    return f"{root}/meta/controller/"


def controller_snapshot_key(root: str) -> str:
    """Key of the controller snapshot: the fold of the controller log up to
    the offset in its metadata. It sits under the log's prefix but never
    parses as an entry key (``snapshot`` is not 20 digits), so LIST-based
    readers of the log skip it."""
    return f"{controller_log_prefix(root)}snapshot"


def partitions_prefix(root: str) -> str:
    """Prefix (with slash) of every partition's metadata."""
    _require_root(root)
    return f"{root}/meta/partitions/"


def topic_meta_prefix(root: str, topic: str, revision: int) -> str:
    """Prefix (with slash) of one topic incarnation's partition metadata."""
    return f"{root}/meta/partitions/{_topic_revision(root, topic, revision)}/"


def partition_meta_prefix(root: str, pid: PartitionId) -> str:
    """Prefix (with slash) of one partition's metadata (log and snapshot)."""
    return f"{root}/meta/partitions/{_partition_path(root, pid)}/"


def partition_log_prefix(root: str, pid: PartitionId) -> str:
    """Prefix (with slash) of one partition's command log."""
    return f"{partition_meta_prefix(root, pid)}log/"


def partition_snapshot_key(root: str, pid: PartitionId) -> str:
    """Key of one partition's state snapshot."""
    return f"{partition_meta_prefix(root, pid)}snapshot"


def parse_partition_meta_key(key: str, root: str) -> PartitionId | None:
    """The partition a key under ``{root}/meta/partitions/`` belongs to, or
    ``None`` when the key is not ``.../{topic}/{revision}/{partition}/...``."""
    if not is_valid_root(root):
        return None
    prefix = f"{root}/meta/partitions/"
    if not key.startswith(prefix):
        return None
    parts = key[len(prefix) :].split("/")
    if len(parts) < 4:
        return None
    topic, revision_text, partition_text = parts[:3]
    if not is_valid_topic(topic) or _REVISION.fullmatch(revision_text) is None:
        return None
    if _PARTITION.fullmatch(partition_text) is None:
        return None
    return PartitionId(topic, int(revision_text), int(partition_text))


def encode_log_entry_key(log_prefix: str, offset: int) -> str:
    """Key of entry ``offset`` of the log at ``log_prefix`` (ends with ``/``).

    Zero padding to 20 digits makes lexicographic LIST order numeric order.
    """
    _check_offset(offset)
    if not log_prefix.endswith("/"):
        raise ValueError(f"log prefix must end with '/', got {log_prefix!r}")
    return f"{log_prefix}{offset:020d}"


def parse_log_entry_key(key: str, log_prefix: str) -> int | None:
    """The offset of a log entry key under ``log_prefix``, or ``None``."""
    if not log_prefix.endswith("/") or not key.startswith(log_prefix):
        return None
    rest = key[len(log_prefix) :]
    if _OFFSET.fullmatch(rest) is None:
        return None
    return int(rest)


def lease_key(root: str, name: str) -> str:
    """Key of the lease object ``name``."""
    _require_root(root)
    if not _is_plain_segment(name, _LEASE_NAME):
        raise ValueError(f"invalid lease name name={name!r}")
    return f"{root}/meta/leases/{name}"


LEGACY_PARTITION_LEASE_PREFIX = "partition."
"""Names of the per-partition leases of the design before node leases."""


def legacy_partition_lease_key(root: str, pid: PartitionId) -> str:
    """Key of a partition's lease from the per-partition lease design
    (``partition.{topic}.{revision}.{partition}``). Read once, when the
    partition's first ownership record is created, so that record's term
    starts above the old leader's; never written any more."""
    name = f"{LEGACY_PARTITION_LEASE_PREFIX}{pid.topic}.{pid.revision}.{pid.partition}"
    return lease_key(root, name)


def reports_prefix(root: str) -> str:
    """Prefix (with slash) of the node reports."""
    _require_root(root)
    return f"{root}/meta/reports/"


def report_key(root: str, node_id: str) -> str:
    """Key of one node's report."""
    if not is_valid_node_id(node_id):
        raise ValueError(f"invalid node id node={node_id!r}: must match [A-Za-z0-9._-]{{1,64}}")
    return f"{reports_prefix(root)}{node_id}"


def parse_report_key(key: str, root: str) -> str | None:
    """The node id of a report key, or ``None``."""
    if not is_valid_root(root):
        return None
    prefix = f"{root}/meta/reports/"
    if not key.startswith(prefix):
        return None
    node_id = key[len(prefix) :]
    return node_id if is_valid_node_id(node_id) else None


def gc_run_prefix(root: str, run_id: str) -> str:
    """Prefix (with slash) of one GC run's report files."""
    _require_root(root)
    if not _is_plain_segment(run_id, _LEASE_NAME):
        raise ValueError(f"invalid run id run_id={run_id!r}")
    return f"{root}/gc/runs/{run_id}/"


def gc_run_deleted_key(
    root: str, run_id: str, part: int, attempt: str = "", chunk: int | None = None
) -> str:
    """Key of one part of a GC run's deletion record (the keys it deleted);
    a Spark task's parts name its attempt, so a rerun adds parts of its own
    instead of replacing what the first attempt recorded, and number the
    chunks the attempt uploads as it goes (``part-{task}-{attempt}-{chunk}``)."""
    suffix = f"-{attempt}" if attempt else ""
    if chunk is not None:
        suffix += f"-{chunk:05d}"
    return f"{gc_run_prefix(root, run_id)}deleted/part-{part:05d}{suffix}.parquet"


def gc_run_summary_key(root: str, run_id: str) -> str:
    """Key of one GC run's ``summary.json``."""
    return f"{gc_run_prefix(root, run_id)}summary.json"


def gc_control_key(root: str) -> str:
    """Key of the collector's control document (paused, reset requests):
    kept in the bucket so a pause outlives any daemon process."""
    _require_root(root)
    return f"{root}/gc/control.json"


def gc_status_key(root: str) -> str:
    """Key of the status the GC lease holder publishes for ``gc status``."""
    _require_root(root)
    return f"{root}/gc/status.json"


def gc_daemons_prefix(root: str) -> str:
    """Prefix (with slash) of the GC daemons' presence documents."""
    _require_root(root)
    return f"{root}/gc/daemons/"


def gc_daemon_key(root: str, node_id: str) -> str:
    """Key of one GC daemon's presence document (``gc status`` lists the
    leader and its standbys from these)."""
    if not is_valid_node_id(node_id):
        raise ValueError(f"invalid node id node={node_id!r}: must match [A-Za-z0-9._-]{{1,64}}")
    return f"{gc_daemons_prefix(root)}{node_id}"


def gc_shard_state_key(root: str) -> str:
    """Key of the collector's shard knowledge (what earlier listings found in
    each L0 shard): which shards a round lists depends on it, never what it
    deletes."""
    _require_root(root)
    return f"{root}/gc/shards/state"


# --- node leases and ownership records --------------------------------------


def nodes_prefix(root: str) -> str:
    """Prefix (with slash) of the node liveness leases: one LIST of it is the
    cluster's node list, its ETags show which nodes still renew."""
    _require_root(root)
    return f"{root}/meta/nodes/"


def node_lease_key(root: str, node_id: str) -> str:
    """Key of one node's liveness lease.

    Raises:
        ValueError: an invalid root or node id.
    """
    if not is_valid_node_id(node_id):
        raise ValueError(f"invalid node id node={node_id!r}: must match [A-Za-z0-9._-]{{1,64}}")
    return f"{nodes_prefix(root)}{node_id}"


def parse_node_lease_key(key: str, root: str) -> str | None:
    """The node id of a node lease key, or ``None``."""
    if not is_valid_root(root):
        return None
    prefix = f"{root}/meta/nodes/"
    if not key.startswith(prefix):
        return None
    node_id = key[len(prefix) :]
    return node_id if is_valid_node_id(node_id) else None


def owners_prefix(root: str) -> str:
    """Prefix (with slash) of every ownership record: one LIST page per 1000
    partitions gives the whole cluster's ownership with ETags."""
    _require_root(root)
    return f"{root}/meta/owners/"


def owner_key(root: str, pid: PartitionId) -> str:
    """Key of one partition incarnation's ownership record.

    Raises:
        ValueError: an invalid root, topic, revision or partition.
    """
    return f"{root}/meta/owners/{_partition_path(root, pid)}"


def parse_owner_key(key: str, root: str) -> PartitionId | None:
    """The partition of an ownership record key, or ``None`` when the key is
    not exactly ``{root}/meta/owners/{topic}/{revision}/{partition}``."""
    if not is_valid_root(root):
        return None
    prefix = f"{root}/meta/owners/"
    if not key.startswith(prefix):
        return None
    parts = key[len(prefix) :].split("/")
    if len(parts) != 3:
        return None
    topic, revision_text, partition_text = parts
    if not is_valid_topic(topic) or _REVISION.fullmatch(revision_text) is None:
        return None
    if _PARTITION.fullmatch(partition_text) is None:
        return None
    return PartitionId(topic, int(revision_text), int(partition_text))
