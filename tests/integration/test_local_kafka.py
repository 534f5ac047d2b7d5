"""Local Kafka cluster lifecycle against real Apache Kafka JVMs (jars resolved with Maven on first use)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic, ResourceType

from airmirror.devtools.local_kafka import (
    BrokerStatus,
    LocalBroker,
    airmirror_home,
    broker_status,
    free_port,
    kill_broker,
    resolve_maven_artifacts,
    start_broker,
    stop_broker,
)
from airmirror.devtools.local_kafka.jars import kafka_classpath
from airmirror.devtools.local_kafka.nodes import java_executable, port_is_free
from airmirror.errors import InputError, ReplicationFailure
from tests.kafka_helpers import Record, create_topic, produce, read_partition

pytestmark = pytest.mark.integration

BROKER_NAMES = ("alpha", "beta")
TRIO_CONFIG = {"message.max.bytes": "2000000", "unclean.leader.election.enable": "true"}


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    home = tmp_path_factory.mktemp("airmirror-home")
    yield home
    for status in broker_status(home):
        stop_broker(status.name, home=home)


@pytest.fixture(scope="module")
def ports() -> dict[str, int]:
    return {name: free_port() for name in BROKER_NAMES}


@pytest.fixture
def brokers(home: Path, ports: dict[str, int]) -> dict[str, LocalBroker]:
    """Both brokers, running (started once per module; later starts are idempotent no-ops)."""
    return {name: start_broker(name, ports[name], home=home) for name in BROKER_NAMES}


@pytest.fixture(scope="module")
def trio(home: Path) -> LocalBroker:
    """A cluster of three nodes started with the CLI (``TRIO_CONFIG`` as ``--broker-config``), and its handle."""
    port = free_port_run(3)
    settings = [arg for key, value in TRIO_CONFIG.items() for arg in ("--broker-config", f"{key}={value}")]
    started = local_kafka(home, "start", "trio", "--port", str(port), "--brokers", "3", *settings)
    assert started.returncode == 0, started.stderr
    assert started.stdout.startswith(f"kafka 'trio' running on 127.0.0.1:{port},127.0.0.1:{port + 1},")
    return start_broker("trio", port, brokers=3, broker_config=TRIO_CONFIG, home=home)


def local_kafka(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """``airmirror local-kafka ARGS`` with ``home`` as ``$AIRMIRROR_HOME``."""
    return subprocess.run(
        [sys.executable, "-m", "airmirror.cli", "local-kafka", *args],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "AIRMIRROR_HOME": str(home)},
    )


def free_port_run(count: int) -> int:
    """The first of ``count`` consecutive free ports."""
    while True:
        first = free_port()
        if first + count <= 65536 and all(port_is_free(port) for port in range(first + 1, first + count)):
            return first


def record(key: bytes, value: bytes) -> Record:
    return Record(key, value, (), int(time.time() * 1000))


def write_and_read_back(bootstrap: str, topic: str, *records: Record) -> list[Record]:
    """Produce ``records`` to partition 0 of ``topic`` and return everything the partition holds."""
    produce(bootstrap, topic, 0, list(records))
    return [found for _, found in read_partition(bootstrap, topic, 0)]


def status_by_name(home: Path) -> dict[str, BrokerStatus]:
    return {status.name: status for status in broker_status(home)}


def test_each_broker_serves_produce_and_consume(brokers: dict[str, LocalBroker]) -> None:
    for name, broker in brokers.items():
        create_topic(broker.bootstrap, "hello")
        sent = record(b"key", name.encode())
        assert write_and_read_back(broker.bootstrap, "hello", sent) == [sent]


def test_status_shows_both_running(brokers: dict[str, LocalBroker], home: Path) -> None:
    statuses = status_by_name(home)
    for name, broker in brokers.items():
        status, files = statuses[name], home / "kafka" / name
        assert status.running and status.nodes[0].pid == int((files / "broker.pid").read_text())
        assert status.port == broker.port and status.bootstrap == f"127.0.0.1:{broker.port}"
        assert (files / "data" / "meta.properties").is_file() and (files / "server.log").is_file()
        assert json.loads((files / "meta.json").read_text())["port"] == broker.port


def test_start_is_idempotent(brokers: dict[str, LocalBroker], home: Path) -> None:
    alpha = brokers["alpha"]
    assert start_broker("alpha", alpha.port, home=home).status() == alpha.status()


def test_restart_keeps_data(brokers: dict[str, LocalBroker]) -> None:
    alpha = brokers["alpha"]
    create_topic(alpha.bootstrap, "durable")
    before = record(b"k1", b"before restart")
    produce(alpha.bootstrap, "durable", 0, [before])
    old_pid = alpha.status().nodes[0].pid
    alpha.restart()
    assert alpha.status().nodes[0].pid not in (None, old_pid)
    after = record(b"k2", b"after restart")
    assert write_and_read_back(alpha.bootstrap, "durable", after) == [before, after]


def test_killed_broker_starts_again_with_its_data(brokers: dict[str, LocalBroker], home: Path) -> None:
    beta = brokers["beta"]
    create_topic(beta.bootstrap, "crash")
    before = record(b"k", b"survives SIGKILL")
    produce(beta.bootstrap, "crash", 0, [before])
    kill_broker("beta", home=home)
    assert not status_by_name(home)["beta"].running
    revived = start_broker("beta", beta.port, home=home)
    after = record(b"k", b"after the crash")
    assert write_and_read_back(revived.bootstrap, "crash", after) == [before, after]


def test_stop_shows_not_running(brokers: dict[str, LocalBroker], home: Path) -> None:
    beta = brokers["beta"]
    assert beta.stop() is True
    status = status_by_name(home)["beta"]
    assert not status.running and status.nodes[0].pid is None
    assert status_by_name(home)["alpha"].running
    assert not (home / "kafka" / "beta" / "broker.pid").exists()
    assert stop_broker("beta", home=home) is False


def test_stop_or_kill_unknown_broker_is_a_no_op(home: Path) -> None:
    assert stop_broker("nobody", home=home) is False
    kill_broker("nobody", home=home)
    assert "nobody" not in status_by_name(home)


@pytest.mark.parametrize("name", ["", "a/b", "..", "with space", "dot.ted"])
def test_bad_name_is_input_error(name: str, home: Path) -> None:
    with pytest.raises(InputError, match="invalid broker name"):
        start_broker(name, free_port(), home=home)
    with pytest.raises(InputError, match="invalid broker name"):
        stop_broker(name, home=home)


def test_port_in_use_is_input_error(brokers: dict[str, LocalBroker], home: Path) -> None:
    with socket.socket() as squatter:
        squatter.bind(("127.0.0.1", 0))
        squatter.listen()
        port = squatter.getsockname()[1]
        with pytest.raises(InputError, match=f"port {port} is already in use by another process"):
            start_broker("gamma", port, home=home)
    alpha_port = brokers["alpha"].port
    with pytest.raises(InputError, match=f"port {alpha_port} is already in use by airmirror broker 'alpha'"):
        start_broker("gamma", alpha_port, home=home)
    assert "gamma" not in status_by_name(home)


def test_running_broker_on_another_port_is_input_error(brokers: dict[str, LocalBroker], home: Path) -> None:
    with pytest.raises(InputError, match="already running on port"):
        start_broker("alpha", free_port(), home=home)


def test_port_range_past_65535_is_input_error(home: Path) -> None:
    with pytest.raises(InputError, match="invalid broker port 65535: expected an integer between 1 and 65534"):
        start_broker("wide", 65535, brokers=2, home=home)


def test_meta_json_of_a_broker_from_before_clusters_still_starts(home: Path) -> None:
    old = start_broker("legacy", free_port(), home=home)
    create_topic(old.bootstrap, "kept")
    before = record(b"k", b"before the upgrade")
    produce(old.bootstrap, "kept", 0, [before])
    old.stop()
    meta_file = home / "kafka" / "legacy" / "meta.json"
    meta = json.loads(meta_file.read_text())
    meta["controller_port"] = meta.pop("controller_ports")[0]
    del meta["broker_config"]
    meta_file.write_text(json.dumps(meta))
    after = record(b"k", b"after the upgrade")
    assert write_and_read_back(start_broker("legacy", old.port, home=home).bootstrap, "kept", after) == [before, after]
    old.stop()


@pytest.mark.parametrize(
    ("flags", "named"),
    [
        (["--broker-config", "offsets.retention.minutes"], "argument --broker-config: 'offsets.retention.minutes'"),
        (["--broker-config", "=1"], "argument --broker-config: '=1'"),
        (["--broker-config", "bad key=1"], "--broker-config key 'bad key'"),
        (["--broker-config", "node.id=7"], "--broker-config node.id"),
        (["--brokers", "0"], "argument --brokers: '0'"),
    ],
    ids=["no-equals", "no-key", "bad-key", "managed-key", "no-brokers"],
)
def test_bad_start_flag_exits_2_naming_it(home: Path, flags: list[str], named: str) -> None:
    result = local_kafka(home, "start", "flawed", "--port", str(free_port()), *flags)
    assert result.returncode == 2 and named in result.stderr, result.stderr
    assert "flawed" not in status_by_name(home)


def test_busy_port_of_a_node_exits_2_naming_it(home: Path) -> None:
    with socket.socket() as squatter:
        squatter.bind(("127.0.0.1", 0))
        squatter.listen()
        busy = squatter.getsockname()[1]
        first = busy - 1 if port_is_free(busy - 1) else busy
        result = local_kafka(home, "start", "crowded", "--port", str(first), "--brokers", "3")
    assert result.returncode == 2, result.stderr
    assert f"port {busy} is already in use by another process" in result.stderr
    assert "crowded" not in status_by_name(home)


def replicated_topic(cluster: LocalBroker, topic: str) -> None:
    """Create ``topic``: one partition with a replica on each of three nodes, two of them in sync for a write."""
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    admin.create_topics([NewTopic(topic, 1, 3, config={"min.insync.replicas": "2"})])[topic].result()


def leader_and_isr(cluster: LocalBroker, topic: str) -> tuple[int, list[int]]:
    """The leader and the in-sync replicas (node ids) of partition 0 of ``topic``."""
    metadata = AdminClient({"bootstrap.servers": cluster.bootstrap}).list_topics(topic, timeout=10)
    partition = metadata.topics[topic].partitions[0]
    return partition.leader, sorted(partition.isrs)


def test_cluster_serves_a_topic_replicated_on_every_node(trio: LocalBroker) -> None:
    replicated_topic(trio, "triple")
    sent = record(b"k", b"on three nodes")
    assert write_and_read_back(trio.bootstrap, "triple", sent) == [sent]
    assert leader_and_isr(trio, "triple")[1] == [1, 2, 3]


def test_status_lists_every_node_of_a_cluster(trio: LocalBroker, home: Path) -> None:
    status = status_by_name(home)["trio"]
    assert status.running and status.bootstrap == trio.bootstrap
    assert [(node.node_id, node.port - trio.port) for node in status.nodes] == [(1, 0), (2, 1), (3, 2)]
    assert len({port for node in status.nodes for port in (node.port, node.controller_port)}) == 6
    listed = local_kafka(home, "status").stdout.splitlines()
    line = next(line for line in listed if line.startswith("trio "))
    assert trio.bootstrap in line
    assert line.endswith(", ".join(f"node {node.node_id} running (pid {node.pid})" for node in status.nodes))


def test_broker_config_reaches_every_node(trio: LocalBroker, home: Path) -> None:
    admin = AdminClient({"bootstrap.servers": trio.bootstrap})
    for node_id in trio.node_ids:
        properties = (home / "kafka" / "trio" / f"node-{node_id}" / "server.properties").read_text().splitlines()
        assert "message.max.bytes=2000000" in properties
        resource = ConfigResource(ResourceType.BROKER, str(node_id))
        configs = admin.describe_configs([resource])[resource].result()
        assert {key: configs[key].value for key in TRIO_CONFIG} == TRIO_CONFIG


def test_killed_leader_fails_over_and_its_node_rejoins(trio: LocalBroker) -> None:
    replicated_topic(trio, "failover")
    first = record(b"k", b"before the crash")
    produce(trio.bootstrap, "failover", 0, [first])
    leader, _ = leader_and_isr(trio, "failover")
    trio.kill_node(leader)
    assert not trio.status().nodes[leader - 1].running
    second = record(b"k", b"after the crash")
    assert write_and_read_back(trio.bootstrap, "failover", second) == [first, second]
    assert leader_and_isr(trio, "failover")[0] not in (leader, -1)
    trio.start_node(leader)
    assert trio.status().running
    deadline = time.monotonic() + 60
    while leader not in leader_and_isr(trio, "failover")[1]:
        assert time.monotonic() < deadline, f"node {leader} did not rejoin the in-sync replicas"
        time.sleep(0.5)
    third = record(b"k", b"after the rejoin")
    assert write_and_read_back(trio.bootstrap, "failover", third) == [first, second, third]


def test_running_cluster_keeps_its_settings(trio: LocalBroker, home: Path) -> None:
    with pytest.raises(InputError, match="running with other --broker-config settings"):
        start_broker("trio", trio.port, brokers=3, home=home)
    with pytest.raises(InputError, match="created with --brokers 3, not 1"):
        start_broker("trio", trio.port, home=home)
    with pytest.raises(InputError, match="has no node 4"):
        trio.kill_node(4)


def test_cli_stop_stops_every_node_of_a_cluster(trio: LocalBroker, home: Path) -> None:
    stopped = local_kafka(home, "stop", "trio")
    assert stopped.returncode == 0 and stopped.stdout.strip() == "kafka 'trio' stopped"
    listed = local_kafka(home, "status").stdout.splitlines()
    assert next(line for line in listed if line.startswith("trio ")).endswith(
        "node 1 stopped, node 2 stopped, node 3 stopped"
    )
    assert not list((home / "kafka" / "trio").glob("node-*/broker.pid"))


def test_airmirror_home_defaults_to_dot_airmirror(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("AIRMIRROR_HOME", raising=False)
    monkeypatch.chdir(tmp_path)
    assert airmirror_home() == tmp_path / ".airmirror" and airmirror_home().is_dir()
    monkeypatch.setenv("AIRMIRROR_HOME", str(tmp_path / "elsewhere"))
    assert airmirror_home() == tmp_path / "elsewhere" and airmirror_home().is_dir()


def test_missing_maven_is_replication_failure(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AIRMIRROR_JARS_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(ReplicationFailure, match="'mvn'"):
        resolve_maven_artifacts(["org.apache.kafka:kafka-clients:4.1.1"], "clients")


def test_maven_failure_leaves_no_cache_entry(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AIRMIRROR_JARS_CACHE", str(tmp_path))
    with pytest.raises(ReplicationFailure, match="airmirror-no-such-artifact"):
        resolve_maven_artifacts(["org.apache.kafka:airmirror-no-such-artifact:0.0.1"], "missing")
    assert sorted(path.name for path in (tmp_path / "missing").iterdir()) == [".lock"]


def test_malformed_coordinates_are_rejected() -> None:
    with pytest.raises(ValueError, match="group:artifact:version"):
        resolve_maven_artifacts(["org.apache.kafka:kafka-clients"], "clients")


def test_the_class_archive_build_dumps_classes_that_a_kafka_jvm_maps(tmp_path: Path) -> None:
    """The builder's child dumps an archive from a real node, and a JVM on the Kafka class path maps it
    (``-Xshare:on`` fails the JVM when it cannot)."""
    archive = tmp_path / "kafka-node.jsa"
    dumped = subprocess.run(
        [sys.executable, "-m", "airmirror.devtools.local_kafka.class_archive_build", "--dump", str(archive)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert dumped.returncode == 0, dumped.stderr[-4000:]
    assert archive.stat().st_size > 0
    java = [java_executable(), "-Xshare:on", f"-XX:SharedArchiveFile={archive}", "-cp", kafka_classpath()]
    mapped = subprocess.run(
        [*java, "kafka.tools.StorageTool", "random-uuid"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert mapped.returncode == 0, mapped.stdout + mapped.stderr
