"""Check the SPIN models: each run is spin -> gcc -> pan in a folder of its
own, so nothing generated lands in the repository.

``SCOPES["test"]`` is what ``make test`` runs (tests/model/), sized to stay
near a minute and a half on two cores; ``SCOPES["large"]`` is ``make
model``. A baseline run must end with ``errors: 0`` after a complete
search (an exhaustive one that hits the memory bound fails); a weakened
run (``expect_error``) must end with an error and a trail, which
render_trail.py turns into the named steps. A bitstate run (``bitstate``)
is a partial search, stopped at its time budget: its line says so, with
pan's hash factor.

Usage::

    python model/check.py large          # every run of a scope, in turn
    python model/check.py test --jobs 2
"""

from __future__ import annotations

import argparse
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import render_trail

HERE = Path(__file__).resolve().parent
MEMORY_MB = 2000
"""pan's memory bound per run (two run at a time on this machine)."""
LOG_MODEL = HERE / "log_protocol.pml"
LEASE_MODEL = HERE / "lease_ownership.pml"


@dataclass(frozen=True)
class Run:
    """One model check: which model, which -D switches, what must come out."""

    name: str
    model: Path
    defines: tuple[str, ...] = ()
    liveness: bool = False
    """Check an LTL formula of the model with weak fairness (pan -a -f)."""
    ltl: str = ""
    """Which formula (pan -N), when the model has more than one."""
    expect_error: bool = False
    """A weakened model: pan must find a counterexample."""
    reverse: bool = False
    """Search processes in reverse order (finds some counterexamples sooner)."""
    optimize: str = "-O2"
    """The C compiler's optimisation: ``-O2`` for searches of millions of
    states; ``-O0`` compiles in a fifth of the time, which is all a
    counterexample found within a few hundred thousand states costs."""
    bitstate: int = 0
    """``-w`` of a bitstate search (SPIN's hash of 2**w bits instead of a
    stored state space): 0 is an exhaustive search. A bitstate search may
    miss states (its hash factor says how likely); its report says so."""
    budget_seconds: float = 0.0
    """With ``bitstate``: pan is interrupted after this many seconds and
    reports what it explored (0: it runs to the end)."""
    timeout_seconds: float = 600.0


@dataclass
class Result:
    run: Run
    errors: int
    states: int
    seconds: float
    output: str
    trail: Path | None = None
    steps: list[str] = field(default_factory=list)

    @property
    def completed(self) -> bool:
        """pan searched everything it meant to (not stopped by its memory
        bound or the time budget; a search also stops at its first error)."""
        return "Search not completed" not in self.output

    @property
    def ok(self) -> bool:
        if self.run.expect_error:
            return self.errors > 0 and self.trail is not None and bool(self.steps)
        # an exhaustive search that ran out of memory proves nothing
        return self.errors == 0 and (self.completed or bool(self.run.bitstate))

    @property
    def hash_factor(self) -> str:
        """pan's hash factor of a bitstate search (empty for an exhaustive
        one): above 100 few states were missed, below 10 many may have been."""
        found = _HASH_FACTOR.search(self.output)
        return found.group(1) if found else ""

    def line(self) -> str:
        verdict = "counterexample" if self.errors else "0 errors"
        search = ""
        if self.run.bitstate:
            budget = f", stopped at its {self.run.budget_seconds:.0f} s budget"
            stopped = "" if self.completed else budget
            search = (
                f" (bitstate, partial: -w{self.run.bitstate}, "
                f"hash factor {self.hash_factor}{stopped})"
            )
        elif not self.completed and not self.errors:
            search = " (search NOT completed)"
        return (
            f"{self.run.name}: {verdict}, {self.states:,} states explored{search}, "
            f"{self.seconds:.1f} s{'' if self.ok else '  <-- NOT AS EXPECTED'}"
        )


def _log(name: str, *defines: str, **kw: Any) -> Run:
    return Run(name, LOG_MODEL, defines, **kw)


def _lease(name: str, *defines: str, **kw: Any) -> Run:
    return Run(name, LEASE_MODEL, defines, **kw)


SMALL = ("EMAX=4", "NOBJ=1", "COMPACTION=0", "PAUSE=0")
"""make test's log scope: 2 nodes, 1 topic of 2 partitions and a recreate,
epochs up to 4, 2 operators, 1 collector, one crash, one lost answer."""

