"""A live flow's cost does not depend on its age (issue: unattended for weeks), on real clusters and Spark.

Where each partition stands is found by its anchor, never by a scan of the batch log's history: every partition of a
stream is anchored, one never written included; after the anchor group is deleted, the next stream puts every
anchor back at once; and every batch stores its log floor, from which any lookup of its progress starts.

No dead end: a half-copied range that retention overtakes ends where its copy got to, and the next run records the
deleted offsets as a gap and copies on from the log start, by itself.  A source topic deleted while its read is
behind stops that read alone instead of hanging the task, and ``status`` names it.  A remote topic deleted under a
copy stays deleted: no airmirror producer makes a broker create a topic by writing to it; deleted under a live
stream, it stops alone while the other topics stream on; recreated under a live stream, its new incarnation is never
written.

Fencing survives a lost lease: a live run's driver frozen past its lease while its Spark tasks stream on, a second
run that takes the flow over with fewer slots, then the first driver thawed: the target holds every record once.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient

from airmirror import names
from airmirror.config import FlowConfig, load_config
from airmirror.devtools.local_kafka import LocalBroker, free_port, start_broker, stop_broker
from airmirror.devtools.processes import freeze_outside_sqlite_writes
from airmirror.errors import ReplicationFailure
from airmirror.model import Gap, NoJobYet, TaskJobs
from airmirror.replication.options import BatchOptions
from airmirror.replication.pipeline import PlannedBatch, plan_batch, record_batch, sync_flow_topics
from airmirror.replication.spark.batch_log import read_anchors
from airmirror.replication.spark.copy_job import plan_copy_tasks
from airmirror.replication.spark.progress import supersede_jobs
from airmirror.replication.spark.task_writer import CopyTask, run_attempt
from airmirror.replication.status import flow_status
from airmirror.store import MetadataStore
from airmirror.store.flow_lease import DEFAULT_LEASE_TTL_SECONDS
from tests.cli_helpers import airmirror_process
from tests.conftest import write_config
from tests.integration.test_resume_selection import interrupt, load_topics
from tests.kafka_helpers import (
    SteadyProducer,
    create_topic,
    delete_topic_and_wait,
    end_offset,
    produce,
    records_of,
    sample_records,
)
from tests.mirror_helpers import opened, replicate
from tests.polling import wait_until

pytestmark = [pytest.mark.integration, pytest.mark.slow]

BUSY, IDLE = 2, 2
"""Partitions of the topic the test writes, and of the one it never writes."""


def live_window(config: Path, seconds: int) -> None:
    """One live run of ``seconds``, as a live DAG run is: it must exit 0."""
    run = airmirror_process("replicate", str(config), "--flow", "a->b", "--continuous", "--for", f"{seconds}s")
    assert run.returncode == 0, run.stderr[-4000:]


def anchors_of(config: Path, remote: list[tuple[str, int]]) -> dict[tuple[str, int], object]:
    flow = load_config(config).flow("a->b")
    return read_anchors(flow.target_client("consumer"), names.anchor_group("a", "b"), remote)


@pytest.mark.proves("task_writer rule 17")
def test_every_stream_partition_is_anchored_and_anchors_come_back_after_the_group_is_deleted(
    clusters, prefix, tmp_path
):
    a, b = clusters["a"].bootstrap, clusters["b"].bootstrap
    busy, idle = f"{prefix}.busy", f"{prefix}.idle"
    create_topic(a, busy, BUSY)
    create_topic(a, idle, IDLE)
    for p in range(BUSY):
        produce(a, busy, p, sample_records(200, f"first{p}"))
    config = write_config(
        tmp_path / "mm2.properties",
        clusters,
        f"a->b.enabled = true\ntopics = {prefix}.*\nairmirror.spark.master = local[2]",
    )
    remote = [(f"a.{busy}", p) for p in range(BUSY)] + [(f"a.{idle}", p) for p in range(IDLE)]

    live_window(config, 6)

    first = anchors_of(config, remote)
    assert all(first[r] is not None for r in remote), f"partitions without an anchor: {first}"
    admin = AdminClient({"bootstrap.servers": b})  # held until it answered: a dropped client never answers
    group = names.anchor_group("a", "b")
    admin.delete_consumer_groups([group], request_timeout=30)[group].result(timeout=60)
    assert all(anchor is None for anchor in anchors_of(config, remote).values())
    for p in range(BUSY):
        produce(a, busy, p, sample_records(200, f"second{p}"))

    live_window(config, 6)

    again = anchors_of(config, remote)
    assert all(again[r] is not None for r in remote), f"partitions without an anchor: {again}"
    for p in range(BUSY):
        assert records_of(b, f"a.{busy}", p) == records_of(a, busy, p)
    for p in range(IDLE):
        assert records_of(b, f"a.{idle}", p) == []
    flow = load_config(config).flow("a->b")
    store = MetadataStore.open(flow.metadata_db_url)
    try:
        batches = store.batches(flow.name)
    finally:
        store.dispose()
    assert batches and all(isinstance(b.jobs, TaskJobs) and b.jobs.log_floor is not None for b in batches)


def delete_records(bootstrap: str, topic: str, below: int) -> None:
    """Move partition 0's log start to ``below``, as retention does (``DeleteRecords``)."""
    admin = AdminClient({"bootstrap.servers": bootstrap})  # held until it answered
    (future,) = admin.delete_records([TopicPartition(topic, 0, below)], request_timeout=30).values()
    future.result(timeout=60)


