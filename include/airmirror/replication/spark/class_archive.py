"""A class-data-sharing archive of the Spark driver JVM's classes: each run's session starts in half the time.

Every ``airmirror replicate`` (and ``verify``, each Airflow ``replicate`` task run in local mode) starts a Spark
driver JVM, which loads and verifies some 10,000 classes from PySpark's jars before its first job: about 6 s of
a batch's wall time on two cores.  A dynamic CDS archive (JDK 13+, ``-XX:ArchiveClassesAtExit``) holds those
classes already parsed and verified; a JVM started with ``-XX:SharedArchiveFile`` maps it instead
(measured here: session start 6.4 s -> 2.9 s, first job 1.3 s -> 0.8 s).

This module is what a run reads; :mod:`airmirror.replication.spark.class_archive_build` makes the archive.

Contract:

- One archive per JVM and PySpark install: its file name carries a digest of the ``java`` that PySpark launches
  (``$JAVA_HOME/bin/java``, else ``java`` on ``PATH``: resolved path, size and mtime) and of PySpark's version
  and jars folder, so a JVM never meets an archive dumped by another one.  It lives in ``~/.cache/airmirror``.
- :func:`driver_java_options` adds ``-XX:SharedArchiveFile`` only when the archive exists.  The JVM checks it
  (JVM build, class path and its jars' sizes and times, flags) and, if it does not match, starts without it,
  with a warning on stderr (never stdout, which the driver JVM shares with the CLI's ``--json`` output): an
  archive can make a start faster, never make one fail.  A reinstalled PySpark gets an archive name of its own
  (its jars folder's inode and time are in the digest).
"""

from __future__ import annotations

import hashlib
import os
import shutil
from importlib.metadata import version
from importlib.util import find_spec
from pathlib import Path

JVM_WARNINGS_TO_STDERR = "-Xlog:disable -Xlog:all=warning:stderr"
"""The JVM writes its log warnings (an archive it cannot use among them) to stdout by default, where the driver
JVM shares the CLI's stdout and would corrupt ``--json`` output: they go to stderr instead."""


def java_executable() -> Path | None:
    """The ``java`` PySpark's launcher runs (``$JAVA_HOME/bin/java``, else the first on ``PATH``), resolved."""
    java_home = os.environ.get("JAVA_HOME")
    found = str(Path(java_home) / "bin" / "java") if java_home else shutil.which("java")
    if not found or not os.path.isfile(found):
        return None
    return Path(found).resolve()


def pyspark_jars() -> Path | None:
    """The jars folder of the PySpark this process imports (located, not imported: DAG files call this at
    parse time)."""
    spec = find_spec("pyspark")
    if spec is None or spec.origin is None:
        return None
    return Path(spec.origin).resolve().parent / "jars"


def archive_path() -> Path | None:
    """Where the archive for this JVM and PySpark install lives (whether or not it exists); ``None`` without a
    ``java``."""
    java, jars = java_executable(), pyspark_jars()
    if java is None or jars is None:
        return None
    stat, installed = java.stat(), jars.stat()  # a reinstalled PySpark has new jars: the JVM would refuse the archive
    pyspark = version("pyspark")
    identity = f"{java}|{stat.st_size}|{stat.st_mtime_ns}|{pyspark}|{jars}|{installed.st_ino}|{installed.st_mtime_ns}"
    digest = hashlib.sha256(identity.encode()).hexdigest()[:16]
    return Path.home() / ".cache" / "airmirror" / f"spark-driver-{pyspark}-{digest}.jsa"


def driver_java_options(base: str) -> str:
    """``base`` plus ``-XX:SharedArchiveFile=...`` and :data:`JVM_WARNINGS_TO_STDERR` when this machine's archive
    exists."""
    path = archive_path()
    if path is None or not path.is_file():
        return base
    return f"{base} -XX:SharedArchiveFile={path} {JVM_WARNINGS_TO_STDERR}"
