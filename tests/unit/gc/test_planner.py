"""The page planner: nothing above M is ever planned; the shard stops there."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

from hypothesis import given
from hypothesis import strategies as st

from epochgc.gc.eligibility import Verdict
from epochgc.gc.planner import plan_page
from epochgc.storage.keys import encode_l0_key, parse_l0_key
from epochgc.storage.object_store import ObjectInfo

NOW = datetime(2026, 11, 22, 3, 0, tzinfo=UTC)


def info(key: str, age: timedelta = timedelta(hours=2)) -> ObjectInfo:
    return ObjectInfo(key, 10, "etag", NOW - age)


keys = st.one_of(
    st.integers(0, 200).map(lambda e: encode_l0_key("epochgc", 1, e, str(uuid.UUID(int=e)))),
    st.text(alphabet="abc/019", max_size=30).map(lambda t: f"epochgc/l0/001/{t}"),
)


@given(st.lists(keys, max_size=60), st.integers(-1, 200))
def test_nothing_above_m_is_planned_and_the_page_stops_there(page: list[str], m: int) -> None:
    ordered = sorted(page)
    plan = plan_page(
        [info(k) for k in ordered],
        root="epochgc",
        safe_epoch=m,
        now=NOW,
        min_age=timedelta(hours=1),
    )
    for planned in plan.eligible:
        parsed = parse_l0_key(planned.key, "epochgc")
        assert parsed is not None and parsed.epoch <= m
    above = [k for k in ordered if (p := parse_l0_key(k, "epochgc")) is not None and p.epoch > m]
    assert plan.stop == bool(above)
    if above:
        assert plan.listed == ordered.index(above[0]) + 1
        assert plan.verdicts[Verdict.ABOVE_SAFE_EPOCH] == 1


def test_too_young_objects_report_when_they_age_in() -> None:
    young = info(encode_l0_key("epochgc", 1, 3, str(uuid.uuid4())), age=timedelta(minutes=10))
    plan = plan_page([young], root="epochgc", safe_epoch=5, now=NOW, min_age=timedelta(hours=1))
    assert plan.eligible == () and plan.verdicts[Verdict.TOO_YOUNG] == 1
    assert plan.youngest_too_young == young.last_modified


def test_the_guard_message_names_the_flag_that_bypasses_only_it() -> None:
    from epochgc.gc.round_protocol import guard_message  # noqa: PLC0415

    assert guard_message(50, 100, 0.5, "epochgc gc collect") is None
    assert guard_message(0, 0, 0.5, "epochgc gc collect") is None
    message = guard_message(51, 100, 0.5, "epochgc gc spark")
    assert message is not None and "51.0% > max_delete_fraction 50%" in message
    assert "`epochgc gc spark --force`" in message and "only this guard" in message
