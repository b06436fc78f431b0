"""Fixtures for the tests of the container images, which only ``make
test-image`` runs: it builds both images (``scripts/build_images.sh``) and
exports their names. Elsewhere these tests are skipped, saying so: the build
needs podman, mmdebstrap and root, and takes minutes, so it is not part of
``make test``."""

from __future__ import annotations

import os
import subprocess
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.support.outside_suite import skip_unless_exported

ENV_KEYS = ("EPOCHGC_IMAGE", "EPOCHGC_SPARK_IMAGE")
SKIP_REASON = (
    "needs the container images: run `make test-image` "
    "(scripts/build_images.sh builds them and sets EPOCHGC_IMAGE, EPOCHGC_SPARK_IMAGE)"
)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    skip_unless_exported(items, "tests/image/", ENV_KEYS, SKIP_REASON)


def podman(
    *args: str, timeout: float = 120, check: bool = True
) -> subprocess.CompletedProcess[str]:
    """One podman command (CONTAINERS_CONF from the environment, as
    ``make test-image`` sets it); a failure shows its output."""
    done = subprocess.run(
        ["podman", *args], capture_output=True, text=True, timeout=timeout, check=False
    )
    if check and done.returncode != 0:
        pytest.fail(
            f"podman {' '.join(args)}: exit {done.returncode}\n"
            f"stdout:\n{done.stdout}\nstderr:\n{done.stderr}"
        )
    return done


@pytest.fixture(scope="session")
def image() -> str:
    return os.environ["EPOCHGC_IMAGE"]


@pytest.fixture(scope="session")
def spark_image() -> str:
    return os.environ["EPOCHGC_SPARK_IMAGE"]


@dataclass
class Network:
    """A podman network of this test's own, and the containers started on
    it; both are removed when the test ends, whatever happened."""

    name: str
    config_dir: Path
    containers: list[str] = field(default_factory=list)

    @property
    def config(self) -> str:
        """The configuration as the containers see it."""
        return "/etc/epochgc/config.toml"

    def _mounts(self) -> list[str]:
        return ["--network", self.name, "--volume", f"{self.config_dir}:/etc/epochgc:ro"]

    def host(self, role: str) -> str:
        """The name of the container playing ``role``: how the others reach
        it on the network (podman's DNS resolves container names)."""
        return f"{self.name}-{role}"

    def start(self, role: str, image: str, args: Sequence[str], env: Sequence[str] = ()) -> str:
        """A long-running container named ``host(role)``."""
        name = self.host(role)
        self.containers.append(name)
        flags = [f"--env={e}" for e in env]
        podman("run", "--detach", "--name", name, *flags, *self._mounts(), image, *args)
        return name

    def run(
        self, image: str, args: Sequence[str], timeout: float = 120, check: bool = True
    ) -> subprocess.CompletedProcess[str]:
        """A short-lived container on the network, removed when it exits."""
        return podman("run", "--rm", *self._mounts(), image, *args, timeout=timeout, check=check)

    def logs(self, container: str) -> str:
        done = podman("logs", container, check=False)
        return done.stdout + done.stderr


@pytest.fixture
def network(tmp_path: Path) -> Iterator[Network]:
    name = f"epochgc-t-{uuid.uuid4().hex[:10]}"
    config_dir = tmp_path / "etc"
    config_dir.mkdir()
    # The containers run as uid 10001: the mounted folder must be readable.
    config_dir.chmod(0o755)
    podman("network", "create", name)
    net = Network(name, config_dir)
    try:
        yield net
    finally:
        for container in reversed(net.containers):
            podman("rm", "--force", "--time", "30", container, check=False, timeout=120)
        podman("network", "rm", "--force", name, check=False)
