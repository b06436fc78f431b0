"""Under spark-submit the driver's output is epochgc's own lines (a line
per finished task, the run's result), not Spark's INFO lines, unless asked
for with ``--spark-log-level``."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import uuid
from pathlib import Path

from epochgc.gc.spark.package import write_entry_script
from epochgc.storage.embedded import EmbeddedS3
from epochgc.storage.keys import encode_l0_key
from epochgc.storage.s3 import S3ObjectStore
from epochgc.watermarks.controller import Controller
from tests.support.config_files import write_gc_config
from tests.support.moto_seed import seed_objects

SPARK_INFO = re.compile(r"\bINFO\b.*\b(SparkContext|Executor|DAGScheduler|SparkEnv|Utils)\b")
# Spark logs these before it applies spark.log.level (its context reloads
# Spark's INFO profile first): the only Spark INFO lines left.
STARTUP = re.compile(r"INFO SparkContext: (Running Spark version|OS info|Java version)")


def submit(config: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    """The job under spark-submit, run by the entry script ``spark
    package`` writes (into the config's folder)."""
    return subprocess.run(
        [
            str(Path(sys.executable).parent / "spark-submit"),
            "--master",
            "local[2]",
            str(write_entry_script(config.parent)),
            "--config",
            str(config),
            "--dry-run",
            *extra,
        ],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "PYSPARK_PYTHON": sys.executable, "SPARK_LOCAL_IP": "127.0.0.1"},
        check=False,
    )


def test_spark_submit_prints_progress_per_task_and_no_spark_info_unless_asked(
    tmp_path: Path, s3_server: EmbeddedS3, store: S3ObjectStore, bucket: str
) -> None:
    Controller(store, "epochgc").advance_to(5)
    seed_objects(bucket, [encode_l0_key("epochgc", s, 4, str(uuid.uuid4())) for s in range(2)])
    config = write_gc_config(
        tmp_path / "submit.toml", s3_server.endpoint_url, bucket, shards=2, max_delete_fraction=None
    )
    quiet = submit(config)
    assert quiet.returncode == 0, quiet.stderr[-3000:]
    spark_info = [
        line
        for line in quiet.stderr.splitlines()
        if SPARK_INFO.search(line) and not STARTUP.search(line)
    ]
    assert not spark_info, quiet.stderr[-3000:]
    # spark-submit merges the driver's stderr into its stdout
    assert re.search(r"task 1/2 done \(shards 0\.\.0\): listed 1, eligible 1", quiet.stdout)
    loud = submit(config, "--spark-log-level", "INFO")
    assert loud.returncode == 0, loud.stderr[-3000:]
    assert any(SPARK_INFO.search(line) for line in loud.stderr.splitlines())
