"""How a package folder's environment archive is made current
(``environment_step``): built once into the shared cache, linked into
every folder from there."""

from __future__ import annotations

import pytest

from epochgc.gc.spark.package import EnvironmentStep, environment_key, environment_step


@pytest.mark.parametrize(
    ("cache_current", "folder_current", "folder_is_cache", "step"),
    [
        (False, False, False, EnvironmentStep.BUILT),  # the first build anywhere
        (True, False, False, EnvironmentStep.LINKED),  # a new folder: no build
        (True, True, True, EnvironmentStep.KEPT),
        (True, True, False, EnvironmentStep.LINKED),  # the folder's own older copy goes
        (False, True, False, EnvironmentStep.KEPT),  # kept; it seeds the cache
    ],
)
def test_the_cache_is_built_once_and_linked_everywhere(
    cache_current: bool, folder_current: bool, folder_is_cache: bool, step: EnvironmentStep
) -> None:
    assert (
        environment_step(
            rebuild=False,
            cache_current=cache_current,
            folder_current=folder_current,
            folder_is_cache=folder_is_cache,
        )
        is step
    )


@pytest.mark.parametrize("cache_current", [False, True])
def test_rebuild_environment_always_builds(cache_current: bool) -> None:
    assert (
        environment_step(
            rebuild=True, cache_current=cache_current, folder_current=True, folder_is_cache=True
        )
        is EnvironmentStep.BUILT
    )


def test_each_set_of_pins_has_its_own_cache_folder() -> None:
    a = "python3.11 boto3==1.34.0 pyarrow==16.0.0 (without 10 excluded paths)"
    b = a.replace("3.11", "3.13")
    assert environment_key(a) == environment_key(a) != environment_key(b)
    assert environment_key(a).isalnum() and len(environment_key(a)) == 16
