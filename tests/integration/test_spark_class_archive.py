"""A real class-data-sharing archive of the Spark driver, dumped by a real JVM and mapped by the next one."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from airmirror.replication.spark import class_archive, class_archive_build


@pytest.fixture
def home(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    monkeypatch.setenv("HOME", str(tmp_path))
    return tmp_path


def test_a_real_dump_is_mapped_by_the_next_driver(home: Path) -> None:
    """Builds a real archive (a Spark session in a child process), then starts a session that maps it."""
    path = class_archive_build.build_archive()
    assert path is not None and path.is_file() and path.stat().st_size > 1_000_000
    assert sorted(p.name for p in path.parent.iterdir()) == sorted([path.name, path.with_suffix(".pyspark").name])
    assert class_archive_build.build_archive() == path  # already there: nothing rebuilt
    session = (
        "from airmirror.replication.spark.session import spark_session\n"
        "s = spark_session('local[1]', 'archive check')\n"
        "print(s.sparkContext.getConf().get('spark.driver.extraJavaOptions'))\n"
        "print(s.sparkContext.parallelize([1, 2], 2).map(lambda x: x * 2).sum())\n"
    )
    env = {**os.environ, "HOME": str(home), "PYSPARK_PYTHON": sys.executable}
    out = subprocess.run(
        [sys.executable, "-c", session], capture_output=True, text=True, env=env, timeout=300, check=True
    ).stdout
    assert f"-XX:SharedArchiveFile={path}" in out
    assert out.strip().endswith("6")


def test_an_archive_the_jvm_cannot_use_leaves_stdout_alone(home: Path) -> None:
    """A mismatched archive (here: another class path) makes the JVM warn; the warning goes to stderr, never to
    the stdout the driver JVM shares with the CLI's ``--json`` output."""
    path = class_archive_build.build_archive()
    assert path is not None
    options = class_archive.driver_java_options("").split()
    java = class_archive.java_executable()
    assert java is not None
    done = subprocess.run(
        [str(java), *options, "-cp", str(home), "-version"], capture_output=True, text=True, timeout=60, check=True
    )
    assert done.stdout == ""
    assert "shared archive" in done.stderr
