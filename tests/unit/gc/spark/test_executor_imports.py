"""What Spark executors import is in the packed environment.

Executors get the package zip and an environment with boto3 and pyarrow
only (``spark_package.ENVIRONMENT_PACKAGES``). Everything a task unpickles
must import there: a class pickled by reference from a driver-only module
(``spark_job`` imports the Pushgateway client) failed every task on a
bare worker with ``ModuleNotFoundError: No module named 'prometheus_client'``.
"""

from __future__ import annotations

import subprocess
import sys

from pyspark import cloudpickle

from epochgc.gc.spark.package import ENVIRONMENT_PACKAGES
from epochgc.gc.spark.tasks import ResultList

# What a bare worker lacks: every import root of epochgc's other dependencies.
NOT_ON_EXECUTORS = ("apscheduler", "moto", "prometheus_client", "yaml", "hypothesis", "flask")

BLOCKER = f"""
import importlib.abc, sys
class Block(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name.split('.')[0] in {NOT_ON_EXECUTORS!r}:
            raise ImportError('not on executors: ' + name)
sys.meta_path.insert(0, Block())
"""


def test_the_task_modules_import_with_only_the_shipped_packages() -> None:
    assert set(ENVIRONMENT_PACKAGES) == {"boto3", "pyarrow"}
    code = BLOCKER + "import epochgc.gc.spark.tasks, epochgc.storage.inventory\n"
    run = subprocess.run([sys.executable, "-c", code], check=False, capture_output=True, text=True)
    assert run.returncode == 0, run.stderr.strip().splitlines()[-1]


def test_the_accumulator_parameter_unpickles_without_the_driver_module() -> None:
    payload = cloudpickle.dumps(ResultList())
    assert b"epochgc.gc.spark.job" not in payload
    code = BLOCKER + (
        "import pickle, sys\n"
        "value = pickle.loads(sys.stdin.buffer.read())\n"
        "assert 'epochgc.gc.spark.job' not in sys.modules\n"
        "print(type(value).__name__)\n"
    )
    run = subprocess.run(
        [sys.executable, "-c", code], check=False, input=payload, capture_output=True
    )
    assert run.returncode == 0, run.stderr.decode().strip().splitlines()[-1]
    assert run.stdout.strip() == b"ResultList"
