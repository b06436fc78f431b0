"""Building the SparkSession for ``epochgc gc spark``: quiet logs, the
driver on loopback in local mode, the user's Spark settings, and what the
executors run.

* Local master (``local[...]``): Python workers run this interpreter, so
  they import the same installed epochgc, boto3 and pyarrow.
* Any other master, with a ``SparkPackage`` (``spark_package``): the code
  zip goes to every executor's Python path (``addPyFile``) and the packed
  environment is unpacked in each executor's working directory
  (``spark.archives``), whose ``./environment/bin/python`` runs the Python
  workers. Nothing has to be installed on the workers but a matching Python.

Settings apply in this order, later wins: epochgc's defaults, then the
user's (``[spark] conf``, ``--conf``), then the shipping settings, which
must hold for the job to run at all. Under ``spark-submit`` the submit
decides the master, the deployment and the settings; this only names the
application and leaves the rest alone.
"""

from __future__ import annotations

import logging
import os
import sys
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from epochgc.gc.spark.package import (
    EXECUTOR_PYTHON,
    SparkPackage,
    default_package_dir,
    ensure_package,
    is_local_master,
)

log = logging.getLogger(__name__)

_LOG4J = """\
rootLogger.level = {level}
rootLogger.appenderRef.stdout.ref = console
appender.console.type = Console
appender.console.name = console
appender.console.target = SYSTEM_ERR
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = %d{HH:mm:ss} %p %c{1}: %m%n
"""


def under_spark_submit() -> bool:
    """True when this driver was launched by ``spark-submit`` (its
    PythonRunner hands the JVM gateway over in the environment)."""
    return "PYSPARK_GATEWAY_PORT" in os.environ


def ships_package(master: str, *, ship: bool) -> bool:
    """Whether ``gc spark`` on ``master`` ships the executors' package
    itself: not to a local master (its workers run this interpreter), not
    under spark-submit (its command line names what ships), not with
    ``[spark] ship = false`` (the cluster provides the executors' Python)."""
    return ship and not is_local_master(master) and not under_spark_submit()


def package_to_ship(master: str, *, ship: bool, package_dir: str | None) -> SparkPackage | None:
    """The executors' package for ``master``, built into ``package_dir``
    (default: ``default_package_dir``) when missing or out of date; or
    ``None``: a local master's workers run this interpreter, spark-submit
    ships what its command line names, and ``[spark] ship = false`` leaves
    the executors' Python to the cluster.

    Raises:
        SparkPackageError: building the package failed.
    """
    if not ships_package(master, ship=ship):
        return None
    return ensure_package(Path(package_dir or default_package_dir()))


def build_spark_session(
    master: str,
    app_name: str = "epochgc-gc",
    *,
    ui: bool = True,
    conf: Mapping[str, str] | None = None,
    package: SparkPackage | None = None,
    log_level: str = "WARN",
) -> Any:
    """A SparkSession for the GC job (``Any``: pyspark ships no types we
    check against). Spark's own logs go at ``log_level``: from the JVM's
    start through a log4j2 file when this process starts the JVM; under
    spark-submit through ``spark.log.level``, which Spark applies right
    after its three start-up lines (version, OS, Java).

    Args:
        master: the Spark master (ignored under spark-submit).
        conf: the user's Spark settings (already checked by ``spark_conf``).
        package: what to ship to the executors; ``None`` for a local master
            or workers that have everything installed.
    """
    from pyspark.sql import SparkSession  # noqa: PLC0415 - only the Spark commands need it

    conf = dict(conf or {})
    builder = SparkSession.builder.appName(app_name)
    if under_spark_submit():
        if conf:
            log.warning(
                "ignoring %d Spark setting(s) of [spark] conf / --conf (%s): under spark-submit, "
                "give them to spark-submit --conf",
                len(conf),
                ", ".join(sorted(conf)),
            )
        return _start(builder, log_level)
    builder = builder.master(master)
    if is_local_master(master):
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
        builder = builder.config("spark.driver.host", "127.0.0.1").config(
            "spark.driver.bindAddress", "127.0.0.1"
        )
    log4j = Path(tempfile.gettempdir()) / "epochgc-log4j2.properties"
    log4j.write_text(_LOG4J.replace("{level}", log_level.lower()))
    builder = (
        builder.config("spark.driver.extraJavaOptions", f"-Dlog4j2.configurationFile=file:{log4j}")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.ui.enabled", "true" if ui else "false")
        .config("spark.sql.execution.arrow.pyspark.enabled", "true")
    )
    for key, value in conf.items():
        builder = builder.config(key, value)
    # Outside spark-submit, PySpark reads the executors' Python from the
    # environment only; honour the setting a user would give spark-submit.
    python = conf.get("spark.pyspark.python")
    if package is not None:
        archives = [package.archives_entry, *filter(None, [conf.get("spark.archives")])]
        builder = builder.config("spark.archives", ",".join(archives))
        python = EXECUTOR_PYTHON
        log.info(
            "shipping %s and %s to the executors", package.code_zip.name, package.environment.name
        )
    if python is not None:
        os.environ["PYSPARK_PYTHON"] = python
    else:
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    spark = _start(builder, log_level)
    if package is not None:
        spark.sparkContext.addPyFile(str(package.code_zip))
    return spark


def _start(builder: Any, log_level: str) -> Any:
    # Spark applies spark.log.level as its context starts, also in the JVM
    # spark-submit started with Spark's INFO profile (setting the level
    # through the gateway earlier does not hold: the context reloads that
    # profile).
    spark = builder.config("spark.log.level", log_level).getOrCreate()
    spark.sparkContext.setLogLevel(log_level)
    return spark
