"""``epochgc simulate``: one seed, one trace; a fixed window of seeds
passes on today's code; a broken guard, and the deliberately unsafe
``M(p)`` rule, are caught and reported so that a person can replay them."""

from __future__ import annotations

import dataclasses
from collections.abc import Collection

import pytest

from epochgc.errors import NotFoundError, PreconditionFailedError
from epochgc.leases.timing import LeasePolicy
from epochgc.ownership import owner_records
from epochgc.reconciler.watchdog import ProgressWatchdog
from epochgc.simulate import seeds
from epochgc.simulate.cluster import ROOT
from epochgc.simulate.fault_schedule import Fault
from epochgc.simulate.seeds import report_lines, run_seed, run_seeds, scenario_of, shrink
from epochgc.storage.cas_log import ConditionalAppendLog
from epochgc.storage.keys import owners_prefix
from epochgc.storage.object_store import ObjectStore, get_or_none
from epochgc.watermarks import controller
from epochgc.watermarks.controller import ControllerView
from epochgc.watermarks.controller_codec import DeleteTopic
from epochgc.watermarks.partition import state as partition_state
from epochgc.watermarks.partition.commands import SequencedCommand
from epochgc.watermarks.partition.state import SAFE, ApplyResult, PartitionState, SafetyRules
from tests.support.cli import fatal_lines, run_cli

WINDOW = range(1, 51)
"""The seeds ``make test`` runs (``make sim`` runs 2,000)."""


def test_the_same_seed_gives_the_same_trace_twice() -> None:
    first = [run_seed(seed) for seed in (3, 4)]
    again = [run_seed(seed) for seed in (3, 4)]
    assert [r.trace_hash for r in first] == [r.trace_hash for r in again]
    assert first[0].trace_hash != first[1].trace_hash
    assert all(r.events > 500 and r.requests > 500 for r in first)
    # The data path ran: leaders applied chunks, the collector deleted.
    assert all(r.chunks_applied > 100 and r.l0_deleted > 50 for r in first)


def test_a_fixed_window_of_seeds_passes_every_invariant() -> None:
    results = list(run_seeds(WINDOW, workers=2))
    assert [r.seed for r in results] == list(WINDOW)
    failed = ["\n".join(report_lines(r)) for r in results if not r.ok]
    assert not failed, "\n".join(failed)


def test_a_broken_guard_is_caught_replayable_and_shrunk(monkeypatch: pytest.MonkeyPatch) -> None:
    """A holder that keeps acting a skew margin past its TTL (the grant's
    deadline computed with + instead of -) is a second owner of a
    partition (in some seeds first a second ticker, since the role leases
    share the rule: the first seed caught as a second owner is shrunk)."""

    def too_long(self: LeasePolicy, sent: float) -> float:
        return sent + self.ttl_seconds + self.skew_margin_seconds

    monkeypatch.setattr(LeasePolicy, "valid_until", too_long)
    runs = list(map(run_seed, range(1, 11)))
    assert {r.invariant for r in runs if not r.ok} <= {"two owners", "ticks too close"}
    caught = next(r for r in runs if r.invariant == "two owners")
    seed, invariant = caught.seed, "two owners"
    assert run_seed(seed).trace_hash == caught.trace_hash
    shrunk = shrink(caught)
    assert 0 < len(shrunk) < len(caught.faults)
    assert run_seed(seed, faults=shrunk).invariant == invariant
    lines = report_lines(caught, shrunk)
    assert lines[0].startswith(f"seed {seed}: VIOLATION {invariant}: ")
    assert f"  replay: epochgc simulate --seed {seed}" in lines
    assert any(line.startswith("  shrunk fault schedule (") for line in lines)
    shown = len(caught.tail)
    assert shown == min(50, caught.events)
    assert lines[3 : 3 + shown] == [f"    {line}" for line in caught.tail]


RACE = [
    Fault("topic_race", 10.0, 20.0, "topic-racer-1", pick=0.9, count=3),
    Fault("late_landing", 10.0, 20.0, "topic-racer-1", late_by=2.0, writes_only=True),
]
"""One operator deletes ``clicks`` while another deletes and recreates it;
the first one's writes land 2 s late, so its delete, naming the revision
it read, lands after the recreate."""


