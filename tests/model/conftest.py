"""The model checks need SPIN and a C compiler; the model's scripts live in
model/ at the top of the repository, outside the package."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest

MODEL_DIR = Path(__file__).resolve().parents[2] / "model"
if str(MODEL_DIR) not in sys.path:
    sys.path.insert(0, str(MODEL_DIR))


@pytest.fixture(scope="session")
def spin_installed() -> None:
    """Fail (not skip) without spin: make installs it, and a model check
    that silently stops running is what this suite must not allow."""
    for tool in ("spin", "gcc"):
        if shutil.which(tool) is None:
            pytest.fail(f"{tool} is not installed (scripts/install_spin.sh installs spin)")