SKIP = (
    "EMAX=3",
    "NOBJ=4",
    "COMPACTION=0",
    "PAUSE=0",
    "CRASHES=0",
    "LOST_ANSWERS=0",
    "OPERATORS=1",
    "RECORDS_LOST=1",
)
"""records_lost: an accepted L0 object goes missing before it is in L1 and
an operator skips it, with three more objects behind it (two window slides
after the one that follows it, so a loss that covered too much shows)."""

SNAPSHOT = (
    "EMAX=4",
    "NOBJ=1",
    "COMPACTION=0",
    "PAUSE=0",
    "LOST_ANSWERS=0",
    "OPERATORS=1",
    "SNAPSHOTS=1",
)
"""Partition-log snapshots and truncation by the leader, with node 0's crash
and node 1's takeover: node 0's late put may land in a freed slot."""

THREE_NODES_TWO_TOPICS = ("NNODE=3", "NTOPIC=2")
"""make model's larger scope: a second topic that idles, a third node."""

SCOPES: dict[str, tuple[Run, ...]] = {
    "test": (
        _log("log: safety, crash and lost answer", *SMALL),
        _log(
            "log: safety, two objects",
            "EMAX=4",
            "NOBJ=2",
            "COMPACTION=0",
            "PAUSE=0",
            "CRASHES=0",
            "LOST_ANSWERS=0",
        ),
        _log("log: liveness", *SMALL, "CRASHES=0", liveness=True),
        _log("log: safety, records_lost", *SKIP),
        _log("log: safety, partition snapshots, crash", *SNAPSHOT),
        _lease("lease: safety"),
        _lease("lease: liveness, no orphan", liveness=True, ltl="no_orphan"),
        _lease("lease: liveness, eventually owned", liveness=True, ltl="eventually_owned"),
        _log(
            "weakened: delete without revision",
            *SMALL,
            "WEAKEN_DELETE_NO_REVISION",
            expect_error=True,
            optimize="-O0",
        ),
        _log(
            "weakened: M(p) from max_applied",
            "EMAX=4",
            "NOBJ=2",
            "CRASHES=0",
            "LOST_ANSWERS=0",
            "COMPACTION=0",
            "PAUSE=0",
            "WEAKEN_M_FROM_MAX",
            expect_error=True,
            optimize="-O0",
        ),
        _log(
            "weakened: no window-offset gate",
            "EMAX=4",
            "NOBJ=3",
            "CRASHES=0",
            "LOST_ANSWERS=0",
            "COMPACTION=0",
            "PAUSE=0",
            "WEAKEN_NO_WINDOW_GATE",
            expect_error=True,
            optimize="-O1",
        ),
        _log(
            "weakened: join counts another incarnation",
            "EMAX=5",
            "NOBJ=1",
            "CRASHES=0",
            "LOST_ANSWERS=0",
            "COMPACTION=0",
            "PAUSE=0",
            "OPERATORS=1",
            "LAGGING_NODES=1",
            "WEAKEN_JOIN_ANY_INCARNATION",
            expect_error=True,
            optimize="-O1",
        ),
        _log(
            "weakened: janitor without liveness check",
            *SMALL,
            "WEAKEN_JANITOR_NO_LIVENESS",
            expect_error=True,
            optimize="-O0",
        ),
        _log(
            "weakened: pause read once before the sweep",
            "EMAX=4",
            "NOBJ=1",
            "CRASHES=0",
            "LOST_ANSWERS=0",
            "COMPACTION=0",
            "WEAKEN_PAUSE_ONCE",
            expect_error=True,
            optimize="-O0",
            reverse=True,
        ),
        _log(
            "weakened: records_lost's log_offset at the log end",
            *SKIP,
            "WEAKEN_SKIP_LOG_END",
            expect_error=True,
            optimize="-O1",
        ),
        _log(
            "weakened: a put into a freed slot acknowledged",
            *SNAPSHOT,
            "WEAKEN_NO_SNAPSHOT_CHECK",
            expect_error=True,
            optimize="-O0",
        ),
        _lease(
            "weakened: late renewal counted from its send time",
            "WEAKEN_LATE_RENEWAL",
            expect_error=True,
            optimize="-O0",
        ),
        _lease(
            "weakened: no skew margin (gateways' stamps disagree)",
            "MARGIN=0",
            expect_error=True,
            optimize="-O0",
        ),
        _lease(
            "weakened: term raise's lost answer dropped",
            "WEAKEN_RAISE_LOST",
            liveness=True,
            ltl="no_orphan",
            expect_error=True,
            optimize="-O0",
        ),
        _lease(
            "weakened: hand-back's lost answer dropped",
            "WEAKEN_HANDBACK_LOST",
            liveness=True,
            ltl="eventually_owned",
            expect_error=True,
            optimize="-O0",
        ),
        _lease(
            "weakened: no takeover of an expired lease",
            "WEAKEN_NO_EXPIRED_TAKEOVER",
            liveness=True,
            ltl="eventually_owned",
            expect_error=True,
            optimize="-O0",
        ),
        _lease(
            "weakened: a leaving node leads until its lease is released",
            "WEAKEN_LEAVE_LEADS_ON",
            expect_error=True,
            optimize="-O0",
        ),
    ),
    "large": (
        _log(
            "log: safety, two objects, crash and lost answer",
            "EMAX=4",
            "NOBJ=2",
            "COMPACTION=0",
            "PAUSE=0",
        ),
        _log(
            "log: safety, compaction and pause", "EMAX=4", "NOBJ=1", "CRASHES=0", "LOST_ANSWERS=0"
        ),
        _log(
            "log: safety, epochs up to 5",
            "EMAX=5",
            "NOBJ=1",
            "COMPACTION=0",
            "PAUSE=0",
            "CRASHES=0",
            "LOST_ANSWERS=0",
        ),
        _log(
            "log: liveness, crash and lost answer",
            "EMAX=4",
            "NOBJ=1",
            "COMPACTION=0",
            "PAUSE=0",
            liveness=True,
        ),
        _log(
            "log: safety, records_lost, crash and lost answer",
            "EMAX=4",
            "NOBJ=1",
            "COMPACTION=0",
            "PAUSE=0",
            "RECORDS_LOST=1",
        ),
        _log(
            "log: safety, partition snapshots, crash and lost answer",
            "EMAX=4",
            "NOBJ=1",
            "COMPACTION=0",
            "PAUSE=0",
            "OPERATORS=1",
            "SNAPSHOTS=1",
        ),
        _log(
            "log: safety, 3 nodes, 2 topics, epochs up to 4",
            *THREE_NODES_TWO_TOPICS,
            "EMAX=4",
            "NOBJ=1",
            "COMPACTION=0",
            "PAUSE=0",
            "CRASHES=0",
            "LOST_ANSWERS=0",
        ),
        _log(
            "log: safety, 3 nodes, 2 topics, epochs up to 3, crash and lost answer",
            *THREE_NODES_TWO_TOPICS,
            "EMAX=3",
            "NOBJ=1",
            "COMPACTION=0",
            "PAUSE=0",
        ),
        _log(
            "log: safety, 3 nodes, 2 topics, epochs up to 6, two objects, every fault",
            *THREE_NODES_TWO_TOPICS,
            "EMAX=6",
            "NOBJ=2",
            bitstate=33,
            budget_seconds=480,
        ),
        _lease("lease: safety, two lost answers, TTL 6", "LOST=2", "TTL=6"),
        _lease(
            "lease: liveness, no orphan, two lost answers, TTL 6",
            "LOST=2",
            "TTL=6",
            liveness=True,
            ltl="no_orphan",
        ),
        _lease(
            "lease: liveness, eventually owned, two lost answers, TTL 6",
            "LOST=2",
            "TTL=6",
            liveness=True,
            ltl="eventually_owned",
        ),
    ),
}

