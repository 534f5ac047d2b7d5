"""Starts Spark's Python worker daemon (``pyspark.daemon``) with the copy path imported, from installed packages.

Spark puts ``$SPARK_HOME/python/lib/pyspark.zip`` and py4j's source zip first on the Python workers'
``PYTHONPATH``.  Modules imported from a zip are compiled from source in every worker process (the zips
hold no bytecode), and every task re-reads the zip directories when it invalidates the import caches: on
a small machine that is a good part of a second per copy job.  With a pip-installed PySpark,
``SPARK_HOME`` is the installed ``pyspark`` package itself, so ``pyspark.zip`` is a copy of it; py4j's zip
is redundant when the installed py4j has the zip's version.  This launcher drops such redundant zips from the
module path (and from ``PYTHONPATH``, for any process the workers start); any other layout (a Spark distribution,
a cluster's own PySpark) keeps the path Spark set up.

It then imports the copy job's modules (:data:`PRELOADED`) and runs ``pyspark.daemon`` in the same process.  The
daemon forks a worker per Spark task slot, and a fork starts with what its parent imported, so no worker imports
airmirror itself: measured on 2 cores, the first copy job of a run started its tasks 1.0-1.4 s after it was
submitted, against 1.5-2.0 s when each worker imported the copy path on its own.  An import that fails is left to
the job, which reports it.

Used through ``spark.python.daemon.module`` (see :mod:`airmirror.replication.spark.defaults`).
"""

from __future__ import annotations

import importlib
import os
import runpy
import sys
from contextlib import suppress
from importlib.metadata import PackageNotFoundError, version

PY4J_ZIP_PREFIX, PY4J_ZIP_SUFFIX = "py4j-", "-src.zip"
PRELOADED = "airmirror.replication.spark.task_writer"
"""The module of the copy job's task function (:func:`~airmirror.replication.spark.task_writer.run_tasks`), which
imports everything a copy task runs and nothing only the driver needs."""


def is_redundant_zip(entry: str) -> bool:
    """Whether a path entry is Spark's zipped copy of a package this interpreter has installed."""
    lib = os.path.dirname(entry)
    if os.path.basename(lib) != "lib" or os.path.basename(os.path.dirname(lib)) != "python":
        return False
    name = os.path.basename(entry)
    if name == "pyspark.zip":
        spark_home = os.path.dirname(os.path.dirname(lib))
        return os.path.isfile(os.path.join(spark_home, "__init__.py"))
    if name.startswith(PY4J_ZIP_PREFIX) and name.endswith(PY4J_ZIP_SUFFIX):
        try:
            return version("py4j") == name[len(PY4J_ZIP_PREFIX) : -len(PY4J_ZIP_SUFFIX)]
        except PackageNotFoundError:
            return False
    return False


def main() -> None:
    sys.path[:] = [entry for entry in sys.path if not is_redundant_zip(entry)]
    entries = os.environ.get("PYTHONPATH", "").split(os.pathsep)
    os.environ["PYTHONPATH"] = os.pathsep.join(e for e in entries if e and not is_redundant_zip(e))
    with suppress(ImportError):  # the job imports it again, and its failure says why
        importlib.import_module(PRELOADED)
    runpy.run_module("pyspark.daemon", run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main()
