"""A class-data-sharing archive of the local Kafka node's classes: each node starts on about half the CPU.

A local node (``kafka.Kafka``) and its storage formatter load and verify thousands of classes from the Kafka jars
before they do any work.  A dynamic CDS archive (JDK 13+, ``-XX:ArchiveClassesAtExit``) holds those classes already
parsed and verified; a JVM started with ``-XX:SharedArchiveFile`` maps it instead (measured on the 2-core VM: a
node's start-up 2.9-3.2 s of CPU and ready in 4.2-4.4 s without it, 1.7 s of CPU and ready in 2.5-2.6 s with it).
Tests, the demo and the bench start dozens of nodes.

Contract:

- One archive per JVM and Kafka jars folder: its file name carries a digest of the ``java`` the nodes run (resolved
  path, size and modification time) and of the jars folder (path, inode and modification time), so a JVM never
  meets an archive dumped by another one or for other jars.  It lives in the jar cache, beside the jars.
- :func:`airmirror.devtools.local_kafka.class_archive_build.build_archive` makes it (``make setup`` runs it).
- :func:`java_options` adds ``-XX:SharedArchiveFile`` only when the archive exists.  The JVM checks it (JVM build,
  class path and its jars, flags) and, if it does not match, starts without it, with a warning in the node's log:
  an archive can make a start faster, never make one fail.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

from airmirror.devtools.local_kafka.jars import KAFKA_VERSION, jars_cache_root

DUMP_OPTION = "-XX:ArchiveClassesAtExit"


def archive_path(java: str, classpath: str) -> Path:
    """Where the archive for the JVM ``java`` and the jars of ``classpath`` (``DIR/*``) lives, whether or not it
    exists."""
    program, jars = Path(java).resolve(), Path(classpath.removesuffix("*")).resolve()
    executable, folder = program.stat(), jars.stat()
    identity = f"{program}|{executable.st_size}|{executable.st_mtime_ns}|{jars}|{folder.st_ino}|{folder.st_mtime_ns}"
    digest = hashlib.sha256(identity.encode()).hexdigest()[:16]
    return jars_cache_root() / f"kafka-node-{KAFKA_VERSION}-{digest}.jsa"


def java_options(java: str, classpath: str) -> list[str]:
    """``-XX:SharedArchiveFile=...`` when the archive for ``java`` and ``classpath`` exists, else nothing; nothing
    for a JVM or jars folder that is not there, nor while the JVMs dump an archive (``-XX:ArchiveClassesAtExit``
    in ``JDK_JAVA_OPTIONS``, as the build sets it): a JVM cannot dump one while it maps one."""
    if DUMP_OPTION in os.environ.get("JDK_JAVA_OPTIONS", ""):
        return []
    try:
        path = archive_path(java, classpath)
    except OSError:  # no such JVM or jars folder: the start itself will say so
        return []
    return [f"-XX:SharedArchiveFile={path}"] if path.is_file() else []
