"""bench_sweep's verdict and the ceiling's slicing (pure parts, no server)."""

from __future__ import annotations

import random
import uuid

import pytest

from bench.bench_sweep import Outcome, record_overhead, report
from bench.peers import ceiling_slices
from epochgc.storage.keys import encode_l0_key


def outcome(name: str, rate: float, requests: int = 85, deleted: int = 40_500) -> Outcome:
    return Outcome(
        name,
        deleted=deleted,
        span_seconds=deleted / rate,
        by_kind={"LIST": requests - 41, "DeleteObjects": 41},
    )


def test_a_run_meeting_every_target_passes(capsys: pytest.CaptureFixture[str]) -> None:
    curve = [outcome("ceiling-4", 2000), outcome("ceiling-16", 3000)]
    contenders = [outcome("epochgc", 2700), outcome("boto3", 1400), outcome("s3cmd", 700)]
    assert report(curve, contenders, 40_500, True) == 0
    assert capsys.readouterr().out.splitlines()[-1].endswith("PASS")


@pytest.mark.parametrize(
    ("change", "why"),
    [
        ({"skipped": "rclone not installed (no sudo)"}, "rclone skipped: rclone not installed"),
        ({"wrongly_deleted": 1}, "1 ineligible deleted"),
        ({"eligible_left": 5}, "rclone left 5 of 40500 eligible"),
        ({"span_seconds": 40_500 / 2800}, "NOT ahead of every peer"),
    ],
)
def test_a_skipped_wrong_incomplete_or_faster_peer_fails_the_run(
    change: dict[str, object], why: str, capsys: pytest.CaptureFixture[str]
) -> None:
    peer = outcome("rclone", 400)
    for name, value in change.items():
        setattr(peer, name, value)
    curve = [outcome("ceiling-16", 3000)]
    assert report(curve, [outcome("epochgc", 2700), peer], 40_500, True) == 1
    out = capsys.readouterr().out
    assert why in out
    assert out.splitlines()[-1].endswith("FAIL")


def test_below_the_ceiling_fraction_or_above_the_request_budget_fails() -> None:
    curve = [outcome("ceiling-16", 3000)]
    assert report(curve, [outcome("epochgc", 2300), outcome("boto3", 1000)], 40_500, True) == 1
    assert report(curve, [outcome("epochgc", 2700, 90), outcome("boto3", 1000)], 40_500, True) == 1


def test_the_deletion_record_may_add_at_most_one_percent_of_the_requests(
    capsys: pytest.CaptureFixture[str],
) -> None:
    plain = outcome("epochgc", 2700, 85, 40_500)
    recorded = outcome("epochgc-record", 2700, 85, 40_500)
    recorded.by_kind["PUT"] = 1
    recorded.record_bytes = 40 * 40_500
    assert not record_overhead(plain, recorded)  # 1 PUT on 85 requests: +1.2%
    assert "+1.18%" in capsys.readouterr().out
    big_plain = outcome("epochgc", 2700, 2100, 1_000_000)
    big = outcome("epochgc-record", 2700, 2100, 1_000_000)
    big.by_kind["PUT"] = 1
    assert record_overhead(big_plain, big)  # +0.05%
    curve = [outcome("ceiling-16", 3000)]
    contenders = [outcome("epochgc", 2700), outcome("boto3", 1400)]
    assert report(curve, contenders, 40_500, False) == 1


def test_ceiling_slices_are_one_page_each_and_cover_exactly_the_eligible_keys() -> None:
    rng = random.Random(3)
    keys = [
        encode_l0_key("epochgc", rng.randrange(3), rng.randrange(10), str(uuid.uuid4()))
        for _ in range(7_000)
    ]
    slices = ceiling_slices(keys, "epochgc", 6)
    covered: list[str] = []
    for prefix, start_after in slices:
        shard_keys = sorted(k for k in keys if k.startswith(prefix) and k > start_after)
        page = shard_keys[:1000]  # what one LIST page returns
        covered += [k for k in page if int(k.split("/")[3]) <= 6]
    eligible = [k for k in keys if int(k.split("/")[3]) <= 6]
    assert sorted(covered) == sorted(eligible)
    assert len(slices) == sum(
        -(-sum(1 for k in eligible if k.startswith(p)) // 1000) for p in {s[0] for s in slices}
    )


def test_a_verdict_line_names_the_target_it_missed(capsys: pytest.CaptureFixture[str]) -> None:
    # Only the deletion record's overhead was missed: the last line used to
    # end '... 0 ineligible deleted (target ...) FAIL' with nothing saying why.
    curve = [outcome("ceiling-16", 3000)]
    assert report(curve, [outcome("epochgc", 2700), outcome("boto3", 1000)], 40_500, False) == 1
    last = capsys.readouterr().out.splitlines()[-1]
    assert last.startswith("bench sweep: ") and last.endswith("FAIL")
    assert "missed: deletion record overhead" in last, last
    assert "(target >= 0.8, ahead, <= 2.1, 0, deletion record <= 1%)" in last, last
    below = report([outcome("ceiling-16", 3000)], [outcome("epochgc", 2300)], 40_500, True)
    assert below == 1
    assert "missed: fraction of the ceiling" in capsys.readouterr().out.splitlines()[-1]
