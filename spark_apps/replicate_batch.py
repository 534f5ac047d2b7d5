"""spark-submit entry point: copy a flow's unfinished airmirror batch on any Spark master, or replicate
continuously (every step of every batch) on that master.

    spark-submit --master spark://host:7077 spark_apps/replicate_batch.py /path/mm2.properties --flow a->b
    spark-submit --master spark://h:7077 spark_apps/replicate_batch.py mm2.properties --flow a->b --continuous --for 1h

The airmirror package must be importable on the driver and executors (``pip install`` it there, or ship it
with ``--py-files``).
"""

import sys

from airmirror.replication.spark.entry import main

if __name__ == "__main__":
    sys.exit(main())
