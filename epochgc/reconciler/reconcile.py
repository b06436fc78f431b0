"""One reconciliation pass over one led partition.

1. Catch up with the partition log; take the accepted placeholders above
   ``lro`` (whole placeholders, up to ``max_records`` records).
2. Fetch their records from L0 (one ranged GET per L0 object).
3. Write them, in offset order, as one L1 object
   ``{root}/l1/{topic}/{revision}/{partition}/{first}-{last}-{uuid}``.
4. Append ``advance_reconciled(lro=last, log_offset)`` where ``log_offset``
   is just below the next unreconciled placeholder, or the log end this
   pass saw when none is left: every placeholder at or below it is in L1.

When an L0 object is missing or corrupt (``L0UnreadableError``), the
placeholders before the first one that needs it are still reconciled, then
the error is raised: the partition is stuck at that placeholder until the
object comes back or an operator records the loss (``partition skip``).

A crash between 3 and 4 leaves an L1 object that no ``lro`` vouches for;
the next pass writes the same records again under a new id and readers use
only objects at or below ``lro``. When no placeholder is pending but the
window slid past what was last reconciled (an idle partition's
``advance_epoch``), the pass appends ``advance_reconciled`` at the log end
alone, which is what lifts ``M(p)``.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from epochgc.errors import CorruptLogError, L0UnreadableError
from epochgc.reconciler.fetch import PendingPlaceholder, fetch_records, pending_placeholders
from epochgc.storage.keys import encode_l1_key, uuid_text
from epochgc.storage.l0_format import encode_records
from epochgc.storage.object_store import ObjectStore
from epochgc.watermarks.partition.term_writer import TermWriter

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ReconcileResult:
    """What one pass did."""

    records: int
    bytes_written: int
    l1_key: str | None
    lro: int
    reconciled_log_offset: int
    safe_epoch: int
    seconds: float


class Reconciler:
    """Runs reconciliation passes for partitions this node leads.

    Example::

        result = Reconciler(store, "epochgc").reconcile_once(leader)

    Args:
        max_records: records per pass (one L1 object each).
        fetch_concurrency: ranged GETs in flight per pass.
    """

    def __init__(
        self,
        store: ObjectStore,
        root: str,
        *,
        max_records: int = 100_000,
        fetch_concurrency: int = 8,
    ) -> None:
        if max_records < 1:
            raise ValueError("max_records must be >= 1")
        self._store = store
        self._root = root
        self._max_records = max_records
        self._fetch_concurrency = fetch_concurrency

    def reconcile_once(self, leader: TermWriter) -> ReconcileResult:
        """One pass (see the module docstring).

        Raises:
            FencedError / LeaseLostError: no longer the leader; nothing was
                recorded (an L1 object may have been written: harmless).
            L0UnreadableError: an L0 object is missing or damaged; the
                placeholders before it were reconciled, nothing after.
        """
        replica = leader.replica
        runtime = replica.runtime
        started = runtime.monotonic()
        leader.catch_up()
        state = replica.state
        log_end = state.applied_log_offset
        pending = pending_placeholders(replica, state.lro, self._max_records)
        if not pending:
            if state.lro < state.next_offset - 1:
                log.warning(
                    "%s/%d: records %d..%d are not reconciled but no retained placeholder "
                    "holds them (%d retained, log offset %d)",
                    replica.topic,
                    replica.partition,
                    state.lro + 1,
                    state.next_offset - 1,
                    len(replica.retained),
                    log_end,
                )
            if state.window_offset > state.reconciled_log_offset:
                leader.advance_reconciled(state.lro, log_end)
            return self._result(leader, 0, 0, None, started)
        try:
            records = fetch_records(
                self._store, pending, concurrency=self._fetch_concurrency, runtime=runtime
            )
        except L0UnreadableError as err:
            readable = [p for p in pending if p.last_record < err.first_record]
            if readable:
                records = fetch_records(
                    self._store, readable, concurrency=self._fetch_concurrency, runtime=runtime
                )
                self._write(leader, readable, records, log_end)
            raise
        key, size = self._write(leader, pending, records, log_end)
        return self._result(leader, len(records), size, key, started)

    def _write(
        self,
        leader: TermWriter,
        pending: list[PendingPlaceholder],
        records: list[bytes],
        log_end: int,
    ) -> tuple[str, int]:
        """Steps 3 and 4 for ``pending`` (whole placeholders right above ``lro``)."""
        replica = leader.replica
        state = replica.state
        first, last = state.lro + 1, pending[-1].last_record
        if pending[0].first_record != first or len(records) != last - first + 1:
            raise CorruptLogError(
                f"{replica.topic}/{replica.partition}: placeholders cover records "
                f"{pending[0].first_record}..{last} but lro is {state.lro}"
            )
        body = encode_records(records)
        key = encode_l1_key(
            self._root, replica.pid, first, last, uuid_text(replica.runtime.new_id())
        )
        self._store.put(key, body)
        following = [
            r.log_offset for r in replica.retained if r.log_offset > pending[-1].log_offset
        ]
        log_offset = following[0] - 1 if following else log_end
        leader.advance_reconciled(last, log_offset)
        return key, len(body)

    def _result(
        self,
        leader: TermWriter,
        records: int,
        size: int,
        key: str | None,
        started: float,
    ) -> ReconcileResult:
        state = leader.replica.state
        result = ReconcileResult(
            records,
            size,
            key,
            state.lro,
            state.reconciled_log_offset,
            state.safe_epoch,
            leader.replica.runtime.monotonic() - started,
        )
        if records:
            log.debug(
                "%s/%d: reconciled %d records (%d bytes) -> lro %d, M(p) %d",
                leader.replica.topic,
                leader.replica.partition,
                records,
                size,
                result.lro,
                result.safe_epoch,
            )
        return result
