"""The error tree of epochgc, grouped by what the caller should do.

A caller rarely cares which S3 call failed; it cares whether to re-read and
retry, back off, stop writing, or page a human. Every error raised across a
package boundary is one of these, raised ``from`` its cause so the botocore
detail stays in the traceback. Messages carry ``key=value`` context.

This module imports nothing from the rest of the package, so that any
module can catch any of these without importing the module that raises it.
An error that carries a domain object (a delete's outcome, a range of lost
records, a stalled loop) types it as a small ``Protocol`` defined here,
listing the attributes the error promises; the domain class satisfies it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Protocol


class EpochGCError(Exception):
    """Base of every error epochgc raises on purpose."""


class ConfigError(EpochGCError):
    """A configuration file, key or environment override is unusable.

    Raised before any work starts; the message names the source (file or
    environment variable), the key and the reason.
    """

    def __init__(self, source: str, key: str, reason: str) -> None:
        """``key`` empty: the source as a whole (a file not found)."""
        super().__init__(f"{source}: {key}: {reason}" if key else f"{source}: {reason}")
        self.source = source
        self.key = key
        self.reason = reason


class StorageError(EpochGCError):
    """An object-store operation did not do what was asked."""


class PreconditionFailedError(StorageError):
    """HTTP 412: a conditional write lost (``If-None-Match: *`` on an existing
    key, or ``If-Match`` with an etag that is no longer current).

    Callers re-read the object and decide; the store is unchanged.
    """


class ConflictError(StorageError):
    """HTTP 409: S3 saw a concurrent conditional request on the same key.

    The outcome of our request is "not applied"; re-read and try again.
    """


class NotFoundError(StorageError):
    """The key (or the bucket) does not exist."""


class TransientStorageError(StorageError):
    """A failure worth retrying later: 5xx, SlowDown, throttling, a dropped
    connection or a timeout. Fails a round; never a step toward
    ``safety_blocked``."""


class PermanentStorageError(StorageError):
    """A store failure no retry can fix: raised at once, never retried.

    The message is one line naming the cause and what to check. It fails a
    round like a transient error (the operator fixes the cause, the next
    round succeeds) and never counts toward ``safety_blocked``: nothing in
    the bucket was found untrustworthy.
    """


class BucketMissingError(PermanentStorageError):
    """NoSuchBucket: the configured bucket does not exist at the endpoint
    (check ``store.bucket`` and ``store.endpoint_url``). Never taken for a
    missing key: a reader that treats "no object" as "nothing written yet"
    must not succeed on a bucket that is not there."""


LEAST_PRIVILEGE_SECTION = 'docs/operating.md, "Least privilege (IAM per process)"'
"""Where the policy of each process kind is documented: an access-denied
message sends the operator there."""


class AccessDeniedError(PermanentStorageError):
    """AccessDenied (403): the credentials are valid but not allowed this
    request (check the IAM policy or bucket policy against
    ``LEAST_PRIVILEGE_SECTION``)."""


class CredentialsError(PermanentStorageError):
    """No credentials were found, or the store refused them
    (InvalidAccessKeyId, SignatureDoesNotMatch): check the credential
    source."""


class EndpointError(PermanentStorageError):
    """The endpoint's host name does not resolve (check
    ``store.endpoint_url``)."""


class FencedError(StorageError):
    """Another writer has taken over (a higher term or a foreign entry in a
    slot we meant to fill). Terminal for this writer role: stop, don't retry."""


class CorruptLogError(StorageError):
    """A log or snapshot object is unreadable or contradicts the log's own
    invariants. Never guessed at: page a human."""


class StoreCapabilityError(StorageError):
    """The store lacks a feature epochgc's safety depends on (for example it
    ignores ``If-None-Match``, or rejects the ETag it has just returned).

    The message is one line; ``table`` holds the probe table for the
    operator (empty when there is none).
    """

    def __init__(self, message: str, *, table: str = "") -> None:
        super().__init__(message)
        self.table = table


class EmbeddedServerError(EpochGCError):
    """The embedded S3 could not start (its port is taken)."""


