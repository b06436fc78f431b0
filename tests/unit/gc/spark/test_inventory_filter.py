"""The vectorised deletion rule agrees with ``judge`` row for row."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

import pyarrow as pa
from hypothesis import given
from hypothesis import strategies as st

from epochgc.gc.eligibility import Verdict, judge
from epochgc.gc.spark.inventory_filter import select_eligible
from epochgc.storage.keys import encode_l0_key

ROOT = "epochgc"
NOW = datetime(2026, 11, 22, 3, 0, tzinfo=UTC)
MIN_AGE = timedelta(hours=1)


def good_key(draw: st.DrawFn) -> str:
    return encode_l0_key(
        ROOT,
        draw(st.integers(0, 999)),
        draw(st.integers(0, 200)),
        str(uuid.UUID(int=draw(st.integers(0, 2**128 - 1)))),
    )


@st.composite
def keys(draw: st.DrawFn) -> str:
    key = good_key(draw)
    mutation = draw(
        st.sampled_from(["none", "none", "root", "sibling", "cut", "upper", "char", "junk"])
    )
    if mutation == "root":
        return "other/" + key
    if mutation == "sibling":
        return key.replace(f"{ROOT}/", f"{ROOT}2/", 1)
    if mutation == "cut":
        return key[: draw(st.integers(0, len(key) - 1))]
    if mutation == "upper":
        return key.upper().replace(ROOT.upper(), ROOT, 1)
    if mutation == "char":
        i = draw(st.integers(len(ROOT) + 4, len(key) - 1))
        return key[:i] + draw(st.sampled_from(["x", "/", "\n", "é", "0"])) + key[i + 1 :]
    if mutation == "junk":
        return f"{ROOT}/l0/" + draw(st.text(max_size=60))
    return key


@given(
    rows=st.lists(st.tuples(keys(), st.integers(0, 7200), st.booleans()), min_size=1, max_size=40),
    safe_epoch=st.integers(0, 200),
)
def test_the_vectorised_rule_is_judge(rows: list[tuple[str, int, bool]], safe_epoch: int) -> None:
    modified = [NOW - timedelta(seconds=age) for _, age, _ in rows]
    table = pa.table(
        {
            "key": pa.array([k for k, _, _ in rows], pa.string()),
            "size": pa.array(list(range(len(rows))), pa.int64()),
            "last_modified": pa.array(
                [None if missing else m for (_, _, missing), m in zip(rows, modified, strict=True)],
                pa.timestamp("ms", tz="UTC"),
            ),
        }
    )
    selection = select_eligible(table, root=ROOT, safe_epoch=safe_epoch, now=NOW, min_age=MIN_AGE)
    expected: dict[Verdict, int] = dict.fromkeys(Verdict, 0)
    eligible = []
    for (key, _age, missing), m in zip(rows, modified, strict=True):
        # A missing timestamp is judged as "just written".
        verdict, _ = judge(
            key, NOW if missing else m, root=ROOT, safe_epoch=safe_epoch, now=NOW, min_age=MIN_AGE
        )
        expected[verdict] += 1
        if verdict is Verdict.ELIGIBLE:
            eligible.append(key)
    assert selection.eligible.column("key").to_pylist() == eligible
    assert selection.listed == len(rows)
    for verdict, count in selection.skipped.items():
        assert count == expected[verdict], verdict


def test_counts_and_bytes_on_a_known_table() -> None:
    old = NOW - timedelta(hours=2)
    k = lambda e: encode_l0_key(ROOT, 1, e, str(uuid.uuid4()))  # noqa: E731
    table = pa.table(
        {
            "key": [k(5), k(6), k(7), "epochgc/l0/junk", "elsewhere/x", k(1)],
            "size": [10, 20, 30, 40, 50, 60],
            "last_modified": pa.array([old, old, old, old, old, NOW], pa.timestamp("ms", tz="UTC")),
        }
    )
    s = select_eligible(table, root=ROOT, safe_epoch=6, now=NOW, min_age=MIN_AGE)
    assert s.eligible.num_rows == 2 and s.bytes_eligible == 30
    assert s.skipped == {
        Verdict.OUTSIDE_ROOT: 1,
        Verdict.UNPARSEABLE: 1,
        Verdict.ABOVE_SAFE_EPOCH: 1,
        Verdict.TOO_YOUNG: 1,
    }
