"""Shared fixtures: two real local Kafka clusters (KRaft, 127.0.0.1), real Spark, real databases."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient

from airmirror.devtools.local_kafka import (
    KAFKA_VERSION,
    LocalBroker,
    free_port,
    resolve_maven_artifacts,
    start_broker,
    stop_broker,
)
from airmirror.devtools.local_registry import LocalRegistry, start_registry, stop_registry
from airmirror.mm2.policy import DefaultReplicationPolicy, is_cycle

os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
# Every JVM the tests start (Kafka nodes, Spark drivers, MM2, registries) lives seconds to minutes on small loads:
# the client JIT alone nearly halves the CPU a start-up takes (a Spark driver's 14-15 s to 9, a Kafka node's 11 s
# to 7, measured on the 2-core VM), which the suite's two workers would otherwise wait for.  No collector is named:
# MM2's command names its own.  The code run is the same; `make bench`, the demo and production keep the JVMs'
# defaults.
os.environ.setdefault("JDK_JAVA_OPTIONS", "-XX:TieredStopAtLevel=1")


@pytest.fixture(scope="session")
def test_home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    home = tmp_path_factory.mktemp("airmirror-home")
    os.environ["AIRMIRROR_HOME"] = str(home)
    return home


@pytest.fixture(scope="session")
def clusters(test_home: Path) -> Iterator[dict[str, LocalBroker]]:
    """Clusters ``a`` and ``b``: two single-node brokers shared by the whole session (each pytest-xdist worker of
    ``make test`` is a session of its own, with its own pair)."""
    brokers: dict[str, LocalBroker] = {}
    try:
        for name in ("a", "b"):
            brokers[name] = start_broker(name, free_port(), home=test_home)
        yield brokers
    finally:
        for name in ("a", "b"):
            stop_broker(name, home=test_home)


@pytest.fixture(scope="session")
def registries(test_home: Path) -> Iterator[dict[str, LocalRegistry]]:
    """Schema registries ``a`` and ``b`` (Apicurio, Confluent's API), one per cluster of ``clusters``, shared by the
    session; ``b`` holds padding schemas, so that ids differ between them (see ``tests/registry_helpers.py``)."""
    from tests.registry_helpers import pad, registry_url

    started: dict[str, LocalRegistry] = {}
    try:
        for name in ("a", "b"):
            started[name] = start_registry(name, free_port(), test_home)
        pad(registry_url(started["b"]), "session")
        yield started
    finally:
        for name in started:
            stop_registry(name, test_home)


@pytest.fixture(autouse=True)
def no_heartbeats_topics_left_on_the_shared_source(request: pytest.FixtureRequest) -> Iterator[None]:
    """MM2 replicates heartbeats topics whatever ``topics`` says, so a heartbeats topic a test leaves on the
    shared cluster ``a`` would be copied by every later test's a->b flow (with that test's fresh metadata DB,
    against the shared batch log): after each test that used the shared clusters, such topics are deleted."""
    yield
    shared = request.node.funcargs.get("clusters")  # a test's own parameter may be named so too
    if not (isinstance(shared, dict) and isinstance(shared.get("a"), LocalBroker)):
        return
    admin = AdminClient({"bootstrap.servers": shared["a"].bootstrap})
    policy = DefaultReplicationPolicy()
    left = [
        t
        for t in admin.list_topics(timeout=30).topics
        if policy.is_heartbeats_topic(t) and not is_cycle(policy, "b", t)
    ]
    for future in admin.delete_topics(left, operation_timeout=30).values() if left else ():
        future.result()


@pytest.fixture
def prefix() -> str:
    """A unique topic prefix, so tests sharing the clusters never see each other's topics."""
    return f"t{uuid.uuid4().hex[:8]}"


@pytest.fixture
def spark(test_home: Path):
    """The active local Spark session (created on first use, and again if an Airflow task stopped it)."""
    from airmirror.replication.spark.session import spark_session

    return spark_session("local[2]", "airmirror-tests")


JAVA_TRANSLATE_SOURCE = Path(__file__).parent / "java" / "TranslateOffsets.java"
SLF4J_VERSION = "1.7.36"
"""The slf4j-api version connect-mirror-client depends on; the matching no-op binding keeps the run quiet."""

JavaTranslate = Callable[[str, str, str], dict[tuple[str, int], tuple[int, str]]]


def compile_java(source: Path, classpath: str, classes: Path) -> None:
    """``javac`` of ``source`` into ``classes``."""
    subprocess.run(["javac", "-cp", classpath, "-d", str(classes), str(source)], check=True, timeout=120)


def java_lines(classpath: str, main_class: str, *args: str) -> list[str]:
    """The lines ``java main_class args`` printed (it must exit 0)."""
    done = subprocess.run(
        ["java", "-cp", classpath, main_class, *args], capture_output=True, text=True, timeout=120, check=True
    )
    return done.stdout.splitlines()


@pytest.fixture(scope="session")
def java_translate_offsets(tmp_path_factory: pytest.TempPathFactory) -> JavaTranslate:
    """``(bootstrap, remote_alias, group) -> {(topic, partition): (offset, metadata)}`` as MM2's own Java client
    (``RemoteClusterUtils.translateOffsets`` of ``connect-mirror-client`` from Maven Central) computes it."""
    lib = resolve_maven_artifacts(
        [f"org.apache.kafka:connect-mirror-client:{KAFKA_VERSION}", f"org.slf4j:slf4j-nop:{SLF4J_VERSION}"],
        "connect-mirror-client",
    )
    classes = tmp_path_factory.mktemp("java-classes")
    classpath = f"{classes}:{lib}/*"
    compile_java(JAVA_TRANSLATE_SOURCE, classpath, classes)

    def translate(bootstrap: str, remote_alias: str, group: str) -> dict[tuple[str, int], tuple[int, str]]:
        offsets = {}
        for line in java_lines(classpath, "TranslateOffsets", bootstrap, remote_alias, group):
            topic, partition, offset, metadata = line.split(" ", 3)
            offsets[(topic, int(partition))] = (int(offset), metadata)
        return offsets

    return translate


SINGLE_BROKER_FACTORS = [
    "replication.factor = 1",
    "heartbeats.topic.replication.factor = 1",
    "checkpoints.topic.replication.factor = 1",
    "offset-syncs.topic.replication.factor = 1",
    "airmirror.batch.log.topic.replication.factor = 1",
]


def write_config(path: Path, clusters: dict[str, LocalBroker], body: str) -> Path:
    """An MM2 properties file for the test clusters plus ``body``: every replication factor is 1 (the clusters
    are single brokers), so ``body`` may override one."""
    lines = [f"clusters = {', '.join(clusters)}"]
    lines += [f"{name}.bootstrap.servers = {broker.bootstrap}" for name, broker in clusters.items()]
    lines += [*SINGLE_BROKER_FACTORS, f"airmirror.metadata.db.url = sqlite:///{path.parent / 'metadata.db'}", body]
    path.write_text("\n".join(lines) + "\n")
    return path
