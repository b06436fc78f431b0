"""spark-submit entry point of the epochgc deletion job.

    make wheel
    spark-submit --master yarn --py-files dist/epochgc-*.whl \
        scripts/spark_gc.py --config gc.toml --mode inventory

Takes the arguments of ``epochgc gc spark`` (without ``--master``: the
submit decides). Executors need boto3 and pyarrow importable (the wheel
carries only epochgc itself).
"""

import sys

from epochgc.cli import main

if __name__ == "__main__":
    sys.exit(main(["gc", "spark", *sys.argv[1:]]))
