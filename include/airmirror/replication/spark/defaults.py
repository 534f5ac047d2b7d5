"""The Spark settings every airmirror copy job runs with, whichever way its session is made.

The CLI's session (:mod:`airmirror.replication.spark.session`), the Airflow ``replicate`` task (``@task.pyspark``) and
its spark-submit form all start from these, then apply the flow's ``airmirror.spark.conf.X`` settings, which
override any of them:

- ``spark.task.maxFailures`` 4: a task killed mid-write is retried in the same job; the transactional
  protocol makes the retry exactly-once.
- Python workers start from :mod:`airmirror.replication.spark.worker_daemon`, so they import byte-compiled
  packages instead of compiling PySpark's zipped sources in every worker.
- The driver JVM compiles with the quick C1 JIT only (``-XX:TieredStopAtLevel=1``): in a copy job it only
  schedules one task per range and collects one summary per range; records never pass through it.  It maps
  this machine's class-data-sharing archive of Spark's classes when one was built
  (:mod:`airmirror.replication.spark.class_archive`), which halves its start.
- No Spark UI, and no console progress bars unless stderr is a terminal: in a log (Airflow, spark-submit,
  the bench, a redirected CLI) they are only noise.

This module imports nothing from Spark, so DAG files can use it at parse time.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping

from airmirror.replication.spark.class_archive import driver_java_options

TASK_ATTEMPTS = 4
DRIVER_JAVA_OPTIONS = "-XX:TieredStopAtLevel=1"
WORKER_DAEMON_MODULE = "airmirror.replication.spark.worker_daemon"


def copy_job_conf(overrides: Mapping[str, str] | None = None) -> dict[str, str]:
    """airmirror's Spark defaults, then ``overrides`` (a flow's ``airmirror.spark.conf.X``) on top.  Console
    progress bars are on only when this process's stderr is a terminal."""
    return {
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "true" if sys.stderr.isatty() else "false",
        "spark.task.maxFailures": str(TASK_ATTEMPTS),
        "spark.python.daemon.module": WORKER_DAEMON_MODULE,
        "spark.driver.extraJavaOptions": driver_java_options(DRIVER_JAVA_OPTIONS),
        **(overrides or {}),
    }
