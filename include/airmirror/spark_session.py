"""The Spark session airmirror runs its copy jobs in.

Local masters (``local``, ``local[N]``, ``local[*]``) get task retries (``local[N,4]``): a Python worker killed
mid-write is retried inside the same job, and the transactional protocol makes the retry exactly-once.
On a cluster, ``spark.task.maxFailures`` does the same.  Workers run the driver's Python unless
``PYSPARK_PYTHON`` says otherwise.
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Mapping

from pyspark.sql import SparkSession

from airmirror.replication.kafka_range_source import KafkaRangeSource

TASK_ATTEMPTS = 4
LOCAL_MASTER = re.compile(r"local(?:\[(?P<threads>\*|\d+)\])?")


def with_task_retries(master: str) -> str:
    """``local[N]`` -> ``local[N,4]``; any other master is returned unchanged."""
    match = LOCAL_MASTER.fullmatch(master)
    if match is None:
        return master
    return f"local[{match.group('threads') or 1},{TASK_ATTEMPTS}]"


def spark_session(master: str, app_name: str, conf: Mapping[str, str] | None = None) -> SparkSession:
    """Get or create the session, with airmirror's Kafka range source registered."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    if master.startswith("local"):
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    builder = (
        SparkSession.builder.master(with_task_retries(master))
        .appName(app_name)
        .config("spark.ui.enabled", "false")
        .config("spark.task.maxFailures", str(TASK_ATTEMPTS))
        .config("spark.sql.execution.arrow.maxRecordsPerBatch", "10000")
    )
    for key, value in (conf or {}).items():
        builder = builder.config(key, value)
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    session.dataSource.register(KafkaRangeSource)
    return session
