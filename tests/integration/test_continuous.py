"""``airmirror replicate --continuous`` against real clusters while a producer writes: a stream batch recorded as it
goes, a ``kill -9`` of the whole job mid-stream, a restart that closes the dead run's stream exactly once and
streams on, broker restarts, and a SIGTERM that ends the run once its stream is committed.  The target must equal
the source record for record."""

from __future__ import annotations

import gc
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient

from airmirror.config import FlowConfig, load_config
from airmirror.kafka.clients import ClusterAdmin
from airmirror.model import BatchState, NoJobYet
from airmirror.replication import continuous
from airmirror.replication.options import BatchOptions
from airmirror.replication.pipeline import plan_batch, sync_flow_topics
from airmirror.replication.spark.copy_job import plan_copy_tasks
from airmirror.replication.spark.progress import supersede_jobs
from airmirror.replication.spark.task_writer import run_attempt
from airmirror.store import MetadataStore
from tests.conftest import write_config
from tests.kafka_helpers import (
    SteadyProducer,
    create_topic,
    delete_topic_and_wait,
    produce,
    records_by_partition,
    records_of,
    sample_records,
)
from tests.polling import wait_until
from tests.spark_workers import python_workers_of

pytestmark = [pytest.mark.integration, pytest.mark.slow]

PARTITIONS = 3
WIDE_PARTITIONS = 300
"""The partitions of the streaming test's topic: a flow of hundreds of partitions through every kill."""


_started: list[subprocess.Popen] = []
"""The runs :func:`start_continuous` started in the current test."""


@pytest.fixture(autouse=True)
def no_run_outlives_its_test() -> Iterator[None]:
    """A test that fails half-way leaves no ``replicate --continuous`` (and its Spark) running: kill -9 it."""
    yield
    while _started:
        run = _started.pop()
        if run.poll() is None:
            os.killpg(run.pid, signal.SIGKILL)
            run.communicate()


def start_continuous(config: Path, *extra: str) -> subprocess.Popen:
    _started.append(
        run := subprocess.Popen(
            [sys.executable, "-m", "airmirror.cli", "replicate", str(config), "--flow", "a->b", "--continuous", *extra],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )
    )
    return run


def finished(run: subprocess.Popen, timeout: float = 300) -> tuple[str, str]:
    """The output and errors of ``run`` once it exits; a run still going after ``timeout`` is killed and the test
    fails with the end of its log, so that the cause of a hang is on record."""
    try:
        return run.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(run.pid, signal.SIGKILL)
        _, errors = run.communicate()
        pytest.fail(f"the run did not end within {timeout:.0f}s; the end of its log:\n{errors[-8000:]}")


def last_committed(store: MetadataStore, flow: str) -> int:
    """The id of the flow's newest committed batch (0 before the first)."""
    return max((b.id for b in store.batches(flow) if b.state == BatchState.COMMITTED), default=0)


def live_flow(
    clusters, tmp_path: Path, prefix: str, topic: str, partitions: int = PARTITIONS
) -> tuple[Path, FlowConfig, MetadataStore]:
    """A flow of ``topic`` (created with ``partitions`` partitions) copied in chunks of 500 records, and its
    opened store."""
    create_topic(clusters["a"].bootstrap, topic, partitions)
    config = write_config(
        tmp_path / "mm2.properties",
        clusters,
        f"a->b.enabled = true\ntopics = {prefix}.*\nairmirror.spark.master = local[2]\n"
        "airmirror.transaction.max.records = 500",
    )
    flow = load_config(config).flow("a->b")
    return config, flow, MetadataStore.open(flow.metadata_db_url)


def copied_so_far(store: MetadataStore, flow: str, topic: str) -> int:
    """The offsets of ``topic`` the metadata DB has recorded as copied (the sum of its cursors)."""
    return sum(c for k, c in store.cursors(flow).items() if k.topic == topic)


def streaming(store: MetadataStore, flow: str) -> bool:
    """Whether the flow's RUNNING batch is a stream batch."""
    batch = store.unfinished_batch(flow)
    return batch is not None and bool(batch.params.get("stream"))


