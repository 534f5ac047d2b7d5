"""A live flow's cost does not depend on its age (issue: unattended for weeks), on real clusters and Spark.

Where each partition stands is found by its anchor, never by a scan of the batch log's history: every partition of a
stream is anchored, one never written included; after the anchor group is deleted, the next stream puts every
anchor back at once; and every batch stores its log floor, from which any lookup of its progress starts.

No dead end: a half-copied range that retention overtakes ends where its copy got to, and the next run records the
deleted offsets as a gap and copies on from the log start, by itself.
"""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest
from confluent_kafka import TopicPartition
from confluent_kafka.admin import AdminClient

from airmirror import names
from airmirror.config import load_config
from airmirror.model import Gap
from airmirror.replication.spark.batch_log import read_anchors
from airmirror.store import MetadataStore
from tests.cli_helpers import airmirror_process
from tests.conftest import write_config
from tests.integration.test_resume_selection import interrupt, load_topics
from tests.kafka_helpers import create_topic, produce, records_of, sample_records
from tests.mirror_helpers import opened, replicate

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
    assert batches and all(batch.log_floor is not None for batch in batches)


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
