"""Download Java artifacts (Kafka itself, MirrorMaker 2 jars, ...) with Maven into a reusable cache.

Cache layout: ``{root}/{name}/lib/*.jar`` where ``root`` is ``$AIRMIRROR_JARS_CACHE`` or
``~/.cache/airmirror``.  A ``lib`` directory is only ever created by an atomic rename of a fully
resolved staging directory, so a concurrent or killed run never leaves a half-filled cache.
Resolutions of the same ``name`` are serialised with a file lock; leftovers of killed runs are
removed by the next resolution.
"""

from __future__ import annotations

import fcntl
import os
import re
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from importlib import resources
from pathlib import Path

from airmirror.errors import ReplicationFailure

KAFKA_VERSION = "4.1.1"
LOG4J_VERSION = "2.24.3"
KAFKA_COORDS = [
    f"org.apache.kafka:kafka_2.13:{KAFKA_VERSION}",
    f"org.apache.logging.log4j:log4j-slf4j-impl:{LOG4J_VERSION}",
]

_MANIFEST = ".airmirror-coords"
_STAGING_PREFIX = "tmp-"
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")
_COORD = re.compile(r"([A-Za-z0-9._-]+):([A-Za-z0-9._-]+):([A-Za-z0-9._-]+)")
_MAVEN_TIMEOUT_S = 900
_TAIL_LINES = 40


def jars_cache_root() -> Path:
    """Root of the jar cache: ``$AIRMIRROR_JARS_CACHE`` or ``~/.cache/airmirror`` (not created here)."""
    configured = os.environ.get("AIRMIRROR_JARS_CACHE")
    return Path(configured).expanduser().absolute() if configured else Path.home() / ".cache" / "airmirror"


def resolve_maven_artifacts(coords: list[str], name: str) -> Path:
    """Return a directory holding the jars of ``coords`` plus all their runtime dependencies.

    ``coords`` are ``group:artifact:version`` strings; ``name`` names the cache entry (use one that
    changes with the versions, e.g. ``kafka-4.1.1``).  The first call downloads with ``mvn``; later
    calls with the same coordinates return the cached directory without running Maven.  A cache entry
    resolved for different coordinates is replaced.  Raises ``ValueError`` for a malformed name or
    coordinate and ``ReplicationFailure`` when Maven is missing or fails (with Maven's output tail).
    """
    if not _NAME.fullmatch(name):
        raise ValueError(f"invalid jar cache name {name!r}: use letters, digits, '.', '_' and '-'")
    bad = [coord for coord in coords if not _COORD.fullmatch(coord)]
    if bad or not coords:
        raise ValueError(f"invalid Maven coordinates {bad or coords!r}: expected group:artifact:version")
    entry = jars_cache_root() / name
    lib = entry / "lib"
    manifest = "\n".join(coords) + "\n"
    if _manifest_of(lib) == manifest:
        return lib
    entry.mkdir(parents=True, exist_ok=True)
    with exclusive_lock(entry / ".lock"):
        if _manifest_of(lib) == manifest:
            return lib
        for leftover in entry.glob(f"{_STAGING_PREFIX}*"):
            shutil.rmtree(leftover, ignore_errors=True)
        staging = Path(tempfile.mkdtemp(prefix=_STAGING_PREFIX, dir=entry))
        try:
            _maven_copy_dependencies(coords, staging)
            (staging / "lib" / _MANIFEST).write_text(manifest)
            if lib.exists():
                lib.rename(staging / "replaced")
            (staging / "lib").rename(lib)
        finally:
            shutil.rmtree(staging, ignore_errors=True)
    return lib


def kafka_classpath() -> str:
    """Java classpath (``DIR/*``) of the Apache Kafka broker and tools, resolving the jars if needed."""
    return str(resolve_maven_artifacts(KAFKA_COORDS, f"kafka-{KAFKA_VERSION}") / "*")


def mm2_classpath() -> str:
    """Java classpath (``DIR/*``) of MirrorMaker 2 (``connect-mirror`` and its runtime, logging through log4j) at
    the brokers' Kafka version, resolving the jars if needed: the bench's MM2 and the MM2 compatibility tests."""
    coords = [
        f"org.apache.kafka:connect-mirror:{KAFKA_VERSION}",
        f"org.apache.logging.log4j:log4j-slf4j-impl:{LOG4J_VERSION}",
    ]
    return str(resolve_maven_artifacts(coords, f"mm2-{KAFKA_VERSION}") / "*")


def _manifest_of(lib: Path) -> str | None:
    try:
        return (lib / _MANIFEST).read_text()
    except FileNotFoundError:
        return None


@contextmanager
def exclusive_lock(path: Path) -> Iterator[None]:
    """Hold an exclusive ``flock`` on ``path`` (created if missing); released on exit or process death."""
    with open(path, "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _maven_copy_dependencies(coords: list[str], staging: Path) -> None:
    """Run Maven in ``staging`` so that ``staging/lib`` receives every runtime jar of ``coords``."""
    mvn = shutil.which("mvn")
    if mvn is None:
        raise ReplicationFailure(
            "Maven ('mvn') is not on PATH; it is needed once to download the jars of "
            f"{', '.join(coords)}. Install Maven 3 or pre-fill the cache {jars_cache_root()}"
        )
    pom = staging / "pom.xml"
    pom.write_text(_render_pom(coords))
    command = [
        mvn,
        "-B",
        "-q",
        "-f",
        str(pom),
        "dependency:copy-dependencies",
        "-DincludeScope=runtime",
        f"-DoutputDirectory={staging / 'lib'}",
    ]
    try:
        done = subprocess.run(
            command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=_MAVEN_TIMEOUT_S
        )
    except subprocess.TimeoutExpired as exc:
        raise ReplicationFailure(
            f"Maven did not finish resolving {', '.join(coords)} within {_MAVEN_TIMEOUT_S}s"
        ) from exc
    jars = list((staging / "lib").glob("*.jar"))
    if done.returncode != 0 or not jars:
        tail = "\n".join(done.stdout.splitlines()[-_TAIL_LINES:])
        raise ReplicationFailure(
            f"Maven failed (exit {done.returncode}) to resolve {', '.join(coords)}; last output:\n{tail}"
        )


def _render_pom(coords: list[str]) -> str:
    template = resources.files(__package__).joinpath("kafka-pom.xml").read_text()
    dependencies = "\n".join(
        f"    <dependency><groupId>{group}</groupId><artifactId>{artifact}</artifactId>"
        f"<version>{version}</version></dependency>"
        for group, artifact, version in (coord.split(":") for coord in coords)
    )
    return template.replace("@DEPENDENCIES@", dependencies)