@pytest.mark.proves("streaming rule 1", "streaming rule 3", "streaming rule 4", "streaming rule 5")
def test_streaming_run_records_as_it_goes_survives_kill_9_and_stops_on_sigterm(clusters, prefix, tmp_path):
    """A live run of a topic of hundreds of partitions streams: while its one stream batch is RUNNING, the DB's
    cursors advance (recorded as it goes).  A kill -9 of its copy tasks' Python workers mid-stream: the stream
    goes on.  A kill -9 of the whole run mid-stream, then a new run: the dead run's stream is closed exactly once,
    the new one streams on, and a SIGTERM ends it once its stream is committed."""
    a, b = clusters["a"].bootstrap, clusters["b"].bootstrap
    topic = f"{prefix}.wide"
    config, flow, store = live_flow(clusters, tmp_path, prefix, topic, WIDE_PARTITIONS)
    producer = SteadyProducer(a, topic, WIDE_PARTITIONS)
    producer.start()
    try:
        first = start_continuous(config)
        wait_until(
            lambda: copied_so_far(store, flow.name, topic) > 0 or first.poll() is not None, 300, "progress recorded"
        )
        assert first.poll() is None, first.communicate()
        workers = python_workers_of(first)
        assert workers  # the streaming copy tasks
        for worker in workers:
            worker.kill()  # kill -9 of the copy tasks mid-stream: Spark runs them again, which fence and continue
        recorded = copied_so_far(store, flow.name, topic)
        wait_until(
            lambda: copied_so_far(store, flow.name, topic) > recorded, 120, "progress recorded after the workers died"
        )
        assert first.poll() is None, first.communicate()
        assert streaming(store, flow.name) and last_committed(store, flow.name) == 0  # recorded, and still one stream
        os.killpg(first.pid, signal.SIGKILL)
        first.wait(timeout=60)
        killed_stream = store.unfinished_batch(flow.name).id

        second = start_continuous(config)
        wait_until(
            lambda: last_committed(store, flow.name) == killed_stream or second.poll() is not None,
            300,
            "the killed stream closed",
        )
        wait_until(lambda: streaming(store, flow.name) or second.poll() is not None, 300, "a new stream")
        assert second.poll() is None, second.communicate()
        after_restart = copied_so_far(store, flow.name, topic)
        wait_until(
            lambda: copied_so_far(store, flow.name, topic) > after_restart, 60, "progress recorded after the restart"
        )
    finally:
        producer.stop()
    sent = producer.sent
    wait_until(
        lambda: copied_so_far(store, flow.name, topic) >= sent or second.poll() is not None,
        300,
        "the target to catch up",
    )
    second.send_signal(signal.SIGTERM)
    output, errors = finished(second)

    assert second.returncode == 0, (output, errors)
    assert "stopped by signal" in output
    assert store.unfinished_batch(flow.name) is None
    committed = [batch for batch in store.batches(flow.name) if batch.state == BatchState.COMMITTED]
    assert sum(batch.records for batch in committed) == sent
    store.dispose()
    source, target = (
        records_by_partition(a, topic, WIDE_PARTITIONS),
        records_by_partition(b, f"a.{topic}", WIDE_PARTITIONS),
    )
    assert target == source
    assert sum(len(records) for records in target.values()) == sent


@pytest.mark.proves("task_writer rule 16", "streaming rule 4")
def test_a_topic_deleted_mid_stream_stops_alone(clusters, prefix, tmp_path):
    """A source topic deleted under a stream stops alone: the same stream batch goes on copying the other topic
    past topic sync's next look (no restart of the stream), and ends the deleted topic's range where its copy
    got to.  Both targets then hold exactly what was sent to them."""
    a, b = clusters["a"].bootstrap, clusters["b"].bootstrap
    kept, gone = f"{prefix}.kept", f"{prefix}.gone"
    config, flow, store = live_flow(clusters, tmp_path, prefix, kept, 2)
    create_topic(a, gone, 2)
    for p in range(2):
        produce(a, gone, p, sample_records(50, f"gone{p}"))
    gone_before = records_by_partition(a, gone, 2)
    producer = SteadyProducer(a, kept, 2, burst=10, pause=0.05)
    producer.start()
    try:
        run = start_continuous(config)
        wait_until(
            lambda: copied_so_far(store, flow.name, gone) == 100 or run.poll() is not None,
            300,
            "the topic to go copied",
        )
        stream = store.unfinished_batch(flow.name).id
        admin = AdminClient({"bootstrap.servers": a})
        admin.delete_topics([gone], operation_timeout=30)[gone].result()
        delete_topic_and_wait(admin, gone)
        time.sleep(continuous.TOPIC_SYNC_INTERVAL_S + 2)  # topic sync has seen the deletion
        recorded = copied_so_far(store, flow.name, kept)
        wait_until(
            lambda: copied_so_far(store, flow.name, kept) > recorded or run.poll() is not None,
            60,
            "the other topic streaming on",
        )
        assert run.poll() is None, run.communicate()
        assert store.unfinished_batch(flow.name).id == stream and last_committed(store, flow.name) < stream
    finally:
        producer.stop()
    run.send_signal(signal.SIGTERM)
    output, errors = finished(run)

    assert run.returncode == 0, (output, errors)
    store.dispose()
    assert records_by_partition(b, f"a.{gone}", 2) == gone_before
    assert records_by_partition(b, f"a.{kept}", 2) == records_by_partition(a, kept, 2)
    assert sum(len(r) for r in records_by_partition(b, f"a.{kept}", 2).values()) == producer.sent


