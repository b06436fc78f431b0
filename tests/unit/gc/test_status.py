"""What ``gc status`` shows, from the documents it read and ``now``."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from epochgc.errors import MalformedRecordError, UnsupportedVersionError
from epochgc.gc.control import (
    CollectorState,
    ControlDocument,
    DeletingJob,
    HeldJob,
    StatusDocument,
)
from epochgc.gc.presence import PresenceDocument, decode_presence, encode_presence, gone_daemons
from epochgc.gc.status import (
    StatusInputs,
    epoch_info_view,
    format_age,
    read_epoch_info,
    status_view,
)
from epochgc.leases.role_leases import LeaseDocument
from epochgc.simulate.memory_store import MemoryStore
from epochgc.watermarks.controller import Controller
from epochgc.watermarks.safe_epoch.aggregate import PartitionWatermark, SafeEpoch
from epochgc.watermarks.safe_epoch.reports import StuckCause

NOW = datetime(2026, 11, 24, 5, 0, 0, tzinfo=UTC)


def ago(seconds: float) -> datetime:
    return NOW - timedelta(seconds=seconds)


STATUS = StatusDocument(
    CollectorState.RUNNING,
    "gc-a/01",
    ago(300),
    safe_epoch=80,
    cluster_epoch=97,
    last_run_id="r1",
    last_outcome="collected",
    last_success_at=ago(300),
    next_round_at=ago(-20),
    last_round_at=ago(300),
)


def lines(lease: LeaseDocument | None, *daemons: PresenceDocument) -> str:
    inputs = StatusInputs(ControlDocument(), STATUS, lease, None, daemons)
    return "\n".join(status_view(inputs, NOW)[1])


def test_the_holder_of_the_lease_is_shown_with_the_age_of_every_figure() -> None:
    text = lines(LeaseDocument("gc-a/01", 3, ago(-12)))
    assert "gc lease:   gc-a/01 (term 3), expires in 12s" in text
    assert "daemon:     running, published by gc-a/01 5m ago" in text
    assert "M:          80 (cluster epoch 97), as of 5m ago" in text
    assert "last round: collected r1, 5m ago" in text
    assert "last ok:    2026-11-24 04:55:00Z (5m ago)" in text
    assert "next round: 2026-11-24 05:00:20Z (in 20s)" in text


@pytest.mark.parametrize(
    ("lease", "why"),
    [
        (LeaseDocument("gc-a/01", 3, ago(240)), "crashed or cut off"),
        (LeaseDocument("gc-a/01", 3, ago(240), released=True), "crashed or cut off"),
        (LeaseDocument("gc-b/02", 4, ago(-12)), "gc-b/02 does"),
        (None, "crashed or cut off"),
    ],
)
def test_a_status_whose_holder_lost_the_lease_says_so(
    lease: LeaseDocument | None, why: str
) -> None:
    text = lines(lease)
    assert "last published running by gc-a/01 5m ago; gc-a/01 no longer holds" in text
    assert why in text
    assert "next round: -" in text
    data = status_view(StatusInputs(ControlDocument(), STATUS, lease, None), NOW)[0]
    assert data["daemon"]["holder_holds_lease"] is False  # type: ignore[index]


def test_standbys_are_listed_and_stale_ones_marked() -> None:
    fresh = PresenceDocument("gc-b", "gc-b/02", "standby", "running", ago(900), ago(30), 60.0)
    stale = PresenceDocument("gc-c", "gc-c/03", "standby", "running", ago(900), ago(600), 60.0)
    text = lines(LeaseDocument("gc-a/01", 3, ago(-12)), fresh, stale)
    assert "daemons:    gc-b/02 standby, running, seen 30s ago\n" in text + "\n"
    assert "gc-c/03 standby, running, seen 10m ago; STALE" in text


def test_presence_documents_round_trip_and_refuse_newer_versions() -> None:
    doc = PresenceDocument(
        "gc-a", "gc-a/01", "leader", "running", ago(60), NOW, 60.0, "http://h:9464"
    )
    assert decode_presence(encode_presence(doc), "k") == doc
    with pytest.raises(UnsupportedVersionError):
        decode_presence(encode_presence(doc).replace(b'"v":1', b'"v":2'), "k")
    with pytest.raises(MalformedRecordError):
        decode_presence(encode_presence(doc).replace(b"60.0", b"-1"), "k")


@given(st.floats(0, 10**8))
def test_ages_are_short_and_never_overstate(seconds: float) -> None:
    text = format_age(seconds)
    unit = {"s": 1, "m": 60, "h": 3600, "d": 86400}[text[-1]]
    assert int(text[:-1]) * unit <= seconds + 0.5
    assert len(text) <= 5


def test_the_leader_tidies_presence_documents_gone_for_good_but_never_its_own() -> None:
    def doc(node: str, age: float) -> PresenceDocument:
        return PresenceDocument(node, f"{node}/1", "standby", "running", ago(9999), ago(age), 60.0)

    docs = [doc("gc-a", 5000), doc("gc-b", 1000), doc("gc-c", 600), doc("gc-d", 30)]
    # stale after 180 s, gone 600 s later
    assert gone_daemons(docs, NOW, grace_seconds=600.0, keep="gc-a") == ["gc-b"]


PAUSED = ControlDocument(paused=True, reason="look first", updated_by="alice", updated_at=ago(600))


def test_a_pause_lists_every_job_it_holds_with_when_each_came_due() -> None:
    status = replace(
        STATUS,
        state=CollectorState.PAUSED,
        held=(HeldJob(DeletingJob.L0, ago(540)), HeldJob(DeletingJob.TIDYING, ago(120))),
    )
    lease = LeaseDocument("gc-a/01", 3, ago(-12))
    data, text = status_view(StatusInputs(PAUSED, status, lease, None), NOW)
    assert text[1] == (
        "held:       L0 sweep (held since 9m ago), janitor (not due yet), "
        "controller truncation (not due yet), tidying (held since 2m ago)"
    )
    assert data["held_jobs"] == [
        {"job": "l0", "what": "L0 sweep", "due_since": ago(540)},
        {"job": "janitor", "what": "janitor", "due_since": None},
        {"job": "controller_truncation", "what": "controller truncation", "due_since": None},
        {"job": "tidying", "what": "tidying", "due_since": ago(120)},
    ]
    # A publisher that lost the lease is not trusted for what is due now.
    _data, stale = status_view(StatusInputs(PAUSED, status, None, None), NOW)
    assert "held since" not in stale[1] and stale[1].startswith("held:       L0 sweep")


def test_nothing_is_held_while_running() -> None:
    data, text = status_view(StatusInputs(ControlDocument(), STATUS, None, None), NOW)
    assert data["held_jobs"] == []
    assert not any(line.startswith("held:") for line in text)


# --- times from another host's clock (issue 26, item 2) --------------------

AHEAD = -30 * 86400.0  # ago(AHEAD): 30 days in this reader's future


def test_a_presence_document_from_the_future_is_stale_and_tidied() -> None:
    """A daemon on a host 30 days ahead that crashed would otherwise look
    fresh for 30 days, and its document would outlive the grace."""
    doc = PresenceDocument("gc-z", "gc-z/1", "standby", "running", ago(AHEAD), ago(AHEAD), 60.0)
    assert doc.age_seconds(NOW) is None
    assert doc.is_stale(NOW)
    assert gone_daemons([doc], NOW, grace_seconds=600.0, keep="gc-a") == ["gc-z"]
    near = PresenceDocument("gc-y", "gc-y/1", "standby", "running", ago(0), ago(-30), 60.0)
    assert near.age_seconds(NOW) == 0 and not near.is_stale(NOW)


def test_gc_status_says_a_time_is_from_the_future_instead_of_calling_it_fresh() -> None:
    ahead_status = StatusDocument(
        CollectorState.RUNNING, "gc-z/01", ago(AHEAD), safe_epoch=80, last_round_at=ago(AHEAD)
    )
    doc = PresenceDocument("gc-z", "gc-z/01", "leader", "running", ago(AHEAD), ago(AHEAD), 60.0)
    data, lines = status_view(StatusInputs(ControlDocument(), ahead_status, None, None, [doc]), NOW)
    text = "\n".join(lines)
    assert "0s ago" not in text, text
    assert "ahead of this clock" in text and "STALE" in text
    daemon = data["daemon"]
    assert isinstance(daemon, dict) and daemon["age_seconds"] is None
    daemons = data["daemons"]
    assert isinstance(daemons, list) and daemons[0]["stale"] and daemons[0]["age_seconds"] is None


# --- gc epoch-info ------------------------------------------------------------------


def test_epoch_info_names_the_pinning_partitions_and_why_one_is_stuck() -> None:
    stuck = StuckCause("missing", "epochgc/l0/001/000000000000000039/x", 2, 4, ago(60))
    safe = SafeEpoch(
        safe_epoch=38,
        controller_offset=97,
        pinning=(
            PartitionWatermark("orders", 0, 38, "node-a", 2, stuck),
            PartitionWatermark("orders", 1, 45, None, 2),
        ),
        partitions=3,
        unreported=1,
        oldest_report_at=ago(30),
    )
    data, lines = epoch_info_view(97, safe)
    assert lines == [
        "cluster epoch 97, M 38 (lag 59); 3 live partitions, 1 without a report",
        f"{'pinning partition':40} {'M(p)':>8}  reported by",
        f"{'orders/0':40} {38:>8}  node-a",
        "    stuck: missing L0 object epochgc/l0/001/000000000000000039/x (records 2..4) "
        "since 2026-11-24T04:59:00Z",
        f"{'orders/1':40} {45:>8}  (no report: revision - 1)",
    ]
    assert (data["lag"], data["unreported_partitions"], data["oldest_report_at"]) == (
        59,
        1,
        ago(30),
    )
    pinning = data["pinning"]
    assert isinstance(pinning, list) and pinning[0]["stuck"] == stuck.to_json()
    assert pinning[1] == {
        "topic": "orders",
        "partition": 1,
        "safe_epoch": 45,
        "node": None,
        "stuck": None,
    }


def test_epoch_info_reads_m_and_the_cluster_epoch_or_says_why_m_is_untrusted() -> None:
    store = MemoryStore()
    Controller(store, "epochgc").create_topic("orders", 2)
    Controller(store, "epochgc").tick()
    info = read_epoch_info(store, "epochgc", pinning=1)
    assert info.cluster_epoch == 2 and info.safe is not None and not info.untrusted
    assert (info.safe.safe_epoch, info.safe.partitions, len(info.safe.pinning)) == (0, 2, 1)
    store.put("epochgc/meta/controller/00000000000000000003", b"not json")
    info = read_epoch_info(store, "epochgc")
    assert info.safe is None and info.cluster_epoch == 3
    assert info.untrusted.startswith("MalformedRecordError: controller entry 3")