def test_a_half_copied_range_that_retention_overtakes_ends_there_and_the_next_run_records_the_gap(
    clusters, spark, tmp_path
):
    """Topic Y's batch committed chunks up to ``partial`` and failed (the record there was too large for the
    target); before the flow runs again, retention deletes Y's records up to ``partial + 100``.  The resumed batch
    ends Y's range at ``partial``, the next run records ``[partial, partial + 100)`` as a gap and copies the rest:
    both runs succeed, and the target holds every record the source held, once."""
    a, b = clusters["a"].bootstrap, clusters["b"].bootstrap
    topics = load_topics(a, f"t{uuid.uuid4().hex[:8]}")
    run = interrupt(clusters, tmp_path, topics)
    held = records_of(a, topics.y, 0)
    deleted_to = run.partial + 100
    delete_records(a, topics.y, deleted_to)

    resumed = replicate(run.config, spark, run.flow)
    assert resumed.planned.resumed
    replicate(run.config, spark, run.flow)

    assert records_of(b, run.remote_y, 0) == held[: run.partial] + held[deleted_to:]  # no transaction in Y
    assert records_of(b, run.remote_x, 0) == records_of(a, topics.x, 0)
    with opened(run.config, run.flow) as (flow, store):
        assert store.gaps(flow.name) == [Gap(topics.y, 0, run.partial, deleted_to)]
        assert store.unfinished_batch(flow.name) is None


def prefix_flow(tmp_path: Path, clusters: dict[str, LocalBroker], prefix: str) -> Path:
    """The flow ``a->b`` of every topic under ``prefix``, on two local Spark slots."""
    body = f"a->b.enabled = true\ntopics = {prefix}.*\nairmirror.spark.master = local[2]"
    return write_config(tmp_path / "mm2.properties", clusters, body)


