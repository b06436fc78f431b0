"""spark-submit entry point of the epochgc deletion job (docs/spark.md).

    epochgc spark package --out dist/spark
    spark-submit --master spark://spark-master:7077 \
        --py-files dist/spark/epochgc.zip \
        --archives dist/spark/epochgc-env.tar.gz#environment \
        --conf spark.pyspark.python=./environment/bin/python \
        --conf spark.pyspark.driver.python=python \
        scripts/spark_gc.py --config gc.toml --mode inventory

Takes the arguments of ``epochgc gc spark`` (without ``--master`` and
``--conf``: the submit decides).
"""

import sys

from epochgc.cli.main import main

if __name__ == "__main__":
    sys.exit(main(["gc", "spark", *sys.argv[1:]]))