class BucketSettingsError(EpochGCError):
    """The bucket is set up so that a collector cannot reclaim anything
    (object lock): refused before any round."""


class SafetyBlockedError(EpochGCError):
    """``M`` could not be computed from trusted inputs; nothing was deleted."""


class CollectorPausedError(EpochGCError):
    """An operator paused the collector (``gc pause``): nothing was deleted.
    The message is ``paused by WHO: REASON``."""


class InventoryError(EpochGCError):
    """An inventory report that cannot be trusted or read: a bad checksum,
    a schema without ``Key``, an unknown format, a missing manifest."""


class SparkJobError(EpochGCError):
    """The Spark job failed as a whole (tasks failed, the job was aborted):
    the message is the cause in one line; the run's summary says the same."""


class SparkPackageError(EpochGCError):
    """The executors' package could not be built (pip, venv-pack, disk)."""


class InvariantViolation(EpochGCError):
    """A safety invariant would be broken by the requested change."""


class RetriesExhaustedError(TransientStorageError):
    """Bounded retries ran out; ``last_error`` is the final failure. Still
    transient: the round fails and a later one tries again."""

    def __init__(self, message: str, last_error: BaseException | None) -> None:
        super().__init__(message)
        self.last_error = last_error


class StoreUnreachableError(RetriesExhaustedError):
    """No connection to the endpoint could be made in any attempt. Still
    transient for a long-running process (the store may come back); a
    command's capability probes report it in one line instead of a table
    of failed probes."""


class DeleteResult(Protocol):
    """A batched delete's outcome as ``DeleteFailedError`` holds it
    (``storage.object_store.DeleteOutcome`` is one)."""

    @property
    def deleted(self) -> Sequence[str]:
        """Every key the store confirmed deleted."""
        ...

    @property
    def failed(self) -> Mapping[str, str]:
        """Each key still not deleted -> the last error code the store gave."""
        ...


class DeleteFailedError(RetriesExhaustedError):
    """Some keys of a batched delete still failed after bounded retries.

    A ``RetriesExhaustedError``: the round fails and a later one deletes
    what is left. ``outcome`` is the whole delete's outcome.
    """

    def __init__(self, outcome: DeleteResult) -> None:
        sample = ", ".join(f"{k}={c}" for k, c in list(outcome.failed.items())[:3])
        super().__init__(
            f"delete failed for {len(outcome.failed)} keys (deleted={len(outcome.deleted)}); "
            f"first: {sample}",
            None,
        )
        self.outcome = outcome


class RecordError(EpochGCError):
    """A stored JSON document (log entry, snapshot, report, lease) cannot be
    used as it is. Never guessed at."""


class MalformedRecordError(RecordError):
    """The document does not parse or lacks a required field."""


class UnsupportedVersionError(RecordError):
    """The document's ``v`` is newer than this reader knows; upgrade the
    reader rather than guess at the fields."""


class L0UnreadableError(EpochGCError):
    """An L0 object a placeholder points into is missing or does not hold
    what the placeholder says: the partition cannot be reconciled past
    ``first_record`` (docs/operating.md, "Stuck partitions").

    Attributes:
        cause: ``missing`` (NoSuchKey) or ``corrupt`` (does not decode).
        key: the L0 object.
        first_record, last_record: the records of the first placeholder
            that needs it (the one reconciliation stops at).
        detail: the underlying error, one line.
    """

    def __init__(
        self, cause: str, key: str, first_record: int, last_record: int, detail: str
    ) -> None:
        super().__init__(
            f"L0 object {key} is {cause} (records {first_record}..{last_record}): {detail}"
        )
        self.cause = cause
        self.key = key
        self.first_record = first_record
        self.last_record = last_record
        self.detail = detail


class PartitionRef(Protocol):
    """One incarnation of one partition as an error names it
    (``storage.keys.PartitionId`` is one)."""

    @property
    def topic(self) -> str:
        """The topic's name."""
        ...

    @property
    def revision(self) -> int:
        """The topic incarnation (the controller offset of its creation)."""
        ...

    @property
    def partition(self) -> int:
        """The partition's number within the topic."""
        ...


