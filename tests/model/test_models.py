"""The SPIN models checked over every interleaving of make test's scope:
each baseline ends with 0 errors, and each weakened model, a rule of the
design taken out, yields a counterexample that renders as named steps (so
the model cannot silently stop checking). docs/internals.md, "The protocol,
model-checked", gives the scopes and their figures."""

from __future__ import annotations

from pathlib import Path

import check
import pytest

RUNS = {run.name: run for run in check.SCOPES["test"]}


@pytest.fixture(scope="module")
def results(
    spin_installed: None, tmp_path_factory: pytest.TempPathFactory
) -> dict[str, check.Result]:
    """Every run of the scope, two at a time (the machine has two cores),
    in pytest's temporary folders: nothing generated lands in the tree."""
    root = tmp_path_factory.mktemp("spin")
    done = check.check_all(RUNS.values(), root, jobs=2)
    for result in done:
        print(result.line())
    return {result.run.name: result for result in done}


@pytest.mark.slow
@pytest.mark.parametrize("name", [n for n, r in RUNS.items() if not r.expect_error])
def test_baseline_has_no_error(results: dict[str, check.Result], name: str) -> None:
    result = results[name]
    assert result.errors == 0, result.output
    assert result.states > 0
    assert "errors: 0" in result.output


@pytest.mark.slow
@pytest.mark.parametrize("name", [n for n, r in RUNS.items() if r.expect_error])
def test_weakened_model_yields_a_counterexample(
    results: dict[str, check.Result], name: str
) -> None:
    result = results[name]
    assert result.errors > 0, f"{name}: no counterexample\n{result.output}"
    assert result.trail is not None and result.trail.is_file()
    assert result.steps, "the trail renders no named step"
    expected = "-- from here the run repeats forever --" if result.run.liveness else "broken: "
    assert any(step.startswith(expected) for step in result.steps), result.steps


def test_every_weakening_in_the_models_is_checked() -> None:
    """A WEAKEN_ switch added to a model without a run here would be a
    rule nobody proves the model can catch."""
    switches = set()
    for model in (check.LOG_MODEL, check.LEASE_MODEL):
        for word in model.read_text().split():
            if word.startswith("WEAKEN_") and word.isidentifier():
                switches.add(word)
    checked = {d for run in RUNS.values() for d in run.defines if d.startswith("WEAKEN_")}
    assert switches == checked
    assert len(checked) == 13


def test_generated_files_stay_out_of_the_tree() -> None:
    tree = Path(check.HERE)
    assert not list(tree.glob("pan*")) and not list(tree.glob("*.trail"))
