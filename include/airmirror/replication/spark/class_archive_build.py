"""Build the Spark driver's class-data-sharing archive (:mod:`airmirror.replication.spark.class_archive`).

``python -m airmirror.replication.spark.class_archive_build [--force]`` (``make setup`` runs it) prints the
archive's path.  A build tool, apart from what a run imports: it starts a Spark session of its own.

Contract:

- :func:`build_archive` makes the archive unless it exists: a separate Python process starts a session that dumps
  its classes at exit, runs a copy job's shape of job (a job group, ``mapPartitions`` over Python objects,
  ``collect``) and exits; only a complete dump is renamed into place (atomically), so concurrent builds and a
  killed build never leave a half-written archive under the final name.
- Archives of PySpark installs that no longer exist (a deleted virtual environment) are removed by the next build,
  so the cache does not grow with every install a machine had.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

from airmirror.replication.spark.class_archive import archive_path, pyspark_jars

MODULE = "airmirror.replication.spark.class_archive_build"
OWNER_SUFFIX = ".pyspark"
"""Next to each archive, a file naming the PySpark install it was dumped for (:func:`install_identity`, see
:func:`remove_orphans`)."""
BUILD_TIMEOUT_S = 600.0
JVM_EXIT_TIMEOUT_S = 300.0


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
    """``python -m airmirror.replication.spark.class_archive_build [--force]`` builds the archive and prints its path;
    ``--dump PATH`` is the child's part."""
    if argv[:1] == ["--dump"] and len(argv) == 2:
        dump(Path(argv[1]))
        return 0
    if argv not in ([], ["--force"]):
        print("usage: python -m airmirror.replication.spark.class_archive_build [--force]", file=sys.stderr)
        return 2
    path = build_archive(force=bool(argv))
    print(path if path is not None else "no java found: no Spark class archive")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
