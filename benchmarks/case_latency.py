"""The latency case: :data:`LATENCY_RECORDS` new records produced into the copier case's source topic, then
``airmirror replicate`` of its flow started at once; the time from the first produce to all of them visible to
read_committed consumers on the target.  Results: ``latency`` (:class:`LatencyFigures`)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import TypedDict

from copiers import run_copier
from kafka_io import TargetWatch, end_offsets, load_topic, offsets_consumer, topic_digest
from runs import AirmirrorFlow, SourceTopic, airmirror_command, check_copy, copy_job_seconds
from shared import Clusters

LATENCY_RECORDS = 1000


class LatencyFigures(TypedDict):
    """The new records, how long producing them took, the time from their first produce to all of them visible, and
    the replicate run's wall time and copy job."""

    records: int
    produce_s: float
    produce_to_visible_s: float
    replicate_wall_s: float
    copy_job_s: float


def run_latency(
    clusters: Clusters, source: SourceTopic, flow: AirmirrorFlow, size: int, workdir: Path, timeout: float
) -> LatencyFigures:
    """:data:`LATENCY_RECORDS` new records of ``size`` bytes, then an immediate ``airmirror replicate`` of ``flow``:
    produce-to-visible time on the target; the grown copy is checked against the grown source."""
    remote = flow.remote_topic(source.name)
    consumer = offsets_consumer(clusters.target.bootstrap, committed=True)
    try:
        before = end_offsets(consumer, remote, source.partitions)
    finally:
        consumer.close()
    new_per_partition = [
        LATENCY_RECORDS // source.partitions + (1 if p < LATENCY_RECORDS % source.partitions else 0)
        for p in range(source.partitions)
    ]
    watch = TargetWatch(
        clusters.target.bootstrap,
        remote,
        [b + n for b, n in zip(before, new_per_partition, strict=True)],
        interval=0.05,
        base=before,
    )
    produce_started = time.monotonic()
    load_topic(clusters.source.bootstrap, source.name, source.partitions, LATENCY_RECORDS, size, first=source.records)
    produced = time.monotonic()
    run = run_copier(
        "airmirror_latency",
        airmirror_command(flow.config, flow.flow),
        watch,
        workdir,
        ends_by_itself=True,
        timeout=timeout,
    )
    assert watch.all_visible is not None
    grown = SourceTopic(
        source.name,
        source.partitions,
        source.records + LATENCY_RECORDS,
        0,
        topic_digest(clusters.source.bootstrap, source.name, source.partitions),
    )
    check_copy(clusters, grown, remote)
    return {
        "records": LATENCY_RECORDS,
        "produce_s": round(produced - produce_started, 2),
        "produce_to_visible_s": round(watch.all_visible - produce_started, 2),
        "replicate_wall_s": round(run.wall_s, 2),
        "copy_job_s": round(copy_job_seconds(run.stderr), 2),
    }


def latency_lines(latency: LatencyFigures | None) -> list[str]:
    """The case's line (none when the bench did not run it)."""
    if not latency:
        return []
    return [
        "",
        f"live latency, {latency['records']:,} new records: "
        f"{latency['produce_to_visible_s']:.1f} s produce to visible "
        f"(replicate run {latency['replicate_wall_s']:.1f} s, copy job {latency['copy_job_s']:.1f} s)",
    ]
