"""Building the SparkSession for ``epochgc gc spark``: quiet logs, the
driver on loopback in local mode, Python workers running this interpreter
(so they import the same installed epochgc, boto3 and pyarrow).

Under ``spark-submit`` the submit decides the master and the deployment;
this only names the application and leaves the rest alone.
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path
from typing import Any

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


def build_spark_session(
    master: str, app_name: str = "epochgc-gc", *, ui: bool = True, log_level: str = "WARN"
) -> Any:
    """A SparkSession for the GC job (``Any``: pyspark ships no types we
    check against). Spark's own logs go at ``log_level``: from the JVM's
    start through a log4j2 file when this process starts the JVM; under
    spark-submit through ``spark.log.level``, which Spark applies right
    after its three start-up lines (version, OS, Java)."""
    from pyspark.sql import SparkSession  # noqa: PLC0415 - only the Spark commands need it

    builder = SparkSession.builder.appName(app_name)
    if not under_spark_submit():
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
        builder = builder.master(master)
        if master.startswith("local"):
            os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
            builder = builder.config("spark.driver.host", "127.0.0.1").config(
                "spark.driver.bindAddress", "127.0.0.1"
            )
        log4j = Path(tempfile.gettempdir()) / "epochgc-log4j2.properties"
        log4j.write_text(_LOG4J.replace("{level}", log_level.lower()))
        builder = (
            builder.config(
                "spark.driver.extraJavaOptions", f"-Dlog4j2.configurationFile=file:{log4j}"
            )
            .config("spark.ui.showConsoleProgress", "false")
            .config("spark.ui.enabled", "true" if ui else "false")
            .config("spark.sql.execution.arrow.pyspark.enabled", "true")
        )
    # Spark applies this as its context starts, also in the JVM spark-submit
    # started with Spark's INFO profile (setting the level through the
    # gateway earlier does not hold: the context reloads that profile).
    spark = builder.config("spark.log.level", log_level).getOrCreate()
    spark.sparkContext.setLogLevel(log_level)
    return spark