def test_a_delete_landing_after_a_recreate_ends_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    """With the product's fold the run passes; with a fold that ends a
    topic by name alone, the late delete ends the new incarnation, and the
    topic ghost says so at once."""
    assert run_seed(1, seconds=100.0, faults=RACE).ok

    def by_name(view: ControllerView, entry: DeleteTopic) -> bool:
        return entry.topic in view.topics

    monkeypatch.setattr(controller, "_ends_live_incarnation", by_name)
    caught = run_seed(1, seconds=100.0, faults=RACE)
    assert caught.invariant == "incarnation ended without a delete naming it"
    assert "clicks@" in (caught.violation or "")
    assert caught.violated_at is not None and 10.0 < caught.violated_at < 30.0


FEW_SEEDS = range(1, 7)
"""Seeds a targeted fault runs in, each alone, with and without a guard."""

STALL = [Fault("producer_stall", 30.0, 40.0)]
"""The producer stops for 40 s between an L0 upload and its placeholders:
the partitions' windows move on meanwhile and ``M`` passes the object's
epoch."""


def test_placeholders_that_outlived_their_window_are_refused_where_they_land(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """With the product's apply-time check the stalled placeholders are
    refused; without it they are acknowledged for an object the collector
    has deleted, or may delete, since no record named it (over a few seeds:
    whether the collector gets there first depends on the schedule)."""
    assert all(run_seed(seed, seconds=100.0, faults=STALL).ok for seed in FEW_SEEDS)
    unchecked_rules = dataclasses.replace(SAFE, apply_time_check=False)
    apply_in_term = partition_state._apply_in_term

    def unchecked(
        state: PartitionState, command: SequencedCommand, offset: int, _rules: SafetyRules
    ) -> ApplyResult:
        return apply_in_term(state, command, offset, unchecked_rules)

    monkeypatch.setattr(partition_state, "_apply_in_term", unchecked)
    runs = [run_seed(seed, seconds=100.0, faults=STALL) for seed in FEW_SEEDS]
    caught = [r for r in runs if not r.ok]
    assert len(caught) >= len(FEW_SEEDS) // 2, [r.invariant for r in runs]
    for run in caught:
        assert run.invariant in ("deleted too soon", "record lost")
        # Only once the stall is over do its placeholders land.
        assert run.violated_at is not None and run.violated_at >= 70.0


STALLED_TICK = [Fault("stalled_tick", 30.0, 20.0)]
"""The node holding the ticker role stops for 20 s between reading the
controller log's tail and writing its tick; its role runs out and a peer
ticks meanwhile."""


def test_a_tick_that_lost_its_slot_after_a_stop_is_not_retried(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """With the product's check before every attempt the woken holder
    writes nothing; appending without it, the retry lands a second tick
    right after the new holder's (in the seeds where a peer took the role
    and ticked while the holder was stopped)."""
    assert all(run_seed(seed, seconds=100.0, faults=STALLED_TICK).ok for seed in FEW_SEEDS)
    append = ConditionalAppendLog.append

    def unchecked(self: ConditionalAppendLog, payload: bytes, *, before_each: object = None) -> int:
        return append(self, payload)

    monkeypatch.setattr(ConditionalAppendLog, "append", unchecked)
    runs = [run_seed(seed, seconds=100.0, faults=STALLED_TICK) for seed in FEW_SEEDS]
    caught = [r for r in runs if not r.ok]
    assert len(caught) >= 2, [r.invariant for r in runs]
    for run in caught:
        assert run.invariant == "ticks too close"
        # The stop ends 50 s in; the retry follows the lost slot at once.
        assert run.violated_at is not None and 50.0 <= run.violated_at < 55.0


HUNG_ROUNDS = [Fault("hung_loop", 40.0, 0.0, "node-1", pick=0.1)]
"""node-1's rounds loop hangs for good 40 s in; its lease heartbeat goes on."""


def test_a_node_whose_rounds_loop_hangs_lets_go_and_its_partitions_move(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The node's watchdog judges the hung loop, the node lets go and exits,
    its peers lead its partitions and ``M`` moves on; with a watchdog that
    never finds a loop overdue the heartbeat keeps the partitions on a node
    that leads none of them, and ``M`` stops where the hang began."""
    assert run_seed(1, seconds=200.0, faults=HUNG_ROUNDS).ok
    monkeypatch.setattr(ProgressWatchdog, "_overdue", lambda _self, _now: None)
    caught = run_seed(1, seconds=200.0, faults=HUNG_ROUNDS)
    assert caught.invariant == "M stalled"


LOSSY_RESTART = [
    Fault("restart", 40.0, 5.0, "node-1"),
    Fault("lost_answers", 39.0, 20.0, rate=0.9, retried=1.0, prefix=owners_prefix(ROOT)),
]
"""node-1 stops cleanly 40 s in and starts again 5 s later, while nine in
ten writes of ownership records land unanswered and their retries answer
412: its peers take its partitions, and it is back before their next
round."""


def test_a_take_answered_412_after_it_landed_is_the_takers_own(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """With the product's re-read a taker whose take landed unanswered
    knows the partition is its own and hands it back to the restarted
    node; counting such a take as lost leaves the record naming the taker,
    which no longer reads it (the partition left its share): orphaned."""
    assert all(run_seed(seed, seconds=100.0, faults=LOSSY_RESTART).ok for seed in FEW_SEEDS)

    def forgetful(
        store: ObjectStore,
        key: str,
        body: bytes,
        etag: str | None,
        *,
        unanswered: Collection[bytes] = (),
    ) -> str | None:
        try:
            if etag is None:
                return store.put_if_absent(key, body)
            return store.put_if_match(key, body, etag)
        except (PreconditionFailedError, NotFoundError):
            stored = get_or_none(store, key)
            if stored is not None and stored.body in unanswered:
                return forgetful(store, key, body, stored.etag)
            return None  # a landed write of ours counted as someone else's

    monkeypatch.setattr(owner_records, "put_conditionally", forgetful)
    runs = [run_seed(seed, seconds=100.0, faults=LOSSY_RESTART) for seed in FEW_SEEDS]
    caught = [r for r in runs if not r.ok]
    assert len(caught) >= len(FEW_SEEDS) // 2, [r.invariant for r in runs]
    assert {r.invariant for r in caught} == {"orphaned"}


def test_a_seed_may_run_two_collectors_and_both_delete(monkeypatch: pytest.MonkeyPatch) -> None:
    """About half the seeds run a second collector beside the first; both
    run rounds and delete, each judged on its own record."""
    counts = [scenario_of(seed).collectors for seed in WINDOW]
    assert set(counts) == {1, 2}
    seed = next(s for s, n in zip(WINDOW, counts, strict=True) if n == 2)
    deleting: set[str] = set()
    add = seeds.Trace.add

    def noting(trace: seeds.Trace, line: str) -> None:
        name, _, rest = line.partition(": run ")
        if rest and "deleted 0," not in rest:
            deleting.add(name)
        add(trace, line)

    monkeypatch.setattr(seeds.Trace, "add", noting)
    assert run_seed(seed, seconds=150.0).ok
    assert deleting == {"collector", "collector-2"}


def test_the_command_prints_the_trace_hash_and_refuses_a_bad_range() -> None:
    done = run_cli("simulate", "--seed", "5")
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[0].startswith("seed 5: OK (trace ")
    assert done.stdout.splitlines()[-1].startswith("simulate: seed 5: ")
    assert run_seed(5).trace_hash in done.stdout
    bad = run_cli("simulate", "--seeds", "9-3")
    assert bad.returncode == 2
    assert "not a seed range: '9-3'" in bad.stderr
    assert "Traceback" not in bad.stderr


def test_many_seeds_end_with_the_summary_line() -> None:
    done = run_cli("simulate", "--seeds", "1-2", "--workers", "2")
    assert done.returncode == 0, done.stderr
    last = done.stdout.splitlines()[-1]
    assert last.startswith("simulate: 2 seeds, 0 violations, ")
    assert last.endswith(" seeds/hour")
    assert not fatal_lines(done)


def test_the_unsafe_test_build_is_caught_within_20_seeds() -> None:
    """Nodes publishing ``M(p) = max_applied_epoch - 1`` let the collector
    delete an L0 object whose records are not in L1 yet."""
    unsafe = (run_seed(seed, unsafe=True) for seed in range(1, 21))
    caught = next((r for r in unsafe if not r.ok), None)
    assert caught is not None, "the unsafe rule survived 20 seeds"
    assert caught.invariant == "deleted too soon"
    assert caught.violated_at is not None and caught.violated_at < caught.planned_end
    replay = f"  replay: epochgc simulate --seed {caught.seed} --unsafe-test-build"
    assert replay in report_lines(caught)
    assert run_seed(caught.seed).ok  # the shipped rule, same seed: nothing lost
    done = run_cli(
        "simulate",
        "--seeds",
        f"{caught.seed}-{caught.seed}",
        "--unsafe-test-build",
        "--workers",
        "1",
    )
    assert done.returncode == 1, done.stderr
    assert f"seed {caught.seed}: VIOLATION deleted too soon: " in done.stdout
    assert done.stdout.splitlines()[-1].startswith("simulate: 1 seeds, 1 violations, ")
    assert not fatal_lines(done)
