"""The helpers every reader of an optional document uses."""

from __future__ import annotations

import pytest

from epochgc.errors import StorageError
from epochgc.simulate.memory_store import MemoryStore
from epochgc.storage.object_store import get_or_none, head_or_none
from tests.support.faults import OutageStore


def test_a_missing_object_is_none_and_a_present_one_is_itself() -> None:
    store = MemoryStore()
    assert get_or_none(store, "a") is None
    assert head_or_none(store, "a") is None
    store.put("a", b"hello")
    got = get_or_none(store, "a", byte_range=(1, 3))
    assert got is not None and got.body == b"ell"
    info = head_or_none(store, "a")
    assert info is not None and info.size == 5


def test_every_other_failure_still_raises() -> None:
    """Absence is a state; an outage is not: it must never read as absence."""
    inner = MemoryStore()
    inner.put("a", b"x")
    store = OutageStore(inner, "")
    store.down = True
    with pytest.raises(StorageError):
        get_or_none(store, "a")
    with pytest.raises(StorageError):
        head_or_none(store, "a")
