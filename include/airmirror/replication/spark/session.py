"""The Spark session airmirror runs its copy jobs in.

Local masters (``local``, ``local[N]``, ``local[*]``) get task retries (``local[N,4]``): a Python worker killed
mid-write is retried inside the same job, and the transactional protocol makes the retry exactly-once.
On a cluster, ``spark.task.maxFailures`` does the same.  Workers run the driver's Python unless
``PYSPARK_PYTHON`` says otherwise.  The other settings are :func:`airmirror.replication.spark.defaults.copy_job_conf`.
"""

from __future__ import annotations

import os
import re
import sys
import threading
import warnings
from collections.abc import Mapping

from pyspark import SparkConf, SparkContext
from pyspark.sql import SparkSession

from airmirror.replication.spark.defaults import TASK_ATTEMPTS, copy_job_conf
from airmirror.replication.spark.jvm_output import launch_logged_gateway

LOCAL_MASTER = re.compile(r"local(?:\[(?P<threads>\*|\d+)\])?")


def with_task_retries(master: str) -> str:
    """``local[N]`` -> ``local[N,4]``; any other master is returned unchanged."""
    match = LOCAL_MASTER.fullmatch(master)
    if match is None:
        return master
    return f"local[{match.group('threads') or 1},{TASK_ATTEMPTS}]"


def spark_session(master: str, app_name: str, conf: Mapping[str, str] | None = None) -> SparkSession:
    """Get or create the session for airmirror's copy jobs: airmirror's Spark defaults, then ``conf``.  The first
    session of the process starts the driver JVM with its console logged (:mod:`.jvm_output`)."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    if master.startswith("local"):
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    settings = {"spark.master": with_task_retries(master), "spark.app.name": app_name, **copy_job_conf(conf)}
    with warnings.catch_warnings():
        # PySpark warns that it does not fully support pandas 3 when it first converts a setting; airmirror's jobs
        # use no pandas API
        warnings.filterwarnings("ignore", message="PySpark does not yet fully support pandas", category=FutureWarning)
        with SparkContext._lock:
            # PySpark keeps its gateway (the driver JVM) for the life of the process, across stopped sessions
            if SparkContext._gateway is None:
                spark_conf = SparkConf().setAll(list(settings.items()))
                SparkContext(conf=spark_conf, gateway=launch_logged_gateway(spark_conf))
        builder = SparkSession.builder
        for key, value in settings.items():
            builder = builder.config(key, value)
        session = builder.getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    return session


class BackgroundSession:
    """A Spark session started in a daemon thread by :meth:`start`, while the caller prepares the batch.

    Nothing starts at construction: a run starts the session once it holds the flow's lease
    (:func:`airmirror.replication.pipeline.start_early`), so a run that loses the lease exits at once without a
    Spark JVM.  Calling the instance starts the session if :meth:`start` was not called, waits for it and returns
    it, or re-raises what stopped it from starting.  A process that never calls it exits without waiting: the Spark
    JVM exits with its Python parent.
    """

    def __init__(self, master: str, app_name: str, conf: Mapping[str, str] | None = None) -> None:
        self._ready = threading.Event()
        self._session: SparkSession | None = None
        self._error: BaseException | None = None
        self._thread = threading.Thread(
            target=self._start, args=(master, app_name, conf), name="spark-session-start", daemon=True
        )
        self._start_once = threading.Lock()
        self._started = False

    def start(self) -> BackgroundSession:
        """Begin starting the session in the background (once; later calls do nothing); returns ``self``."""
        with self._start_once:
            if not self._started:
                self._thread.start()
                self._started = True
        return self

    def _start(self, master: str, app_name: str, conf: Mapping[str, str] | None) -> None:
        try:
            self._session = spark_session(master, app_name, conf)
        except BaseException as error:  # handed to the caller, whatever it is
            self._error = error
        finally:
            self._ready.set()

    def __call__(self) -> SparkSession:
        self.start()
        self._ready.wait()
        if self._error is not None:
            raise self._error
        assert self._session is not None
        return self._session