_ERRORS = re.compile(r"errors: (\d+)")
_STATES = re.compile(r"([0-9.e+]+) states, stored")
"""pan writes counts of 10**8 and more as 1.78e+08."""
_HASH_FACTOR = re.compile(r"hash factor: ([0-9.e+]+)")


class CheckError(Exception):
    """A run could not be carried out (not a verdict on the model)."""


def _tool(name: str) -> str:
    path = shutil.which(name)
    if path is None:
        raise CheckError(f"{name} is not installed (scripts/install_spin.sh installs spin)")
    return path


def check(run: Run, folder: Path) -> Result:
    """Generate, compile and run the verifier of ``run`` in ``folder``."""
    folder.mkdir(parents=True, exist_ok=True)
    model = folder / run.model.name
    shutil.copyfile(run.model, model)
    defines = [f"-D{d}" for d in run.defines] + (["-DLIVENESS"] if run.liveness else [])
    start = time.monotonic()
    _call([_tool("spin"), *defines, "-a", model.name], folder, run)
    flags = [run.optimize, "-DBITSTATE" if run.bitstate else "-DCOLLAPSE"]
    flags += ["-DNFAIR=3"] if run.liveness else ["-DSAFETY"]
    flags += ["-DREVERSE"] if run.reverse else []
    flags += [f"-DMEMLIM={MEMORY_MB}"]
    _call([_tool("gcc"), *flags, "-w", "-o", "pan", "pan.c"], folder, run)
    pan = ["./pan", "-m200000", "-c1"] + (["-a", "-f"] if run.liveness else [])
    pan += ["-N", run.ltl] if run.ltl else []
    pan += [f"-w{run.bitstate}"] if run.bitstate else []
    output = _call(pan, folder, run)
    seconds = time.monotonic() - start
    errors = _number(_ERRORS, output, run)
    states = _number(_STATES, output, run)
    trails = sorted(folder.glob("*.trail"))
    result = Result(run, errors, states, seconds, output, trails[0] if trails else None)
    if result.trail is not None:
        result.steps = _render(run, model, result.trail)
    return result


