"""The PySpark Python workers of a process run under test, to kill -9 them mid-copy."""

from __future__ import annotations

import subprocess

import psutil


def python_workers_of(process: subprocess.Popen) -> list[psutil.Process]:
    """PySpark Python workers forked under the process's Spark JVM (not the daemon that forks them)."""
    workers = []
    for child in psutil.Process(process.pid).children(recursive=True):
        try:
            parent = child.parent()
            if parent is not None and "pyspark.daemon" in " ".join(parent.cmdline()):
                workers.append(child)
        except psutil.NoSuchProcess:
            continue
    return workers
