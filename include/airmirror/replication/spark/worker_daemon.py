"""Starts Spark's Python worker daemon (``pyspark.daemon``) so that its workers import an installed PySpark.

Spark puts ``$SPARK_HOME/python/lib/pyspark.zip`` and py4j's source zip first on the Python workers'
``PYTHONPATH``.  Modules imported from a zip are compiled from source in every worker process (the zips
hold no bytecode), and every task re-reads the zip directories when it invalidates the import caches: on
a small machine that is a good part of a second per copy job.  With a pip-installed PySpark,
``SPARK_HOME`` is the installed ``pyspark`` package itself, so ``pyspark.zip`` is a copy of it; py4j's zip
is redundant when the installed py4j has the zip's version.  This launcher drops such redundant zips from
``PYTHONPATH`` and replaces itself (same process) with ``python -m pyspark.daemon``, whose forked workers
then import the installed, byte-compiled packages.  Any other layout (a Spark distribution, a cluster's own
PySpark) keeps the path Spark set up.

Used through ``spark.python.daemon.module`` (see :mod:`airmirror.replication.spark.defaults`).
"""

from __future__ import annotations

import os
import sys
from importlib.metadata import PackageNotFoundError, version

PY4J_ZIP_PREFIX, PY4J_ZIP_SUFFIX = "py4j-", "-src.zip"


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
    entries = os.environ.get("PYTHONPATH", "").split(os.pathsep)
    python_path = os.pathsep.join(e for e in entries if e and not is_redundant_zip(e))
    environment = {**os.environ, "PYTHONPATH": python_path}
    os.execve(sys.executable, [sys.executable, "-m", "pyspark.daemon", *sys.argv[1:]], environment)


if __name__ == "__main__":
    main()