def _render(run: Run, model: Path, trail: Path) -> list[str]:
    defines = list(run.defines) + (["LIVENESS"] if run.liveness else [])
    return render_trail.steps(render_trail.replay(model, trail, defines))


def _call(command: list[str], folder: Path, run: Run) -> str:
    if run.budget_seconds and command[0].endswith("pan"):
        return _budgeted(command, folder, run.budget_seconds)
    # the commands are spin, gcc and pan, found by which(): no user input
    done = subprocess.run(  # noqa: S603
        command,
        cwd=folder,
        capture_output=True,
        text=True,
        timeout=run.timeout_seconds,
        check=False,
    )
    if done.returncode != 0 and not command[0].endswith("pan"):
        tail = (done.stderr or done.stdout).strip().splitlines()[-3:]
        raise CheckError(f"{run.name}: {Path(command[0]).name} failed: {' | '.join(tail)}")
    return done.stdout


def _budgeted(command: list[str], folder: Path, seconds: float) -> str:
    """pan's output, interrupted (SIGINT: it reports what it explored)
    after ``seconds``."""
    with subprocess.Popen(  # noqa: S603 - pan, built here
        command, cwd=folder, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    ) as pan:
        try:
            output, _ = pan.communicate(timeout=seconds)
        except subprocess.TimeoutExpired:
            pan.send_signal(signal.SIGINT)
            output, _ = pan.communicate(timeout=120)
    return output


def _number(pattern: re.Pattern[str], output: str, run: Run) -> int:
    found = pattern.search(output)
    if found is None:
        raise CheckError(f"{run.name}: pan's output has no {pattern.pattern!r}")
    return int(float(found.group(1)))


def check_all(runs: Iterable[Run], root: Path, jobs: int = 1) -> list[Result]:
    """Every run, ``jobs`` at a time, each in a folder under ``root``."""
    indexed = list(enumerate(runs))
    with ThreadPoolExecutor(max_workers=jobs) as pool:
        return list(pool.map(lambda item: check(item[1], root / f"run{item[0]}"), indexed))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Model-check epochgc's SPIN models.")
    parser.add_argument("scope", choices=sorted(SCOPES))
    parser.add_argument("--jobs", type=int, default=1)
    args = parser.parse_args(argv)
    try:
        with tempfile.TemporaryDirectory(prefix="epochgc-model-") as root:
            results = check_all(SCOPES[args.scope], Path(root), args.jobs)
            for result in results:
                print(result.line(), flush=True)
                if result.run.expect_error and result.steps:
                    print("    " + "\n    ".join(result.steps[-6:]))
    except (CheckError, OSError, subprocess.SubprocessError) as error:
        print(f"check: {error}", file=sys.stderr)
        return 2
    return 0 if all(r.ok for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
