"""Where the local Kafka nodes' class archive lives, and when a node is told to map it."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from airmirror.devtools.local_kafka.class_archive import archive_path, java_options
from airmirror.devtools.local_kafka.jars import KAFKA_VERSION


@pytest.fixture
def java_and_jars(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[str, str]:
    monkeypatch.setenv("AIRMIRROR_JARS_CACHE", str(tmp_path / "cache"))
    java = tmp_path / "jdk" / "bin" / "java"
    java.parent.mkdir(parents=True)
    java.write_bytes(b"a JVM")
    (tmp_path / "kafka" / "lib").mkdir(parents=True)
    return str(java), str(tmp_path / "kafka" / "lib" / "*")


def test_the_archive_is_named_for_the_kafka_version_in_the_jar_cache_and_stays_put(java_and_jars, tmp_path):
    java, classpath = java_and_jars
    path = archive_path(java, classpath)
    assert path.parent == tmp_path / "cache"
    assert path.name.startswith(f"kafka-node-{KAFKA_VERSION}-") and path.suffix == ".jsa"
    assert archive_path(java, classpath) == path


def test_another_jvm_or_a_recreated_jars_folder_gets_an_archive_of_its_own(java_and_jars, tmp_path):
    java, classpath = java_and_jars
    first = archive_path(java, classpath)
    other_java = tmp_path / "other-jdk" / "java"
    other_java.parent.mkdir()
    shutil.copy2(java, other_java)
    assert archive_path(str(other_java), classpath) != first
    jars = tmp_path / "kafka" / "lib"
    shutil.rmtree(jars)
    jars.mkdir()
    os.utime(jars, ns=(1, 1))  # a folder made again has another inode or time
    assert archive_path(java, classpath) != first


def test_a_node_maps_the_archive_only_when_it_exists(java_and_jars):
    java, classpath = java_and_jars
    assert java_options(java, classpath) == []
    path = archive_path(java, classpath)
    path.parent.mkdir(parents=True)
    path.write_bytes(b"dumped classes")
    assert java_options(java, classpath) == [f"-XX:SharedArchiveFile={path}"]


def test_a_jvm_that_dumps_an_archive_maps_none(java_and_jars, monkeypatch):
    java, classpath = java_and_jars
    path = archive_path(java, classpath)
    path.parent.mkdir(parents=True)
    path.write_bytes(b"dumped classes")
    monkeypatch.setenv("JDK_JAVA_OPTIONS", "-XX:TieredStopAtLevel=1 -XX:ArchiveClassesAtExit=/tmp/next.jsa")
    assert java_options(java, classpath) == []


def test_a_missing_jvm_or_jars_folder_maps_nothing(java_and_jars, tmp_path):
    java, classpath = java_and_jars
    assert java_options(str(tmp_path / "no-java"), classpath) == []
    assert java_options(java, str(tmp_path / "no-jars" / "*")) == []
