"""Local Kafka broker lifecycle against real Apache Kafka JVMs (jars resolved with Maven on first use)."""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from airmirror.errors import InputError, ReplicationFailure
from airmirror.local_kafka import (
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
from tests.kafka_helpers import Record, create_topic, produce, read_partition

pytestmark = pytest.mark.integration

BROKER_NAMES = ("alpha", "beta")


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
        status = statuses[name]
        assert status.running and status.pid == broker.pid
        assert status.port == broker.port and status.bootstrap == f"127.0.0.1:{broker.port}"
        assert broker.data_dir == home / "kafka" / name / "data" and broker.log_file.is_file()


def test_start_is_idempotent(brokers: dict[str, LocalBroker], home: Path) -> None:
    alpha = brokers["alpha"]
    assert start_broker("alpha", alpha.port, home=home).pid == alpha.pid


def test_restart_keeps_data(brokers: dict[str, LocalBroker]) -> None:
    alpha = brokers["alpha"]
    create_topic(alpha.bootstrap, "durable")
    before = record(b"k1", b"before restart")
    produce(alpha.bootstrap, "durable", 0, [before])
    old_pid = alpha.pid
    alpha.restart()
    assert alpha.pid != old_pid
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
    assert not status.running and status.pid is None
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
