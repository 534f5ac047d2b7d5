"""A class-data-sharing archive of the Spark driver JVM's classes: each run's session starts in half the time.

Every ``airmirror replicate`` (and ``verify``, each Airflow ``replicate`` task run in local mode) starts a Spark
driver JVM, which loads and verifies some 10,000 classes from PySpark's jars before its first job: about 6 s of
a batch's wall time on two cores.  A dynamic CDS archive (JDK 13+, ``-XX:ArchiveClassesAtExit``) holds those
classes already parsed and verified; a JVM started with ``-XX:SharedArchiveFile`` maps it instead
(measured here: session start 6.4 s -> 2.9 s, first job 1.3 s -> 0.8 s).

Contract:

- One archive per JVM and PySpark install: its file name carries a digest of the ``java`` that PySpark launches
  (``$JAVA_HOME/bin/java``, else ``java`` on ``PATH``: resolved path, size and mtime) and of PySpark's version
  and jars folder, so a JVM never meets an archive dumped by another one.  It lives in ``~/.cache/airmirror``.
- :func:`build_archive` makes it (``make setup`` runs it; ``python -m airmirror.replication.spark.class_archive``
  does the same): a separate Python process starts a session that dumps its classes at exit, runs a copy job's
  shape of job (a job group, ``mapPartitions`` over Python objects, ``collect``) and exits; only a complete
  dump is renamed into place (atomically), so concurrent builds and a killed build never leave a half-written
  archive under the final name.  Archives of PySpark installs that no longer exist (a deleted virtual
  environment) are removed by the next build, so the cache does not grow with every install a machine had.
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
import subprocess
import sys
from collections.abc import Callable
from importlib.metadata import version
from importlib.util import find_spec
from pathlib import Path

MODULE = "airmirror.replication.spark.class_archive"
JVM_WARNINGS_TO_STDERR = "-Xlog:disable -Xlog:all=warning:stderr"
"""The JVM writes its log warnings (an archive it cannot use among them) to stdout by default, where the driver
JVM shares the CLI's stdout and would corrupt ``--json`` output: they go to stderr instead."""
OWNER_SUFFIX = ".pyspark"
"""Next to each archive, a file naming the PySpark install it was dumped for (:func:`install_identity`, see
:func:`remove_orphans`)."""
BUILD_TIMEOUT_S = 600.0
JVM_EXIT_TIMEOUT_S = 300.0


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


def build_archive(force: bool = False) -> Path | None:
    """Make the archive unless it exists (or ``force``); returns its path (``None`` without a ``java``).

    The dump runs in a child process (see the module docstring) into a temporary file next to the archive,
    renamed into place only when the child and its JVM exited cleanly; the temporary file is removed
    otherwise.  Raises :class:`RuntimeError` with the child's output when the dump failed."""
    path = archive_path()
    if path is None or (path.is_file() and not force):
        return path
    path.parent.mkdir(parents=True, exist_ok=True)
    remove_orphans(path.parent)
    jars = pyspark_jars()

    def record_owner() -> None:
        if jars is not None:
            path.with_suffix(OWNER_SUFFIX).write_text(install_identity(jars))

    dump_into_place(MODULE, path, "the Spark class archive", BUILD_TIMEOUT_S, before_rename=record_owner)
    return path


def dump_into_place(
    module: str, path: Path, what: str, timeout: float, before_rename: Callable[[], None] = lambda: None
) -> None:
    """Run ``python -m module --dump PARTIAL`` (``PARTIAL`` a temporary file beside ``path``) and rename
    ``PARTIAL`` to ``path`` (atomically) only when the child exited cleanly with a dump written, calling
    ``before_rename`` first; the temporary file is removed otherwise.  Raises :class:`RuntimeError` naming
    ``what``, with the child's output, when no dump was made."""
    partial = path.with_name(f"{path.name}.{os.getpid()}.partial")
    try:
        done = subprocess.run(
            [sys.executable, "-m", module, "--dump", str(partial)],
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
        if done.returncode != 0 or not partial.is_file() or partial.stat().st_size == 0:
            raise RuntimeError(f"{what} was not dumped (exit {done.returncode}):\n{done.stdout}{done.stderr}")
        before_rename()
        os.replace(partial, path)
    finally:
        partial.unlink(missing_ok=True)


def install_identity(jars: Path) -> str:
    """The PySpark install whose jars folder is ``jars``: its path, inode and modification time, so that a folder
    removed and created again (a new clone or virtual environment at the same path) is another install."""
    stat = jars.stat()
    return f"{jars}|{stat.st_ino}|{stat.st_mtime_ns}"


def remove_orphans(folder: Path) -> None:
    """Delete the archives (and their owner files) whose PySpark install is gone or was replaced, so that a machine
    where virtual environments come and go, even at one path, keeps one archive per live install, not one per install
    it ever had.  An owner file that names only a folder (written before installs were identified) counts as
    replaced: that archive is dumped again on its install's next build."""
    for owner in folder.glob(f"spark-driver-*{OWNER_SUFFIX}"):
        recorded = owner.read_text().strip()
        try:
            current = install_identity(Path(recorded.split("|", 1)[0]))
        except FileNotFoundError:
            current = None
        if current != recorded:
            owner.with_suffix(".jsa").unlink(missing_ok=True)
            owner.unlink(missing_ok=True)


def dump(partial: Path) -> None:
    """In the child: a session whose JVM dumps its classes into ``partial`` at exit, one job, then end the JVM
    and wait for its dump."""
    from pyspark import SparkContext

    from airmirror.replication.spark.defaults import DRIVER_JAVA_OPTIONS
    from airmirror.replication.spark.session import spark_session

    session = spark_session(
        "local[2]",
        "airmirror class archive",
        {"spark.driver.extraJavaOptions": f"{DRIVER_JAVA_OPTIONS} -XX:ArchiveClassesAtExit={partial}"},
    )
    context = session.sparkContext
    context.setJobGroup("airmirror-class-archive", "classes of a copy job", interruptOnCancel=True)
    rows = (
        context.parallelize([{"task": 0}, {"task": 1}], 2)
        .mapPartitions(lambda tasks: [dict(t) for t in tasks])
        .collect()
    )
    assert len(rows) == 2
    session.stop()
    gateway = SparkContext._gateway
    process = getattr(gateway, "proc", None)
    if process is None:
        raise RuntimeError("no Spark driver JVM of this process to end")
    process.stdin.close()  # the gateway JVM exits when its stdin closes, dumping the archive on the way
    process.wait(JVM_EXIT_TIMEOUT_S)


def main(argv: list[str]) -> int:
    """``python -m airmirror.replication.spark.class_archive [--force]`` builds the archive and prints its path;
    ``--dump PATH`` is the child's part."""
    if argv[:1] == ["--dump"] and len(argv) == 2:
        dump(Path(argv[1]))
        return 0
    if argv not in ([], ["--force"]):
        print("usage: python -m airmirror.replication.spark.class_archive [--force]", file=sys.stderr)
        return 2
    path = build_archive(force=bool(argv))
    print(path if path is not None else "no java found: no Spark class archive")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
