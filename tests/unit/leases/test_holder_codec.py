"""Role lease, node lease and ownership record codecs: the contract's
bytes, round trips, forward compatibility (unknown fields ignored), newer
versions refused."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta, timezone

import pytest
from hypothesis import given
from hypothesis import strategies as st

from epochgc.errors import MalformedRecordError, UnsupportedVersionError
from epochgc.leases.holder_codec import (
    LeaseDocument,
    NodeLeaseDocument,
    OwnerDocument,
    decode_lease,
    decode_node_lease,
    decode_owner,
    encode_lease,
    encode_node_lease,
    encode_owner,
)

times = st.datetimes(
    min_value=datetime(2000, 1, 1), max_value=datetime(2200, 1, 1), timezones=st.just(UTC)
).map(lambda t: t.replace(microsecond=t.microsecond // 1000 * 1000))
node_ids = st.from_regex(r"[A-Za-z0-9_-]{1,64}", fullmatch=True)
incarnations = st.text(alphabet="0123456789abcdef", min_size=1, max_size=32)


def test_the_bytes_are_the_contracts() -> None:
    """docs/contract.md: sorted keys, no spaces, UTC to the millisecond
    (from any offset), ``released`` only when true."""
    at = datetime(2026, 11, 22, 4, 0, 5, 123456, tzinfo=timezone(timedelta(hours=1)))
    assert encode_lease(LeaseDocument("n1/5f0c", 3, at)) == (
        b'{"expires_at":"2026-11-22T03:00:05.123Z","holder":"n1/5f0c","term":3,"v":1}'
    )
    assert encode_lease(LeaseDocument("n1/5f0c", 3, at, released=True)) == (
        b'{"expires_at":"2026-11-22T03:00:05.123Z","holder":"n1/5f0c",'
        b'"released":true,"term":3,"v":1}'
    )
    node = NodeLeaseDocument("n1", "abc", at, at + timedelta(seconds=15), True, 2)
    assert encode_node_lease(node) == (
        b'{"assignment":2,"expires_at":"2026-11-22T03:00:20.123Z","incarnation":"abc",'
        b'"node":"n1","released":true,"renewed_at":"2026-11-22T03:00:05.123Z","v":1}'
    )
    assert encode_owner(OwnerDocument("n1", "abc", 2, at)) == (
        b'{"incarnation":"abc","node":"n1","term":2,"updated_at":"2026-11-22T03:00:05.123Z","v":1}'
    )
    with pytest.raises(ValueError, match="timezone-aware"):
        encode_lease(LeaseDocument("n1/5f0c", 3, datetime(2026, 11, 22)))


@given(st.text(min_size=1, max_size=40), st.integers(1, 2**40), times, st.booleans())
def test_lease_round_trip(holder: str, term: int, expires: datetime, released: bool) -> None:
    doc = LeaseDocument(holder, term, expires, released)
    assert decode_lease(encode_lease(doc), "lease") == doc


@given(node_ids, incarnations, times, st.integers(0, 3600), st.booleans())
def test_node_lease_round_trip(
    node: str, incarnation: str, renewed: datetime, ttl: int, released: bool
) -> None:
    doc = NodeLeaseDocument(node, incarnation, renewed, renewed + timedelta(seconds=ttl), released)
    assert decode_node_lease(encode_node_lease(doc), "lease") == doc


@given(node_ids, incarnations, st.integers(1, 2**40), times, st.booleans())
def test_owner_round_trip(
    node: str, incarnation: str, term: int, updated: datetime, released: bool
) -> None:
    doc = OwnerDocument(node, incarnation, term, updated, released)
    assert decode_owner(encode_owner(doc), "owner") == doc


def test_released_is_written_only_when_true_and_renewals_change_the_bytes() -> None:
    at = datetime(2026, 11, 24, 5, 0, tzinfo=UTC)
    held = NodeLeaseDocument("n1", "abc", at, at + timedelta(seconds=15))
    assert "released" not in json.loads(encode_node_lease(held))
    later = NodeLeaseDocument("n1", "abc", at + timedelta(seconds=5), at + timedelta(seconds=20))
    assert encode_node_lease(later) != encode_node_lease(held)
    owner = json.loads(encode_owner(OwnerDocument("n1", "abc", 3, at)))
    assert owner == {
        "v": 1,
        "node": "n1",
        "incarnation": "abc",
        "term": 3,
        "updated_at": "2026-11-24T05:00:00.000Z",
    }


OWNER = {
    "v": 1,
    "node": "n1",
    "incarnation": "abc",
    "term": 2,
    "updated_at": "2026-11-24T05:00:00Z",
}


def test_unknown_fields_are_ignored_and_newer_versions_refused() -> None:
    doc = {**OWNER, "future": {"x": 1}}
    assert decode_owner(json.dumps(doc).encode(), "owner").term == 2
    with pytest.raises(UnsupportedVersionError):
        decode_owner(json.dumps({**doc, "v": 2}).encode(), "owner")
    lease = {
        "v": 2,
        "node": "n1",
        "incarnation": "abc",
        "renewed_at": "2026-11-24T05:00:00Z",
        "expires_at": "2026-11-24T05:00:15Z",
    }
    with pytest.raises(UnsupportedVersionError):
        decode_node_lease(json.dumps(lease).encode(), "lease")


@pytest.mark.parametrize(
    "change",
    [
        {"term": 0},
        {"term": True},
        {"node": "a/b"},
        {"incarnation": ""},
        {"released": "yes"},
        {"updated_at": "yesterday"},
    ],
)
def test_malformed_owner_records_are_refused(change: dict[str, object]) -> None:
    doc = OWNER
    with pytest.raises(MalformedRecordError):
        decode_owner(json.dumps({**doc, **change}).encode(), "owner")


def test_lease_documents_round_trip() -> None:
    doc = LeaseDocument("node-1/abc", 4, datetime(2026, 11, 22, 3, 0, 5, 123000, tzinfo=UTC))
    data = encode_lease(doc)
    assert b'"expires_at":"2026-11-22T03:00:05.123Z"' in data
    assert decode_lease(data, "lease") == doc
    with pytest.raises(MalformedRecordError):
        decode_lease(
            b'{"v": 1, "holder": "x", "term": 0, "expires_at": "2026-11-22T03:00:05Z"}', "lease"
        )


def test_a_node_lease_without_an_assignment_version_was_written_by_version_one() -> None:
    """Leases written before the field existed read as assignment version 1;
    a present one must be an integer >= 1."""
    old = (
        b'{"expires_at":"2026-11-22T03:00:20.123Z","incarnation":"abc","node":"n1",'
        b'"renewed_at":"2026-11-22T03:00:05.123Z","v":1}'
    )
    assert decode_node_lease(old, "lease").assignment == 1
    doc = json.loads(old)
    assert decode_node_lease(json.dumps({**doc, "assignment": 2}).encode(), "l").assignment == 2
    for bad in (0, "2", True, None):
        with pytest.raises(MalformedRecordError, match="assignment"):
            decode_node_lease(json.dumps({**doc, "assignment": bad}).encode(), "lease")
