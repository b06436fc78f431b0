"""Mutation check of the guards the simulation covers: each mutant is a
one-line change that removes or weakens one safety or liveness guard;
``epochgc simulate`` must break an invariant within the first 200 seeds
with the mutant in place (and with none, ``make test`` shows it passes).

Not listed: guards the simulation cannot reach by design, each covered by
a test instead (a record someone else rewrote is dropped:
``test_a_record_taken_from_under_us_is_dropped``; a leader whose put
lost its slot to another writer stops,
which only an ownership already broken can bring about, and which
``test_stale_leaders_pipelined_appends_after_new_term_start_change_nothing``
and two more tests of ``tests/integration/test_leases_and_leaders.py``
catch; a report entry counts only for the incarnation it was measured on,
which 200 seeds of topic races did not reach, since a node drops a deleted
incarnation within a leading step of reading the view and its reports
move on, and which ``test_entries_of_another_incarnation_of_a_live_name_are_ignored``
catches), and
one it finds redundant: an ownership write is not sent once the lease ran
out, which ``owned()`` (empty without a valid lease) and a new incarnation
after a late renewal already make harmless in every seed tried.

Run: ``python -m tests.mutation.mutants`` (all; ``make mutants``) or name
some. Each mutant is applied to the working tree, the seeds run in fresh
processes (which import the mutated file), and the file is restored
whatever happens. Refuses to start on a tree whose mutated files have
uncommitted changes (a restore must not lose work).

Prints one row per mutant (the first failing seed and the invariant) and
ends with ``mutants: K of N killed within S seeds``; exits 1 when any
survived.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from epochgc.wiring.interrupts import sigterm_as_interrupt

REPO = Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class Mutant:
    name: str
    path: str
    old: str
    new: str
    guard: str


MUTANTS = (
    Mutant(
        "own-write-bound-from-send",
        "epochgc/leases/node_lease.py",
        "return written.answered",
        "return written.sent",
        "the bound of our own write is its answer time, not its send time (issue's mutant 1)",
    ),
    Mutant(
        "stamps-latch-dropped",
        "epochgc/ownership/cluster_view.py",
        "self._stamps_inconsistent = True",
        "self._stamps_inconsistent = False",
        "stamps found inconsistent are never used again (issue's mutant 2)",
    ),
    Mutant(
        "grant-without-skew-margin",
        "epochgc/leases/timing.py",
        "return sent + self.ttl_seconds - self.skew_margin_seconds",
        "return sent + self.ttl_seconds + self.skew_margin_seconds",
        "a holder stops a skew margin before a TTL from its send",
    ),
    Mutant(
        "stamp-bound-without-resolution",
        "epochgc/leases/timing.py",
        "return own_answered + lag + STAMP_RESOLUTION_SECONDS",
        "return own_answered + lag - STAMP_RESOLUTION_SECONDS",
        "a stamp-derived bound allows for the stamps' one-second resolution",
    ),
    Mutant(
        "judged-dead-early",
        "epochgc/leases/timing.py",
        "return unchanged is None or unchanged >= self._ttl",
        "return unchanged is None or unchanged >= self._ttl - 3.0",
        "a peer is dead only after its lease is unchanged for a whole TTL",
    ),
    Mutant(
        "lease-taken-early",
        "epochgc/leases/core.py",
        "if unchanged_for is not None and unchanged_for >= ttl_seconds:",
        "if unchanged_for is not None and unchanged_for >= ttl_seconds / 2:",
        "a lease object is taken over only after a whole TTL unchanged",
    ),
    Mutant(
        "late-renewal-counted",
        "epochgc/leases/node_lease.py",
        "if outcome.answered >= grant.valid_until:",
        "if False:",
        "a renewal answered after its grant ended re-acquires (defect B's fix)",
    ),
    Mutant(
        "raise-term-failure-forgotten",
        "epochgc/ownership/node_ownership.py",
        "            self._unsettle(pid)\n            raise",
        "            raise",
        "a term raise that failed reads the record again (defect A's fix)",
    ),
    Mutant(
        "balance-on-bad-stamps",
        "epochgc/ownership/cluster_view.py",
        "if mine is None or self._stamps_inconsistent:",
        "if mine is None:",
        "balance stops reading stamps found inconsistent",
    ),
    Mutant(
        "validity-ignored",
        "epochgc/leases/node_lease.py",
        "grant is not None and self._lease.is_valid(grant.valid_until) and self._gate() is None",
        "grant is not None and self._gate() is None",
        "a node owns nothing once its grant ran out on its own clock",
    ),
    Mutant(
        "incarnation-not-checked",
        "epochgc/ownership/node_ownership.py",
        "        if not self._lease.is_valid() or self._lease.incarnation != self._incarnation:\n"
        "            return frozenset()",
        "        if not self._lease.is_valid():\n            return frozenset()",
        "a new incarnation owns nothing of the old one's until a round took it",
    ),
    Mutant(
        "own-record-not-adopted",
        "epochgc/ownership/node_ownership.py",
        "if is_owned_by(record, me, incarnation) and pid not in self._mine:",
        "if False:",
        "a record naming us (a write whose answer was lost) is adopted",
    ),
    Mutant(
        "contradiction-check-off",
        "epochgc/leases/timing.py",
        "return written < previous_seen_at - STAMP_TOLERANCE_SECONDS",
        "return written < previous_seen_at - 600.0",
        "stamps that put a write before a listing that did not show it are refused",
    ),
    Mutant(
        "gap-rule-off",
        "epochgc/leases/timing.py",
        "return listing_started - previous_started <= STAMP_GAP_SHARE * ttl_seconds",
        "return True",
        "stamps are read only against a listing at most half a TTL older",
    ),
    Mutant(
        "lost-answer-not-ours",
        "epochgc/storage/conditional_put.py",
        "        if stored.body == body:\n            return stored.etag",
        "        if False:\n            return stored.etag",
        "a conditional write that landed unanswered counts when the bytes are ours",
    ),
    Mutant(
        "apply-time-check-off",
        "epochgc/watermarks/partition/state.py",
        "if rules.apply_time_check and command.epoch < state.previous_applied_epoch:",
        "if False:",
        "window: a placeholder below the applied window is rejected at apply time",
    ),
    Mutant(
        "window-gate-off",
        "epochgc/watermarks/partition/state.py",
        "gate_open = state.window_offset <= reconciled or not rules.window_offset_gate",
        "gate_open = True",
        "window: the lower bound moves only once every placeholder up to "
        "window_offset is reconciled",
    ),
    Mutant(
        "lower-bound-from-max",
        "epochgc/watermarks/partition/state.py",
        "            if rules.lower_bound_from_previous\n",
        "            if False\n",
        "window: the new lower bound is previous_applied_epoch, not max_applied_epoch",
    ),
    Mutant(
        "unreported-counted-at-snapshot",
        "epochgc/watermarks/safe_epoch/aggregate.py",
        "topic.name, pid.partition, topic.revision - 1, None, topic.revision",
        "topic.name, pid.partition, view.offset, None, topic.revision",
        "report join: a partition nobody reports counts as revision - 1",
    ),
    Mutant(
        "eligible-one-above-m",
        "epochgc/gc/eligibility.py",
        "if parsed.epoch > safe_epoch:",
        "if parsed.epoch > safe_epoch + 1:",
        "collector: only objects at or below M are eligible",
    ),
    Mutant(
        "l1-not-written",
        "epochgc/reconciler/reconcile.py",
        "        self._store.put(key, body)\n",
        "        pass\n",
        "reconciler: records reach L1 before advance_reconciled counts them",
    ),
    Mutant(
        "pause-read-once-per-pass",
        "epochgc/gc/pause.py",
        "    def delete_batch(self, keys: list[str]) -> DeleteOutcome:\n"
        "        self._guard.check(self._job)\n",
        "    def delete_batch(self, keys: list[str]) -> DeleteOutcome:\n",
        "the collector asks the pause before every DeleteObjects, not only before its pass",
    ),
    Mutant(
        "record-whole-batch",
        "epochgc/gc/sweeper.py",
        "deleted = tuple(info for info in batch if info.key in confirmed)",
        "deleted = tuple(batch)",
        "the deletion record lists the keys DeleteObjects confirmed, not the batch sent "
        "(issue's mutant 3)",
    ),
    Mutant(
        "ticker-ticks-on-taking",
        "epochgc/watermarks/ticker.py",
        "since = held_since if last_tick_at is None else max(held_since, last_tick_at)",
        "since = held_since - self.interval_seconds if last_tick_at is None "
        "else max(held_since, last_tick_at)",
        "a new holder of the ticker role waits an interval before its first tick",
    ),
    Mutant(
        "tick-retried-unchecked",
        "epochgc/storage/cas_log.py",
        "            if before_each is not None:\n                before_each()\n",
        "",
        "a ticker re-checks its grant before retrying a tick whose slot it lost "
        "(the defect seed 41 found)",
    ),
    Mutant(
        "delete-ends-by-name",
        "epochgc/watermarks/controller.py",
        "return live is not None and entry.revision in (None, live.revision)",
        "return live is not None",
        "a delete_topic entry ends only the incarnation it names (the recreate race)",
    ),
    Mutant(
        "delete-names-no-revision",
        "epochgc/watermarks/controller.py",
        "entry = DeleteTopic(name, self._now(), target, self._nonce())",
        "entry = DeleteTopic(name, self._now(), None, self._nonce())",
        "topic delete writes the revision it read into its entry",
    ),
    Mutant(
        "janitor-without-liveness",
        "epochgc/gc/janitor.py",
        "if revision <= view.offset and not live:",
        "if revision <= view.offset:",
        "the janitor removes only incarnations its view holds deleted",
    ),
    Mutant(
        "watchdog-never-overdue",
        "epochgc/reconciler/watchdog.py",
        "if late > 0 and (worst is None or late > worst[0]):",
        "if False:",
        "watchdog: a loop that completes no round within its bound stops the node "
        "(its renewal gate closes, it lets go)",
    ),
    Mutant(
        "report-carries-nothing",
        "epochgc/watermarks/safe_epoch/reports.py",
        "        if not set(self._reported) - set(led):\n            return {}\n",
        "        return {}\n",
        "reports: a node carries the entries of partitions it no longer leads until a "
        "newer leader's report covers them (M never falls back)",
    ),
    Mutant(
        "report-without-lease",
        "epochgc/watermarks/safe_epoch/reports.py",
        "        if incarnation is None:\n            return None\n",
        "",
        "reports: a process without a valid node lease publishes no report (another "
        "process of its node id may hold the lease and know more)",
    ),
    Mutant(
        "report-memory-kept-across-incarnations",
        "epochgc/watermarks/safe_epoch/reports.py",
        "        if incarnation != self._incarnation:\n",
        "        if False:\n",
        "reports: a new incarnation starts from the node's stored report, not from what "
        "this process remembers",
    ),
)


def seed_range(text: str) -> tuple[int, int]:
    first, _, last = text.partition("-")
    return int(first), int(last or first)


def run_mutant(mutant: Mutant, seeds: tuple[int, int], workers: int | None) -> tuple[str, str]:
    """The first failing seed and its invariant line, or two empty strings."""
    path = REPO / mutant.path
    original = path.read_text()
    if original.count(mutant.old) != 1:
        raise SystemExit(f"mutant {mutant.name}: its line is not found once in {mutant.path}")
    path.write_text(original.replace(mutant.old, mutant.new))
    try:
        code = (
            "import sys\n"
            "from epochgc.simulate.seeds import run_seeds\n"
            f"for r in run_seeds(range({seeds[0]}, {seeds[1] + 1}), workers={workers!r}):\n"
            "    if not r.ok:\n"
            "        print(r.seed, r.violation, sep='\\t'); break\n"
        )
        done = subprocess.run(
            [sys.executable, "-c", code],
            cwd=REPO,
            capture_output=True,
            text=True,
            check=False,
            timeout=3600,
        )
    finally:
        path.write_text(original)
    if done.returncode != 0:
        return "error", done.stderr.strip().splitlines()[-1] if done.stderr.strip() else "?"
    line = done.stdout.strip()
    if not line:
        return "", ""
    seed, violation = line.split("\t", 1)
    return seed, violation


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("names", nargs="*", help="mutants to run (default: all)")
    parser.add_argument("--seeds", default="1-200", help="seed range (default 1-200)")
    parser.add_argument("--workers", type=int, help="processes (default: one per core)")
    args = parser.parse_args()
    chosen = [m for m in MUTANTS if not args.names or m.name in args.names]
    dirty = subprocess.run(
        ["git", "status", "--porcelain", "--", *{m.path for m in chosen}],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    if dirty:
        print(f"mutants: commit or stash these first:\n{dirty}", file=sys.stderr)
        return 2
    seeds = seed_range(args.seeds)
    killed = 0
    print(f"{'mutant':32} {'seed':>5}  invariant")
    # SIGTERM (a CI timeout, pkill) unwinds like Ctrl-C: the mutated file
    # is restored by run_mutant's finally, never left in the tree.
    with sigterm_as_interrupt():
        for mutant in chosen:
            seed, violation = run_mutant(mutant, seeds, args.workers)
            killed += bool(seed) and seed != "error"
            shown = violation.split(":", 1)[0] if seed and seed != "error" else violation
            print(f"{mutant.name:32} {seed or 'LIVED':>5}  {shown or '-'}", flush=True)
    print(f"mutants: {killed} of {len(chosen)} killed within seeds {args.seeds}")
    return 0 if killed == len(chosen) else 1


if __name__ == "__main__":
    sys.exit(main())
