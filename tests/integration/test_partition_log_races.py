"""Two writers appending "the same" entry to one partition log.

Partition-log entries name the state they expect (the term, the sequence
in the term, ``records_lost``'s first record right above ``lro``), so a
late one is ignored by replay. What remained: two writers writing
byte-identical entries (two operators skipping the same records in the
same second; two contenders starting one term) could not tell their slots
apart, so the one whose PUT lost read the other's entry back as its own.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime

import pytest

from epochgc.errors import FencedError, InvalidArgumentError
from epochgc.storage.keys import PartitionId, partition_log_prefix
from epochgc.storage.s3 import S3ObjectStore
from epochgc.watermarks.controller import Controller
from epochgc.watermarks.partition.commands import PlaceholderBatch, RecordsLost
from epochgc.watermarks.partition.replica import PartitionReplica
from epochgc.watermarks.partition.skip import plan_skip
from epochgc.watermarks.partition.term_writer import TermWriter
from tests.support.faults import HookedStore
from tests.support.placeholders import append_placeholders

ROOT = "epochgc"
PID = PartitionId("orders", 1, 0)
NOW = datetime(2026, 11, 25, 12, 0, tzinfo=UTC)


def on_log_puts(store: S3ObjectStore, hook: Callable[[], None]) -> HookedStore:
    """A store whose first create-only PUT to the partition log runs
    ``hook`` first: the other writer acting while this one's PUT is on its way."""
    pending = [hook]
    prefix = partition_log_prefix(ROOT, PID)

    def before_create(key: str, _body: bytes) -> None:
        if key.startswith(prefix) and pending:
            pending.pop()()

    return HookedStore(store, before_create=before_create)


def open_replica(store: object) -> PartitionReplica:
    replica = PartitionReplica(store, ROOT, PID)  # type: ignore[arg-type]
    replica.open()
    return replica


@pytest.fixture
def partition(store: S3ObjectStore) -> None:
    assert Controller(store, ROOT).create_topic("orders", 1).revision == PID.revision


def skip_all(replica: PartitionReplica) -> RecordsLost:
    state = replica.state
    command, _ = plan_skip(
        state, replica.retained, state.next_offset - 1, by="ops", reason="gone", now=NOW
    )
    return command


@pytest.mark.usefixtures("partition")
def test_two_operators_skipping_the_same_records_in_one_second(store: S3ObjectStore) -> None:
    lead = TermWriter(open_replica(store), 1)
    lead.start()
    append_placeholders(lead, 1, (PlaceholderBatch("l0/a", 0, 10, 3),))
    lead.close()
    other = open_replica(store)
    mine = open_replica(on_log_puts(store, lambda: other.append_records_lost(skip_all) and None))

    with pytest.raises(InvalidArgumentError, match="nothing to skip"):
        mine.append_records_lost(skip_all)

    fresh = open_replica(store)
    assert len(fresh.lost) == 1, "the records are recorded lost once"
    assert fresh.state.lro == 2


@pytest.mark.usefixtures("partition")
def test_a_second_writer_starting_the_same_term_is_fenced(store: S3ObjectStore) -> None:
    """Terms come from the ownership record's compare-and-swap, so two
    writers of one term mean a broken store or a bug; the one that did not
    write the term's ``term_start`` must not lead it."""
    rival = TermWriter(open_replica(store), 4)
    mine = TermWriter(open_replica(on_log_puts(store, lambda: rival.start() and None)), 4)

    with pytest.raises(FencedError, match="term 4 was started by another writer"):
        mine.start()
    rival.close()
    mine.close()
