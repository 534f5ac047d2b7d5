"""The Spark driver's class-data-sharing archive: one per JVM and PySpark install, used only once it exists."""

from __future__ import annotations

from pathlib import Path

import pytest

from airmirror.replication.spark import class_archive, class_archive_build
from airmirror.replication.spark.defaults import DRIVER_JAVA_OPTIONS, copy_job_conf


@pytest.fixture
def home(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    monkeypatch.setenv("HOME", str(tmp_path))
    return tmp_path


def fake_java(folder: Path) -> Path:
    java = folder / "bin" / "java"
    java.parent.mkdir(parents=True)
    java.write_text("#!/bin/sh\n")
    java.chmod(0o755)
    return folder


def test_the_archive_is_named_after_the_jvm_pyspark_launches(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("JAVA_HOME", str(fake_java(home / "jdk-a")))
    first = class_archive.archive_path()
    monkeypatch.setenv("JAVA_HOME", str(fake_java(home / "jdk-b")))
    second = class_archive.archive_path()
    assert first is not None and second is not None
    assert first.parent == second.parent == home / ".cache" / "airmirror"
    assert first != second
    assert class_archive.archive_path() == second


def test_no_java_no_archive(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("JAVA_HOME", str(home / "missing"))
    assert class_archive.archive_path() is None
    assert class_archive.driver_java_options("-Xmx1g") == "-Xmx1g"
    assert class_archive_build.build_archive() is None


def test_the_driver_maps_the_archive_only_once_it_exists(home: Path) -> None:
    path = class_archive.archive_path()
    assert path is not None
    assert copy_job_conf()["spark.driver.extraJavaOptions"] == DRIVER_JAVA_OPTIONS
    path.parent.mkdir(parents=True)
    path.write_bytes(b"archive")
    options = copy_job_conf()["spark.driver.extraJavaOptions"]
    assert options == f"{DRIVER_JAVA_OPTIONS} -XX:SharedArchiveFile={path} -Xlog:disable -Xlog:all=warning:stderr"
    assert copy_job_conf({"spark.driver.extraJavaOptions": "-Xmx2g"})["spark.driver.extraJavaOptions"] == "-Xmx2g"


def test_a_failed_dump_leaves_no_archive_and_no_partial_file(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(class_archive_build, "MODULE", "airmirror.no_such_module")
    with pytest.raises(RuntimeError, match="was not dumped"):
        class_archive_build.build_archive()
    folder = home / ".cache" / "airmirror"
    assert not folder.exists() or list(folder.iterdir()) == []


def test_a_build_removes_the_archives_of_pyspark_installs_that_are_gone_or_replaced(
    home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A clean clone at the same path is another install: its predecessor's archive goes, the live one stays."""
    folder = home / ".cache" / "airmirror"
    folder.mkdir(parents=True)
    live_jars, replaced_jars = home / "live" / "jars", home / "clone" / "jars"
    live_jars.mkdir(parents=True)
    replaced_jars.mkdir(parents=True)
    owners = {
        "live": class_archive_build.install_identity(live_jars),
        "gone": class_archive_build.install_identity(live_jars).replace(str(live_jars), str(home / "deleted" / "jars")),
        "replaced": class_archive_build.install_identity(replaced_jars),
        "legacy": str(live_jars),
    }
    replaced_jars.rmdir()
    (home / "placeholder").mkdir()  # keeps the removed folder's inode from being handed out again at once
    replaced_jars.mkdir()
    for name, owner in owners.items():
        (folder / f"spark-driver-4.0.0-{name}.jsa").write_bytes(b"archive")
        (folder / f"spark-driver-4.0.0-{name}.pyspark").write_text(owner)
    monkeypatch.setattr(class_archive_build, "MODULE", "airmirror.no_such_module")
    with pytest.raises(RuntimeError, match="was not dumped"):
        class_archive_build.build_archive()
    assert sorted(p.name for p in folder.iterdir()) == [
        "spark-driver-4.0.0-live.jsa",
        "spark-driver-4.0.0-live.pyspark",
    ]
