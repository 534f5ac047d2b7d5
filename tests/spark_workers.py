"""The PySpark Python workers of a process run under test, to kill -9 them mid-copy."""

from __future__ import annotations

import subprocess

import psutil

from airmirror.replication.spark.defaults import WORKER_DAEMON_MODULE

DAEMON_MODULES = {WORKER_DAEMON_MODULE, "pyspark.daemon"}


def python_workers_of(process: subprocess.Popen) -> list[psutil.Process]:
    """PySpark Python workers forked under the process's Spark JVM (not the daemon that forks them: airmirror's
    launcher, which runs ``pyspark.daemon`` in its own process, or ``pyspark.daemon`` itself)."""
    workers = []
    for child in psutil.Process(process.pid).children(recursive=True):
        try:
            parent = child.parent()
            if parent is not None and DAEMON_MODULES & set(parent.cmdline()):
                workers.append(child)
        except psutil.NoSuchProcess:
            continue
    return workers
