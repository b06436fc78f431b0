"""The retention hint."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from hypothesis import given
from hypothesis import strategies as st

from epochgc.reconciler.retention import RetentionTargets, retention_hint
from epochgc.watermarks.partition.codec import RetainedPlaceholder

NOW = datetime(2026, 11, 22, 3, 0, tzinfo=UTC)
# Ten placeholders of 10 records and 100 bytes each, epoch i started i minutes ago... reversed:
RETAINED = [RetainedPlaceholder(i + 1, 10 * i, 10 * i + 9, 100, i) for i in range(10)]


def started(epoch: int) -> datetime:
    return NOW - timedelta(minutes=10 - epoch)


def test_no_target_means_no_hint() -> None:
    assert retention_hint(RETAINED, 99, RetentionTargets(), NOW, started) is None


def test_bytes_target_keeps_the_newest_reconciled_records() -> None:
    assert retention_hint(RETAINED, 99, RetentionTargets(target_bytes=250), NOW, started) == 80
    assert retention_hint(RETAINED, 99, RetentionTargets(target_bytes=0), NOW, started) == 100
    assert retention_hint(RETAINED, 99, RetentionTargets(target_bytes=10**9), NOW, started) == 0


def test_only_reconciled_records_count() -> None:
    # lro 49: placeholders 5..9 are not in L1; the budget applies to 0..4.
    assert retention_hint(RETAINED, 49, RetentionTargets(target_bytes=250), NOW, started) == 30


def test_age_target_and_the_stricter_target_wins() -> None:
    # Epoch i began 10 - i minutes ago: a 4.5-minute target keeps epochs 6..9.
    ms = int(4.5 * 60 * 1000)
    assert retention_hint(RETAINED, 99, RetentionTargets(target_ms=ms), NOW, started) == 60
    both = RetentionTargets(target_bytes=250, target_ms=ms)
    assert retention_hint(RETAINED, 99, both, NOW, started) == 80


def test_unknown_epoch_times_are_kept() -> None:
    assert retention_hint(RETAINED, 99, RetentionTargets(target_ms=1), NOW, lambda _e: None) == 0


def test_bad_config_values_are_ignored() -> None:
    targets = RetentionTargets.of(
        {"retention.local.target.bytes": "lots", "retention.local.target.ms": -5}
    )
    assert not targets.is_set
    assert RetentionTargets.of({"retention.local.target.bytes": 10}).target_bytes == 10


@given(st.integers(-1, 99), st.integers(0, 2000), st.integers(0, 20 * 60 * 1000))
def test_hint_never_passes_lro_plus_one(lro: int, size: int, ms: int) -> None:
    targets = RetentionTargets(target_bytes=size, target_ms=ms)
    hint = retention_hint(RETAINED, lro, targets, NOW, started)
    assert hint is not None and hint <= lro + 1