@contextmanager
def live_process(config: Path, seconds: int, log: Path) -> Iterator[subprocess.Popen[bytes]]:
    """A live run of flow ``a->b`` for ``seconds`` in a process group of its own, its output in ``log``; killed at
    the end of the block if it still runs."""
    with log.open("w") as output:
        command = ["replicate", str(config), "--flow", "a->b", "--continuous", "--for", f"{seconds}s"]
        live = subprocess.Popen(
            [sys.executable, "-m", "airmirror.cli", *command],
            stdout=output,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        try:
            yield live
        finally:
            if live.poll() is None:
                os.killpg(live.pid, signal.SIGKILL)
                live.wait()


def delete_topic(bootstrap: str, topic: str) -> AdminClient:
    """Delete ``topic`` and wait until the cluster no longer lists it; returns the admin client that did."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.delete_topics([topic], operation_timeout=30)[topic].result(timeout=60)
    delete_topic_and_wait(admin, topic)
    return admin


def one_copy_task(flow: FlowConfig, store: MetadataStore) -> tuple[PlannedBatch, CopyTask]:
    """Plan and store a batch, and make its one copy task as :func:`~airmirror.replication.pipeline.run_batch` does
    (the job superseding those before it, its task count and log floor stored), without running it."""
    options = BatchOptions()
    planned = plan_batch(flow, store, sync_flow_topics(flow, store, options).mappings, options)
    assert planned.batch_id is not None
    job = supersede_jobs(flow, [], NoJobYet(), planned.batch_id, check_lease=lambda: None)
    (task,) = plan_copy_tasks(
        flow,
        planned.batch_id,
        planned.ranges,
        lambda: 1,
        job=job,
        scan_from=None,
        recorded_remote_ids=store.remote_topic_ids(flow.name),
    )
    store.set_copy_tasks(planned.batch_id, 1, task.log_end)
    planned.jobs = TaskJobs(1, task.log_end)
    return planned, task


@pytest.fixture(scope="module")
def creating_target(test_home) -> Iterator[LocalBroker]:
    """A target cluster that creates a topic a client asks for (Kafka's default, ``auto.create.topics.enable``)."""
    name = "b-creating-topics"
    try:
        yield start_broker(name, free_port(), broker_config={"auto.create.topics.enable": "true"}, home=test_home)
    finally:
        stop_broker(name, home=test_home)


def test_a_copy_task_never_creates_a_remote_topic_deleted_under_it(clusters, creating_target, prefix, tmp_path):
    """The remote topic is deleted between the plan and the copy: the copy task fails, and the target, which would
    create the topic for a producer that asks, does not hold it again."""
    a, b = clusters["a"].bootstrap, creating_target.bootstrap
    topic, remote = f"{prefix}.gone", f"a.{prefix}.gone"
    create_topic(a, topic, 1)
    produce(a, topic, 0, sample_records(50))
    config = prefix_flow(tmp_path, {"a": clusters["a"], "b": creating_target}, prefix)
    with opened(config) as (flow, store):
        _, task = one_copy_task(flow, store)
    admin = delete_topic(b, remote)

    with pytest.raises((KafkaException, ReplicationFailure)):
        run_attempt(task, first_attempt=True)

    assert remote not in admin.list_topics(timeout=30).topics


def test_a_read_whose_source_topic_was_deleted_ends_alone_instead_of_hanging(clusters, spark, prefix, tmp_path):
    """The batch is planned over two topics, then one of them is deleted on the source before its read got
    anywhere (librdkafka reports nothing to such a read): the copy task copies the other topic, ends the deleted
    topic's range where its read stood, and returns; the batch commits, and ``status`` names the deleted topic as
    stopped at its cursor while the run that follows copies the other topic and succeeds."""
    a, b = clusters["a"].bootstrap, clusters["b"].bootstrap
    kept, gone = f"{prefix}.kept", f"{prefix}.gone"
    for topic in (kept, gone):
        create_topic(a, topic, 1)
        produce(a, topic, 0, sample_records(300, topic))
    config = prefix_flow(tmp_path, clusters, prefix)
    with opened(config) as (flow, store):
        planned, task = one_copy_task(flow, store)
        delete_topic(a, gone)

        copied = {(r.topic, r.records) for r in run_attempt(task, first_attempt=True)}

        assert copied == {(kept, 300), (gone, 0)}
        summary = record_batch(flow, store, planned)
        assert {(r.topic, r.end) for r in summary.results} == {(kept, 300), (gone, 0)}
        produce(a, kept, 0, sample_records(20, f"{kept}-more"))

    report = replicate(config, spark)
    assert report.summary is not None and report.summary.records == 20
    with opened(config) as (flow, store):
        stops = flow_status(flow, store).stops
        assert [(s.topic, s.partition) for s in stops] == [(gone, None)]
        assert f"{gone}-0 at 0" in stops[0].reason
    assert records_of(b, f"a.{kept}", 0) == records_of(a, kept, 0)


def test_a_remote_topic_deleted_under_a_live_stream_stops_alone_while_the_others_stream_on(clusters, prefix, tmp_path):
    """A live run streams two topics; the remote topic of one is deleted on the target mid-window.  That topic
    stops (``status`` names it, its remote topic is not created again), the other topic streams on in the same run
    and is copied exactly, and the run ends failing with the one error that names the stopped topic."""
    a, b = clusters["a"].bootstrap, clusters["b"].bootstrap
    kept, gone = f"{prefix}.kept", f"{prefix}.gone"
    for topic in (kept, gone):
        create_topic(a, topic, BUSY)
    config = prefix_flow(tmp_path, clusters, prefix)
    producers = [SteadyProducer(a, topic, BUSY, burst=4, pause=0.05) for topic in (kept, gone)]
    for producer in producers:
        producer.start()
    try:
        with live_process(config, 100, tmp_path / "live.log") as live:
            wait_until(lambda: end_offset(b, f"a.{gone}", 0) > 50, 180, "the stream copies both topics")
            admin = delete_topic(b, f"a.{gone}")
            at_deletion = sum(end_offset(a, kept, p) for p in range(BUSY))
            wait_until(lambda: live.poll() is not None, 400, "the live run ends")
    finally:
        for producer in producers:
            producer.stop()
    log = (tmp_path / "live.log").read_text()

    assert live.returncode == 1, log[-4000:]
    assert f"remote topic a.{gone} on cluster b was deleted" in log.splitlines()[-1]
    assert sum(len(records_of(b, f"a.{kept}", p)) for p in range(BUSY)) > at_deletion  # streamed on after it
    assert f"a.{gone}" not in admin.list_topics(timeout=30).topics
    with opened(config) as (flow, store):
        assert [s.topic for s in flow_status(flow, store).stops] == [gone]
    last = airmirror_process("replicate", str(config), "--flow", "a->b")
    assert last.returncode == 1 and f"a.{gone}" in last.stderr
    for p in range(BUSY):
        assert records_of(b, f"a.{kept}", p) == records_of(a, kept, p)


REBORN_RECORDS = 100_000
"""Records a partition of the topic whose remote topic is recreated holds before the live run: enough that its copy
is still going on when the remote topic is recreated."""


def stable_end(bootstrap: str, topic: str, partition: int) -> int:
    """The partition's last stable offset (0 while the topic does not exist)."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "lso", "isolation.level": "read_committed"})
    try:
        return max(0, consumer.get_watermark_offsets(TopicPartition(topic, partition), timeout=10)[1])
    except KafkaException:
        return 0
    finally:
        consumer.close()


def test_a_remote_topic_recreated_under_a_live_stream_is_never_written(clusters, prefix, tmp_path):
    """A live run copies a backlog of two partitions while another topic streams; once a chunk of each backlog
    partition committed, its remote topic is deleted and created again at once under its name (with its partition
    count).  The new incarnation holds no committed record, ``status`` names the topic stopped, and the other topic
    is copied exactly."""
    a, b = clusters["a"].bootstrap, clusters["b"].bootstrap
    kept, reborn = f"{prefix}.kept", f"{prefix}.reborn"
    for topic in (kept, reborn):
        create_topic(a, topic, BUSY)
    for partition in range(BUSY):
        produce(a, reborn, partition, sample_records(REBORN_RECORDS, f"p{partition}"))
    config = prefix_flow(tmp_path, clusters, prefix)
    producer = SteadyProducer(a, kept, BUSY, burst=4, pause=0.05)
    producer.start()

    def copied() -> int:
        return min(stable_end(b, f"a.{reborn}", p) for p in range(BUSY))

    try:
        with live_process(config, 60, tmp_path / "live.log") as live:
            wait_until(lambda: copied() > 0, 180, "a chunk of each backlog partition commits")
            assert copied() < REBORN_RECORDS, "the backlog was copied before the remote topic could be recreated"
            delete_topic(b, f"a.{reborn}")
            create_topic(b, f"a.{reborn}", BUSY)
            wait_until(lambda: live.poll() is not None, 400, "the live run ends")
    finally:
        producer.stop()
    log = (tmp_path / "live.log").read_text()

    assert live.returncode == 1, log[-4000:]
    assert [len(records_of(b, f"a.{reborn}", p)) for p in range(BUSY)] == [0] * BUSY, log[-4000:]
    with opened(config) as (flow, store):
        assert [s.topic for s in flow_status(flow, store).stops] == [reborn]
    last = airmirror_process("replicate", str(config), "--flow", "a->b")
    assert last.returncode == 1 and f"a.{reborn}" in last.stderr, last.stderr[-4000:]
    for p in range(BUSY):
        copy, original = records_of(b, f"a.{kept}", p), records_of(a, kept, p)
        assert copy == original, f"{kept}-{p}: {len(copy)} records copied of {len(original)}"


LEASED_PARTITIONS = 4


@pytest.mark.proves("streaming rule 5", "streaming rule 6", "job_driver rule 5")
def test_a_run_that_lost_its_lease_never_writes_again_once_the_next_run_started(clusters, prefix, tmp_path):
    """A live run streams with four copy tasks while a producer writes; its driver is frozen (SIGSTOP): its Spark
    tasks stream on, but it no longer renews its lease.  Once the lease expired, a second live run with two slots
    takes the flow over: it closes the first run's stream batch (superseding its job and fencing its four task ids)
    and streams with ids 0 and 1; Spark retries the fenced tasks of the first job, under ids 2 and 3 too, which the
    second run does not use.  Then the first driver is thawed (SIGCONT): it finds its lease lost, ends its tasks
    (idle ones would otherwise stream on until its window ends) and exits 1 saying so; a last plain run copies the
    rest.  Every record is on the target exactly once."""
    a, b = clusters["a"].bootstrap, clusters["b"].bootstrap
    topic = f"{prefix}.leased"
    create_topic(a, topic, LEASED_PARTITIONS)
    body = f"a->b.enabled = true\ntopics = {prefix}.*\n"
    wide = write_config(tmp_path / "wide.properties", clusters, body + "airmirror.spark.master = local[4]")
    narrow = write_config(tmp_path / "narrow.properties", clusters, body + "airmirror.spark.master = local[2]")
    remote = f"a.{topic}"
    producer = SteadyProducer(a, topic, LEASED_PARTITIONS, burst=8, pause=0.05)
    producer.start()
    with (tmp_path / "first.log").open("w") as output:
        first = subprocess.Popen(
            [sys.executable, "-m", "airmirror.cli", "replicate", str(wide), "--flow", "a->b", "--continuous"],
            stdout=output,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        wait_until(lambda: sum(end_offset(b, remote, p) for p in range(LEASED_PARTITIONS)) > 200, 300, "streaming")
        freeze_outside_sqlite_writes(first.pid, tmp_path / "metadata.db")  # the driver only: Spark streams on
        time.sleep(DEFAULT_LEASE_TTL_SECONDS + 5)

        second = airmirror_process("replicate", str(narrow), "--flow", "a->b", "--continuous", "--for", "20s")

        assert second.returncode == 0, second.stderr[-4000:]
    finally:
        os.kill(first.pid, signal.SIGCONT)
        producer.stop()
        try:
            first.wait(timeout=300)  # it finds its lease lost, ends its fenced tasks and stops without committing
        finally:
            if first.poll() is None:
                os.killpg(first.pid, signal.SIGKILL)
                first.wait()
    assert first.returncode == 1 and "lost its lease" in (tmp_path / "first.log").read_text()
    last = airmirror_process("replicate", str(narrow), "--flow", "a->b")
    assert last.returncode == 0, last.stderr[-4000:]
    for p in range(LEASED_PARTITIONS):
        assert records_of(b, remote, p) == records_of(a, topic, p)
