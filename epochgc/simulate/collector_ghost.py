"""What the simulation knows about the collectors that they do not: when
the operator's pause reached the bucket, which request of which task came
before each deletion, and which keys each round's DeleteObjects really
deleted. A seed runs one collector or two (``collector`` and
``collector-2``: two daemons that each believe they lead the GC, or an
operator's ``gc collect`` beside the daemon); each is followed on its own.
Its two invariants:

* ``deleted while paused``: a DeleteObjects of the collector that reaches
  the bucket while the control document says paused must be the one
  request its task sent right after a read of that document which found it
  not paused (the pause then landed while that request was on its way:
  the one request a pause cannot stop). Anything else (a deletion whose
  task did not ask, or asked and was told paused) breaks it.
* ``deletion record not exact`` (after each round that wrote its summary):
  every key in the round's deletion record was confirmed deleted by one of
  the round's DeleteObjects that reached the bucket; every key one of them
  deleted whose answer reached the collector is in the record, unless the
  summary says the record could not be written; and a round whose record
  misses a key it deleted does not call itself a success.
"""

from __future__ import annotations

from collections.abc import Callable

from epochgc.gc.control import decode_control, paused_message
from epochgc.gc.deletion_record import deleted_keys
from epochgc.gc.run_report import RunSummary
from epochgc.storage.keys import gc_control_key, parse_l0_key
from epochgc.storage.object_store import ObjectStore

COLLECTOR = "collector"
"""The first collector's process name (a second one is ``collector-2``)."""


def is_collector(process: str) -> bool:
    """``process`` is one of the seed's collectors."""
    return process == COLLECTOR or process.startswith(f"{COLLECTOR}-")


_DELETES = ("DeleteObjects", "DeleteObject")


class CollectorGhost:
    """Ghost state of the collectors (module docstring)."""

    def __init__(
        self, root: str, bucket: ObjectStore, violation: Callable[[str, str], BaseException]
    ) -> None:
        self._root = root
        self._bucket = bucket
        self._violation = violation
        self._control = gc_control_key(root)
        self.paused_since: float | None = None
        """When the pause in force landed; ``None``: not paused."""
        self._previous: dict[str, dict[object, tuple[str, bool]]] = {}
        """A collector -> each of its tasks -> its last request that landed:
        whether it was a read of the control document, and whether the
        bucket was paused as it landed."""
        self._deleted: dict[str, set[str]] = {}
        """A collector -> keys its current round's DeleteObjects confirmed
        as they landed."""
        self._unanswered: dict[str, set[str]] = {}
        """A collector -> of those, keys of requests whose answer was lost."""
        self.pauses = 0

    # --- what the network reports -------------------------------------------------

    def control_landed(self, body: bytes, now: float) -> None:
        """The operator's write of the control document reached the bucket."""
        paused = paused_message(decode_control(body)) is not None
        if paused and self.paused_since is None:
            self.paused_since = now
            self.pauses += 1
        elif not paused:
            self.paused_since = None

    def request_landing(self, process: str, task: object, op: str, key: str) -> None:
        """A request of ``process``'s ``task`` reaches the bucket (before it
        is applied)."""
        if not is_collector(process):
            return
        paused = self.paused_since is not None
        previous = self._previous.setdefault(process, {})
        if op in _DELETES and paused:
            read, read_paused = previous.get(task, ("", False))
            if read != "control" or read_paused:
                before = "nothing" if not read else "a control read that found it paused"
                if read and read != "control":
                    before = f"a {read} (no control read in between)"
                raise self._violation(
                    "deleted while paused",
                    f"{process}'s {op} of {key} reached the bucket while paused (since "
                    f"{self.paused_since:.3f}); its task's previous request was {before}",
                )
        is_control_read = op == "GetObject" and key == self._control
        previous[task] = ("control" if is_control_read else op, paused)

    def deleted(self, keys: tuple[str, ...], process: str) -> None:
        """Keys a DeleteObjects of ``process`` confirmed as it landed (L0
        keys: the janitor's are no part of the record)."""
        if is_collector(process):
            self._deleted.setdefault(process, set()).update(self._l0(keys))

    def answer_lost(self, process: str, keys: tuple[str, ...]) -> None:
        """The answer to a DeleteObjects that landed never reached ``process``."""
        if is_collector(process):
            self._unanswered.setdefault(process, set()).update(self._l0(keys))

    def _l0(self, keys: tuple[str, ...]) -> list[str]:
        return [key for key in keys if parse_l0_key(key, self._root) is not None]

    # --- what the collector's rounds report ---------------------------------------

    def round_starts(self, process: str) -> None:
        """A round of collector ``process`` begins: its tasks and its
        deletions are new."""
        self._deleted[process] = set()
        self._unanswered[process] = set()
        self._previous[process] = {}

    def check_record(self, process: str, summary: RunSummary) -> None:
        """After a round of collector ``process`` that wrote ``summary``:
        its deletion record is exact (module docstring)."""
        recorded = {row.key for row in deleted_keys(self._bucket, self._root, summary.run_id)}
        run = summary.run_id
        deleted = self._deleted.get(process, set())
        extra = recorded - deleted
        if extra:
            raise self._violation(
                "deletion record not exact",
                f"run {run} records {len(extra)} key(s) none of its deletions confirmed, "
                f"e.g. {min(extra)}",
            )
        missing = deleted - recorded
        answered = missing - self._unanswered.get(process, set())
        record_failed = "deletion record not written" in (summary.cause or "")
        if answered and not record_failed:
            raise self._violation(
                "deletion record not exact",
                f"run {run} deleted {len(answered)} key(s) it was told of but did not "
                f"record them, e.g. {min(answered)}",
            )
        if missing and summary.success:
            raise self._violation(
                "deletion record not exact",
                f"run {run} deleted {len(missing)} key(s) its record lacks, e.g. "
                f"{min(missing)}, and its summary says it succeeded",
            )
