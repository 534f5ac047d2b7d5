"""The Spark driver JVM's console, kept off the user's terminal.

PySpark starts the driver JVM with the terminal as its stderr.  What the JVM prints there (its start-up banners,
Spark's log lines, what its Python workers print) would follow a CLI's one-line error or fill a task log.
:func:`launch_logged_gateway` starts the JVM, as PySpark would, with its stderr piped into Python logging:

1. Each line goes to logger ``airmirror.spark`` at INFO: ``airmirror -v`` shows it, and so does an Airflow task
   log; a plain CLI run does not.
2. Lines known to be start-up noise (:data:`START_UP_NOISE`: the JVM's incubator-module notice, Spark's default
   log4j profile and log level banners, Hadoop's native library notice) are dropped.
3. A daemon thread reads the pipe until the JVM exits, so the JVM never blocks on a full pipe.
"""

from __future__ import annotations

import logging
import re
import subprocess
import threading
from typing import IO, Any

from pyspark import SparkConf
from pyspark.java_gateway import launch_gateway

log = logging.getLogger("airmirror.spark")

START_UP_NOISE = re.compile(
    r"WARNING: Using incubator modules"
    r"|Using Spark's default log4j profile"
    r"|Setting default log level to"
    r"|To adjust logging level use sc\.setLogLevel"
    r"|WARN NativeCodeLoader: Unable to load native-hadoop library"
)


def launch_logged_gateway(conf: SparkConf) -> Any:
    """PySpark's gateway to a new driver JVM started with ``conf``, its stderr logged by the module's rules."""
    gateway = launch_gateway(conf, popen_kwargs={"stderr": subprocess.PIPE})
    threading.Thread(target=forward, args=(gateway.proc.stderr,), name="spark-jvm-stderr", daemon=True).start()
    return gateway


def forward(stream: IO[bytes]) -> None:
    """Log each line of ``stream`` until it ends (rules 1 and 2)."""
    for raw in stream:
        line = raw.decode("utf-8", "replace").rstrip()
        if line and not START_UP_NOISE.search(line):
            log.info("%s", line)
