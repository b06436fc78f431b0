"""The partition log's commands (``watermarks.partition.commands``): a
placeholder batch's validation, a placeholder command's record count, and
what every command promises replay and the leader (immutable; a leader
``term`` on all; a ``seq`` on exactly the sequenced ones, which the leader
restamps with ``dataclasses.replace``)."""

from __future__ import annotations

import dataclasses
import typing
from datetime import UTC, datetime

import pytest
from hypothesis import given
from hypothesis import strategies as st

from epochgc.watermarks.partition import commands

TS = datetime(2026, 11, 24, tzinfo=UTC)
BATCH = commands.PlaceholderBatch("epochgc/l0/000/k", 0, 10, 1)

SEQUENCED: list[commands.SequencedCommand] = [
    commands.Placeholders(3, 4, 7, (BATCH,)),
    commands.AdvanceEpoch(3, 4, 7),
    commands.AdvanceReconciled(3, 4, 20, 9),
    commands.SetAllowedLocalStartOffset(3, 4, None),
    commands.SetStartOffset(3, 4, 12),
]
UNSEQUENCED: list[commands.Command] = [
    commands.TermStart(3, "n"),
    commands.RecordsLost(3, 0, 5, 9, "object missing", "ops", TS, "n"),
]

batches = st.builds(
    commands.PlaceholderBatch,
    l0_key=st.text(max_size=20),
    byte_offset=st.integers(min_value=0, max_value=2**40),
    byte_length=st.integers(min_value=0, max_value=2**40),
    records=st.integers(min_value=1, max_value=10**6),
)


@given(
    st.integers(min_value=0, max_value=2**40),
    st.integers(min_value=0, max_value=2**40),
    st.integers(min_value=1, max_value=10**6),
)
def test_a_batch_with_offset_and_length_at_least_0_and_a_record_is_accepted(
    offset: int, length: int, records: int
) -> None:
    batch = commands.PlaceholderBatch("k", offset, length, records)
    assert (batch.byte_offset, batch.byte_length, batch.records) == (offset, length, records)


@pytest.mark.parametrize(
    ("offset", "length", "records"),
    [(-1, 10, 1), (0, -1, 1), (0, 10, 0), (0, 10, -3)],
)
def test_a_batch_with_a_negative_range_or_no_record_is_refused(
    offset: int, length: int, records: int
) -> None:
    with pytest.raises(ValueError, match="invalid placeholder batch"):
        commands.PlaceholderBatch("k", offset, length, records)


@given(st.lists(batches, max_size=8))
def test_record_count_is_the_sum_of_the_batches_records(
    chosen: list[commands.PlaceholderBatch],
) -> None:
    command = commands.Placeholders(term=1, seq=1, epoch=5, batches=tuple(chosen))
    assert command.record_count == sum(b.records for b in chosen)


def test_placeholders_without_batches_count_no_records() -> None:
    assert commands.Placeholders(1, 1, 5, ()).record_count == 0


@pytest.mark.parametrize("command", [*SEQUENCED, *UNSEQUENCED, BATCH], ids=type)
def test_commands_are_immutable(command: commands.Command | commands.PlaceholderBatch) -> None:
    name = dataclasses.fields(command)[0].name
    with pytest.raises(dataclasses.FrozenInstanceError):
        setattr(command, name, 99)


def test_sequenced_commands_are_every_command_but_term_start_and_records_lost() -> None:
    assert set(typing.get_args(commands.Command)) - set(
        typing.get_args(commands.SequencedCommand)
    ) == {
        commands.TermStart,
        commands.RecordsLost,
    }
    assert {type(c) for c in SEQUENCED} == set(typing.get_args(commands.SequencedCommand))
    assert all(isinstance(c, commands.SequencedCommand) for c in SEQUENCED)
    assert not any(isinstance(c, commands.SequencedCommand) for c in UNSEQUENCED)


@pytest.mark.parametrize("command", [*SEQUENCED, *UNSEQUENCED], ids=type)
def test_every_command_starts_with_its_term_and_a_sequenced_one_then_its_seq(
    command: commands.Command,
) -> None:
    """Commands are built positionally (``AdvanceEpoch(term, seq, epoch)``)."""
    names = [f.name for f in dataclasses.fields(command)]
    assert names[0] == "term"
    assert ("seq" in names) == isinstance(command, commands.SequencedCommand)
    if "seq" in names:
        assert names[1] == "seq"


@pytest.mark.parametrize("command", SEQUENCED, ids=type)
def test_a_leader_restamps_term_and_seq_and_nothing_else(
    command: commands.SequencedCommand,
) -> None:
    stamped = dataclasses.replace(command, term=8, seq=1)
    assert (stamped.term, stamped.seq) == (8, 1)
    assert dataclasses.replace(stamped, term=3, seq=4) == command


def test_a_nonce_defaults_to_empty_for_entries_written_before_it() -> None:
    assert commands.TermStart(2).nonce == ""
    lost = commands.RecordsLost(term=2, first=0, last=1, log_offset=3, reason="r", by="b", ts=TS)
    assert lost.nonce == ""
    assert lost != dataclasses.replace(lost, nonce="other"), "the nonce tells skips apart"
