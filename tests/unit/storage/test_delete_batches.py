"""Splitting a stream of keys into DeleteObjects requests."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from epochgc.storage.object_store import DeleteOutcome, delete_in_batches, key_batches


@given(count=st.integers(0, 3500), size=st.integers(1, 1000))
def test_batches_keep_every_key_in_order_and_none_is_too_big(count: int, size: int) -> None:
    keys = [f"k{i}" for i in range(count)]
    batches = list(key_batches(iter(keys), size))
    assert [key for batch in batches for key in batch] == keys
    assert all(1 <= len(batch) <= size for batch in batches)
    assert len(batches) == -(-count // size)


def test_delete_in_batches_sends_one_request_a_thousand_keys_and_merges() -> None:
    sent: list[int] = []

    def delete_batch(batch: list[str]) -> DeleteOutcome:
        sent.append(len(batch))
        return DeleteOutcome(tuple(batch[1:]), {batch[0]: "InternalError"}, 1)

    outcome = delete_in_batches((f"k{i}" for i in range(2500)), delete_batch)
    assert sent == [1000, 1000, 500]
    assert outcome.requests == 3
    assert len(outcome.deleted) == 2497
    assert set(outcome.failed) == {"k0", "k1000", "k2000"}
