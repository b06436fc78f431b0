"""Each disturbance of a verify run draws from a random stream of its own,
derived from the run's seed and its name: the same seed gives the same
decisions, and adding or removing a disturbance leaves every other one's
decisions as they were, so a seed's schedule of faults survives a new
fault being added."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from epochgc.simulate.memory_store import MemoryStore
from epochgc.verify.churn import Churn
from epochgc.verify.disturbances import (
    DaysOffClocks,
    LoopStalls,
    OperatorPauses,
    ProcessFaults,
)
from epochgc.verify.processes import Processes
from epochgc.verify.result import VerifyResult

SEED = 11
ROUNDS = 60
ROLES = {"node-1": "node", "node-2": "node", "gc-1": "daemon", "gc-2": "daemon"}
NODES = ["node-1", "node-2"]

Decide = Callable[[], object]


def pauses(seed: int, folder: Path, result: VerifyResult) -> Decide:
    return OperatorPauses(MemoryStore(), seed, result).next_hold


def stalls(seed: int, folder: Path, result: VerifyResult) -> Decide:
    stalls = LoopStalls(Processes(folder, folder / "verify.toml", seed, {}), folder, seed, result)
    return lambda: stalls.next_stall(NODES)


def process_faults(seed: int, folder: Path, result: VerifyResult) -> Decide:
    procs = Processes(folder, folder / "verify.toml", seed, {})
    faults = ProcessFaults(procs, seed, DaysOffClocks(seed, result), result)
    return lambda: (faults.pace(), faults.next_fault(ROLES))


def churn(seed: int, folder: Path, result: VerifyResult) -> Decide:
    return Churn(MemoryStore(), folder, seed, 60.0).next_round


DISTURBANCES: dict[str, Callable[[int, Path, VerifyResult], Decide]] = {
    "operator pauses": pauses,
    "loop stalls": stalls,
    "process faults": process_faults,
    "churn": churn,
}
"""Each disturbance, built from a run's seed as ``run.py`` builds it, as
the decision of one round (no process, store or clock is touched)."""


def decisions(
    seed: int, folder: Path, kinds: list[str], rounds: int = ROUNDS
) -> dict[str, list[object]]:
    """The first ``rounds`` decisions of each of ``kinds``, built from one
    seed and drawn round by round in turn, as a run's rounds draw them."""
    result = VerifyResult(seed)
    built = {kind: DISTURBANCES[kind](seed, folder, result) for kind in kinds}
    drawn: dict[str, list[object]] = {kind: [] for kind in kinds}
    for _ in range(rounds):
        for kind, decide in built.items():
            drawn[kind].append(decide())
    return drawn


@pytest.mark.parametrize("kind", list(DISTURBANCES))
def test_a_disturbance_decides_the_same_whichever_others_run_beside_it(
    kind: str, tmp_path: Path
) -> None:
    alone = decisions(SEED, tmp_path, [kind])[kind]
    with_all = decisions(SEED, tmp_path, list(DISTURBANCES))[kind]
    for other in DISTURBANCES:
        if other != kind:
            without_one = [k for k in DISTURBANCES if k != other]
            assert decisions(SEED, tmp_path, without_one)[kind] == with_all, (
                f"removing the {other} changed the decisions of the {kind}"
            )
    assert alone == with_all
    assert len({repr(d) for d in alone}) > 1, f"the {kind} decided one thing only: {alone[0]}"


def test_the_same_seed_gives_the_same_decisions(tmp_path: Path) -> None:
    kinds = list(DISTURBANCES)
    first = decisions(SEED, tmp_path, kinds)
    assert decisions(SEED, tmp_path, kinds) == first
    other_seed = decisions(SEED + 1, tmp_path, kinds)
    for kind in kinds:
        assert other_seed[kind] != first[kind], f"the {kind} ignore the seed"


def test_no_two_disturbances_share_a_stream() -> None:
    """A stream is named after its disturbance: two with one name would
    draw the same numbers, in step."""
    names = [OperatorPauses.NAME, LoopStalls.NAME, DaysOffClocks.NAME, Churn.NAME]
    assert len(set(names)) == len(names)
