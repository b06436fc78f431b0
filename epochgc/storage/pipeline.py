"""Pipelined appends to a conditional-append log (docs/architecture.md,
"The bucket as a database").

A writer puts several consecutive slots at once, so one round trip of S3
latency is shared by up to ``depth`` entries. Replies are taken head first,
so an entry is acknowledged only after everything before it is:

1. The head's put succeeded (or the slot turns out to hold our bytes after
   an unknown outcome): acknowledge it, move to the next.
2. The head's put failed: re-read the head's slot. Ours: acknowledge.
   Empty: put it again at the same slot (later slots that already landed
   stay behind it, in order). Still failing after bounded tries: raise; no
   entry from the head on is acknowledged. A permanent error (denied, no
   such bucket) is raised at once: no rewrite can fix it.
3. The head's slot holds another writer's entry (a divergence): wait for
   every put in flight, re-read the log from the head to the tail, and let
   the caller's ``resolve`` decide which payloads to replay, in order, at the
   new tail. Ours that landed behind the foreign entry stay in the log: only
   the caller knows whether they count (a partition log ignores entries of a
   stale term on replay), so the generic layer never guesses.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass

from epochgc.errors import PermanentStorageError, RetriesExhaustedError, StorageError
from epochgc.storage.cas_log import ConditionalAppendLog, LogEntry

log = logging.getLogger("epochgc.storage.pipeline")


@dataclass(frozen=True)
class Divergence:
    """Another writer took slot ``offset`` while ours were in flight.

    Attributes:
        offset: the first slot we did not get.
        observed: the log's entries from ``offset`` to its tail, as re-read.
        unacknowledged: our payloads from the lost slot on, in order.
    """

    offset: int
    observed: tuple[LogEntry, ...]
    unacknowledged: tuple[bytes, ...]


Resolver = Callable[[Divergence], Sequence[bytes]]
"""Decides what to replay after a divergence (may raise, e.g. ``FencedError``)."""


def replay_all(divergence: Divergence) -> Sequence[bytes]:
    """Replay every unacknowledged payload after the foreign entries.

    Right for commands that are idempotent or that replay ignores when
    superseded; a leader that must stop on a foreign entry raises instead.
    """
    return divergence.unacknowledged


class PipelinedAppender:
    """Append many payloads with up to ``depth`` puts in flight, preserving
    order.

    Example::

        appender = PipelinedAppender(log, depth=8, resolve=replay_all)
        written = appender.append_all([b"a", b"b", b"c"])

    Args:
        log: the target log.
        depth: puts in flight at once (>= 1).
        resolve: what to do after a divergence.
        max_head_retries: put attempts of one head slot after failures.
        max_divergences: rounds of divergence resolution before giving up.
    """

    def __init__(
        self,
        log: ConditionalAppendLog,
        *,
        depth: int = 8,
        resolve: Resolver = replay_all,
        max_head_retries: int = 5,
        max_divergences: int = 16,
    ) -> None:
        if depth < 1:
            raise ValueError("depth must be >= 1")
        self._log = log
        self._depth = depth
        self._resolve = resolve
        self._max_head_retries = max_head_retries
        self._max_divergences = max_divergences

    def append_all(self, payloads: Sequence[bytes]) -> list[LogEntry]:
        """Append ``payloads`` in order; return the entries written, in log order.

        Raises:
            RetriesExhaustedError: a head slot could not be written, or too
                many divergences in a row.
            Whatever ``resolve`` raises.
        """
        written: list[LogEntry] = []
        self._append(payloads, written)
        return written

    def _append(self, payloads: Sequence[bytes], written: list[LogEntry]) -> None:
        pending: list[bytes] = list(payloads)
        divergences = 0
        with ThreadPoolExecutor(
            max_workers=self._depth, thread_name_prefix="epochgc-pipeline"
        ) as pool:
            while pending:
                # The tail this process knows is enough: if another writer
                # moved it, our first put finds a foreign entry and the
                # divergence path re-reads the log.
                base = self._log.tail(refresh=divergences > 0) + 1
                futures = [
                    pool.submit(self._log.append_at, base + i, payload)
                    for i, payload in enumerate(pending)
                ]
                lost_at = self._take_heads(base, pending, futures, written)
                if lost_at is None:
                    break
                _wait_all(futures)
                divergences += 1
                if divergences > self._max_divergences:
                    raise RetriesExhaustedError(
                        f"{divergences} divergences appending to {self._log.prefix!r}", None
                    )
                offset = base + lost_at
                observed = self._log.read(offset).entries
                divergence = Divergence(offset, observed, tuple(pending[lost_at:]))
                log.info(
                    "divergence at %s offset %d: %d foreign entries, %d ours unacknowledged",
                    self._log.prefix,
                    offset,
                    len(observed),
                    len(divergence.unacknowledged),
                )
                pending = list(self._resolve(divergence))

    def _take_heads(
        self,
        base: int,
        pending: list[bytes],
        futures: list[Future[bool]],
        written: list[LogEntry],
    ) -> int | None:
        """Acknowledge heads in order; return the index of the first slot lost
        to another writer, or ``None`` if every slot is ours."""
        for index, future in enumerate(futures):
            offset = base + index
            if self._settle_head(offset, pending[index], future):
                written.append(LogEntry(offset, pending[index]))
            else:
                return index
        return None

    def _settle_head(self, offset: int, payload: bytes, future: Future[bool]) -> bool:
        error: BaseException | None
        try:
            return future.result()
        except PermanentStorageError:
            raise  # no re-read or rewrite can fix a denied or missing bucket
        except StorageError as err:
            error = err
        for attempt in range(1, self._max_head_retries + 1):
            log.debug("head %d failed (%s); re-reading and retrying", offset, error)
            try:
                return self._log.append_at(offset, payload)
            except PermanentStorageError:
                raise
            except StorageError as err:
                error = err
                if attempt == self._max_head_retries:
                    break
        raise RetriesExhaustedError(
            f"could not write head slot {offset} of {self._log.prefix!r}", error
        ) from error


def _wait_all(futures: list[Future[bool]]) -> None:
    for future in futures:
        with contextlib.suppress(StorageError):
            future.result()
