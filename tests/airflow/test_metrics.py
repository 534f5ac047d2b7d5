"""airmirror's metrics through Airflow's StatsD layer, from a real ``dag.test()`` run against the real test
clusters, received by a UDP listener in the test (InfluxDB-style tags on)."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator

import pytest

from airmirror.mm2.wire_formats import Heartbeat
from tests.conftest import write_config
from tests.kafka_helpers import Record, create_topic, produce, recent_ms, sample_records

pytestmark = pytest.mark.integration


class StatsdListener(threading.Thread):
    """Collects every StatsD line sent to 127.0.0.1:``port``."""

    def __init__(self) -> None:
        super().__init__(daemon=True)
        self.socket = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.socket.bind(("127.0.0.1", 0))
        self.socket.settimeout(0.2)
        self.port = self.socket.getsockname()[1]
        self.lines: list[str] = []
        self.halt = threading.Event()

    def run(self) -> None:
        while not self.halt.is_set():
            try:
                self.lines += self.socket.recv(65536).decode().splitlines()
            except TimeoutError:
                continue

    def metrics(self, name: str) -> list[tuple[dict[str, str], float, str]]:
        """``(tags, value, kind)`` of every line of metric ``airflow.{name}``."""
        found = []
        for line in self.lines:
            head, _, rest = line.partition(":")
            metric, *tags = head.split(",")
            if metric == f"airflow.{name}":
                value, _, kind = rest.partition("|")
                found.append((dict(tag.split("=", 1) for tag in tags), float(value), kind))
        return found


@pytest.fixture
def statsd(monkeypatch) -> Iterator[StatsdListener]:
    """StatsD on, aimed at the listener, set up as an Airflow task worker sets up its metrics at start."""
    from airflow.sdk.observability import stats
    from airflow.sdk.observability.metrics.stats_utils import get_stats_factory

    listener = StatsdListener()
    listener.start()
    for key, value in {
        "STATSD_ON": "True",
        "STATSD_HOST": "127.0.0.1",
        "STATSD_PORT": str(listener.port),
        "STATSD_PREFIX": "airflow",
        "STATSD_INFLUXDB_ENABLED": "True",
    }.items():
        monkeypatch.setenv(f"AIRFLOW__METRICS__{key}", value)
    stats.initialize(factory=get_stats_factory(), export_legacy_names=False)
    try:
        yield listener
    finally:
        listener.halt.set()
        listener.join()
        monkeypatch.undo()
        stats.initialize(factory=get_stats_factory(), export_legacy_names=False)


def test_a_run_sends_record_count_lag_and_latency_tagged_like_mm2(
    airflow_db, clusters, prefix, tmp_path, dag_bag_for, statsd
):
    a = clusters["a"].bootstrap
    create_topic(a, f"{prefix}.metered", 2)
    produce(a, f"{prefix}.metered", 0, sample_records(30, "p0"))
    produce(a, f"{prefix}.metered", 1, sample_records(12, "p1"))
    beat = Heartbeat("x", "a", recent_ms())
    create_topic(a, f"{prefix}.heartbeats")
    produce(a, f"{prefix}.heartbeats", 0, [Record(beat.key(), beat.value(), (), beat.timestamp)])
    config = write_config(
        tmp_path / "mm2.properties", clusters, f"a->b.enabled = true\ntopics = {prefix}.*\nairmirror.task.retries = 0"
    )

    run = dag_bag_for(config).dags["airmirror__a__b"].test()

    assert {ti.task_id: ti.state for ti in run.get_task_instances()}["record_batch"] == "success"
    counts = [
        (tags, value)
        for tags, value, kind in statsd.metrics("airmirror.record-count")
        if tags.get("topic") == f"{prefix}.metered"
    ]
    assert sum(value for _, value in counts) == 42
    assert {(tags["partition"], value) for tags, value in counts} == {("0", 30), ("1", 12)}
    assert all((tags["source"], tags["target"]) == ("a", "b") for tags, _ in counts)
    lags = {
        tags["partition"]: value
        for tags, value, kind in statsd.metrics("airmirror.lag-records")
        if tags.get("topic") == f"{prefix}.metered"
    }
    assert lags == {"0": 0, "1": 0}
    assert statsd.metrics("airmirror.replication-latency-ms"), "no replication latency sent"
    assert [kind for _, _, kind in statsd.metrics("airmirror.batch-duration-ms")] == ["ms"]
