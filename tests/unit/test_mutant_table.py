"""``make mutants`` applies each mutant by replacing one exact text in one
file: a refactoring that changes that text would leave a mutant that no
longer applies, found only when the (long) harness runs. Checked here, in
``make test``."""

from __future__ import annotations

import pytest

from tests.mutation.mutants import MUTANTS, REPO, Mutant


@pytest.mark.parametrize("mutant", MUTANTS, ids=lambda m: m.name)
def test_each_mutant_applies_to_exactly_one_place(mutant: Mutant) -> None:
    source = (REPO / mutant.path).read_text()
    assert source.count(mutant.old) == 1, f"{mutant.name}: {mutant.old!r} in {mutant.path}"
    assert mutant.old != mutant.new


def test_mutant_names_are_unique() -> None:
    names = [m.name for m in MUTANTS]
    assert len(names) == len(set(names))