def test_continuous_run_for_a_duration_ends_by_itself_and_reports_json(clusters, prefix, tmp_path):
    topic = f"{prefix}.quiet"
    create_topic(clusters["a"].bootstrap, topic, 1)
    config = write_config(
        tmp_path / "mm2.properties",
        clusters,
        f"a->b.enabled = true\ntopics = {prefix}.*\nairmirror.spark.master = local[1]",
    )

    run = start_continuous(config, "--for", "3s", "--json")
    output, errors = finished(run)

    assert run.returncode == 0, (output, errors)
    report = json.loads(output)  # stdout holds the report alone; Spark's and librdkafka's logs go to stderr
    assert report["stopped_by"] == "duration" and report["seconds"] >= 3
    assert report["records"] == 0


def test_spark_submit_app_runs_the_same_loop(clusters, prefix, tmp_path):
    a, b = clusters["a"].bootstrap, clusters["b"].bootstrap
    topic = f"{prefix}.submitted"
    create_topic(a, topic, 2)
    for p in range(2):
        produce(a, topic, p, sample_records(30, f"p{p}"))
    config = write_config(tmp_path / "mm2.properties", clusters, f"a->b.enabled = true\ntopics = {prefix}.*")
    app = Path(__file__).resolve().parents[2] / "spark_apps" / "replicate_batch.py"

    submitted = subprocess.run(
        [
            str(Path(sys.executable).parent / "spark-submit"),
            "--master",
            "local[2]",
            str(app),
            str(config),
            "--flow",
            "a->b",
            "--continuous",
            "--for",
            "5s",
        ],
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "PYSPARK_PYTHON": sys.executable},
    )

    assert submitted.returncode == 0, submitted.stderr[-3000:]
    report = json.loads(submitted.stdout.strip().splitlines()[-1])
    assert report["stopped_by"] == "duration" and report["records"] == 60
    for p in range(2):
        assert records_of(b, f"a.{topic}", p) == records_of(a, topic, p)


@pytest.mark.proves("task_writer rule 14", "streaming rule 2")
def test_a_stream_task_that_starts_after_its_window_still_copies_what_was_there(clusters, prefix, tmp_path):
    """Spark may start a stream's task late on a loaded machine, after ``stream_until``: the task still copies
    every record its partitions held when the job was planned (task_writer rule 14), then ends."""
    topic = f"{prefix}.late"
    _, flow, store = live_flow(clusters, tmp_path, prefix, topic, partitions=2)
    for p in range(2):
        produce(clusters["a"].bootstrap, topic, p, sample_records(1200, f"p{p}"))
    with store:
        options = BatchOptions()
        planned = plan_batch(flow, store, sync_flow_topics(flow, store, options).mappings, options, stream=True)
        # as run_stream does before the job
        job = supersede_jobs(flow, [], NoJobYet(), planned.batch_id, check_lease=lambda: None)
        tasks = plan_copy_tasks(
            flow,
            planned.batch_id,
            planned.ranges,
            lambda: 1,
            job=job,
            scan_from=None,
            stream_until=time.time() - 60,
            recorded_remote_ids=store.remote_topic_ids(flow.name),
        )
        store.set_copy_tasks(planned.batch_id, len(tasks), tasks[0].log_end)
        summary = run_attempt(tasks[0], first_attempt=True)
    assert sorted((s.partition, s.records) for s in summary) == [(0, 1200), (1, 1200)]
    for p in range(2):
        assert records_of(clusters["b"].bootstrap, f"a.{topic}", p) == records_of(clusters["a"].bootstrap, topic, p)


def librdkafka_threads() -> int:
    """librdkafka's threads in this process (named ``rdk:...``; ``threading`` sees none of them): each client
    holds a few until it is freed.  Other threads of the test session come and go on their own."""
    names = []
    for task in os.listdir("/proc/self/task"):
        try:
            names.append(Path(f"/proc/self/task/{task}/comm").read_text())
        except OSError:  # the thread ended meanwhile
            continue
    return sum(name.startswith("rdk:") for name in names)