class LostRecords(Protocol):
    """Records recorded as lost, as ``RecordsLostError`` holds them
    (``watermarks.partition.codec.LostRange`` is one)."""

    @property
    def first(self) -> int:
        """The first record offset lost."""
        ...

    @property
    def last(self) -> int:
        """The last record offset lost (inclusive)."""
        ...

    @property
    def ts(self) -> datetime:
        """When they were recorded as lost."""
        ...

    @property
    def by(self) -> str:
        """Who recorded them as lost."""
        ...

    @property
    def reason(self) -> str:
        """Why, in the operator's words."""
        ...


class RecordsLostError(EpochGCError):
    """The records asked for were recorded as lost (``epochgc partition
    skip``): their L0 object went missing or corrupt before reconciliation.

    The message, ``PID: records FIRST..LAST were recorded as lost at TIME
    by WHO: REASON``, is written where the error is raised: the time takes
    the store's format (``storage.documents.format_time``).

    Attributes:
        pid: the partition incarnation read.
        lost: the recorded range (offsets, when, by whom, why).
    """

    def __init__(self, message: str, pid: PartitionRef, lost: LostRecords) -> None:
        super().__init__(message)
        self.pid = pid
        self.lost = lost


class StaleEpochError(EpochGCError):
    """A write's epoch is below the partition's window; refresh the epoch
    cache and retry. The uploaded L0 object becomes an orphan for GC."""

    def __init__(self, epoch: int, window_previous: int, window_max: int) -> None:
        super().__init__(f"stale epoch={epoch} below window=[{window_previous}, {window_max}]")
        self.epoch = epoch
        self.window_previous = window_previous
        self.window_max = window_max


class TopicExistsError(EpochGCError):
    """``create_topic`` of a name that is already live (possibly created a
    moment earlier by another process)."""


class TopicNotFoundError(EpochGCError):
    """The topic is not live in the controller snapshot."""


class LeaseLostError(FencedError):
    """This process no longer holds the lease it was writing under."""


class NotLeaderError(EpochGCError):
    """This service does not (or no longer) lead the partition at the term
    the request was pinned to; find the current leader and replay."""


class PartitionLedElsewhereError(EpochGCError):
    """``epochgc produce`` could not lead the partition it was asked to
    write to, because another node leads it."""


class StoppedLoop(Protocol):
    """Why a loop of a node is judged stopped, as ``LoopStoppedError``
    holds it (``reconciler.watchdog.LoopStall`` is one)."""

    @property
    def loop(self) -> str:
        """The loop's name (``rounds``, ``ownership``)."""
        ...

    @property
    def cause(self) -> str:
        """One line: what it died of, or how long it went without a round."""
        ...


class LoopStoppedError(EpochGCError):
    """A loop of the node stopped completing rounds or died: the node has
    stopped renewing its lease and let go of its partitions; the process
    should exit so that its supervisor restarts it. ``stall`` says which
    loop and why."""

    def __init__(self, message: str, stall: StoppedLoop) -> None:
        super().__init__(message)
        self.stall = stall


class DaemonFailedError(EpochGCError):
    """A job of the GC daemon raised something no part of it expects (a
    defect, not a store error: those are retried): the daemon stopped,
    released its leases for a peer, and its process exits non-zero so that
    its supervisor restarts it."""


class InvalidArgumentError(EpochGCError, ValueError):
    """A caller passed a value the operation refuses (a topic name outside
    the allowed alphabet, a partition count below 1, ...)."""


class LayoutMismatchError(EpochGCError):
    """The bucket was written in a layout this code does not read (an older
    epochgc's, before topic incarnations): running on it could delete data
    nobody has reconciled, so every command refuses and names the upgrade."""


class MissingExtraError(EpochGCError):
    """A command needs an optional part of epochgc that is not installed
    (the embedded S3, Spark, Parquet): the base install is what the daemon
    and the CLI need, and the rest comes as extras."""