def cluster_admins() -> int:
    """Admin client objects alive or waiting for a garbage collection."""
    return sum(type(o) is ClusterAdmin for o in gc.get_objects())  # isinstance would wake Airflow's lazy modules


class StopAfterRounds(threading.Event):
    """The run's stop signal, which the loop waits on once per idle round: every 100th wait it notes the process's
    librdkafka threads and admin clients in :attr:`samples`, and after ``rounds`` waits it is set."""

    def __init__(self, rounds: int) -> None:
        super().__init__()
        self.left = rounds
        self.samples: list[tuple[int, int]] = []

    def wait(self, timeout: float | None = None) -> bool:
        self.left -= 1
        if self.left % 100 == 0:
            self.samples.append((librdkafka_threads(), cluster_admins()))
        if self.left <= 0:
            self.set()
        return super().wait(timeout)


def test_idle_rounds_leave_threads_and_admin_clients_flat(clusters, prefix, tmp_path, monkeypatch):
    """1,000 rounds with nothing to copy, the garbage collector off so that a reference cycle would pile up: a
    client left behind per round would add hundreds of admin clients and librdkafka threads."""
    create_topic(clusters["a"].bootstrap, f"{prefix}.idle", 2)
    config = write_config(tmp_path / "mm2.properties", clusters, f"a->b.enabled = true\ntopics = {prefix}.*")
    flow = load_config(config).flow("a->b")
    monkeypatch.setattr(continuous, "IDLE_WAIT_S", 0.0)
    stop = StopAfterRounds(1000)
    gc.collect()
    before = cluster_admins()  # those other tests of this session may still hold
    gc.disable()
    try:
        with MetadataStore.open(flow.metadata_db_url) as store:
            # a record cap makes the run a bounded one (continuous rule 10): rounds with nothing to copy are idle
            report = continuous.replicate_continuously(
                flow, store, BatchOptions(max_records=1000), lambda: None, stop=stop, duration=timedelta(minutes=5)
            )
    finally:
        gc.enable()

    assert report.idle_rounds >= 990 and report.records == 0 and report.stopped_by == "signal", report
    samples = stop.samples
    assert len(samples) == 10, samples
    first, second = samples[:5], samples[5:]
    # peaks: one transient client at a sample is no trend; a client left per round would add hundreds of threads
    assert max(s[0] for s in second) <= max(s[0] for s in first) + 8, samples
    assert max(s[1] for s in samples) <= before + 2, (before, samples)  # one shared client per cluster


def test_continuous_run_keeps_going_through_target_and_source_broker_restarts(clusters, prefix, tmp_path):
    a, b = clusters["a"].bootstrap, clusters["b"].bootstrap
    topic = f"{prefix}.restarts"
    config, flow, store = live_flow(clusters, tmp_path, prefix, topic)
    producer = SteadyProducer(a, topic, PARTITIONS, burst=20, pause=0.05)
    producer.start()
    try:
        run = start_continuous(config, "--json")
        # the target, then the source partitions' leader; then progress after both restarts
        for broker in (clusters["b"], clusters["a"], None):
            before = copied_so_far(store, flow.name, topic)
            wait_until(
                lambda before=before: copied_so_far(store, flow.name, topic) > before or run.poll() is not None,
                300,
                "progress recorded",
            )
            assert run.poll() is None, run.communicate()
            if broker is not None:
                broker.restart()
    finally:
        producer.stop()
    run.send_signal(signal.SIGTERM)  # an end by --for is checked in test_continuous_run_for_a_duration_ends_by_itself
    output, errors = finished(run)
    store.dispose()

    assert run.returncode == 0, (output, errors)
    assert json.loads(output)["stopped_by"] == "signal"  # librdkafka's logs of the restarts go to stderr
    catch_up = subprocess.run(
        [sys.executable, "-m", "airmirror.cli", "replicate", str(config), "--flow", "a->b"],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert catch_up.returncode == 0, catch_up.stderr
    # the source, not producer.sent: the test's own producer may not deliver all it was given through the restart of
    # its broker (a loaded machine); what the source holds, the target must hold, record for record
    sources = {p: records_of(a, topic, p) for p in range(PARTITIONS)}
    assert sum(len(records) for records in sources.values()) > 0
    for p in range(PARTITIONS):
        assert records_of(b, f"a.{topic}", p) == sources[p]
