"""The partition-scaling case (issue 22): the same ``--partition-scaling-records`` over FEW and over MANY partitions
(``--partition-scaling-partitions``, in topics of :data:`TOPIC_PARTITIONS`), one flow each, copied by three fresh
``airmirror replicate`` runs: a first copy, an incremental batch (one new record in every partition) and a batch
with nothing new; then, as a control, how long the target broker takes to bring up as many new partitions.
Results: ``partition_scaling`` (:class:`PartitionScaling`), whose ``wall_ratios`` MANY/FEW issue 22 bounds at
:data:`RATIO_TARGET`.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import time
from pathlib import Path
from typing import Literal, TypedDict

from kafka_io import create_topics, load_topic, partition_creation_s, topics_digest
from runs import COPY_JOB_LOG, AirmirrorFlow, airmirror_command, airmirror_flow
from shared import Clusters, log, ratio

TOPIC_PARTITIONS = 10
RECORD_SIZE = 100
Batch = Literal["first_copy", "incremental", "nothing_new"]
BATCHES: tuple[Batch, ...] = ("first_copy", "incremental", "nothing_new")
"""The batches of each flow, in run order."""
RATIO_TARGET = 2.0


class PartitionScalingParams(TypedDict):
    """The case's flags, as the results' ``params.partition_scaling`` give them."""

    records: int
    partitions: list[int]
    """FEW and MANY."""


class BatchFigures(TypedDict):
    """One batch: the run's wall time (process start to exit, Spark start-up included) and its copy job's seconds
    (``None`` when it ran none)."""

    wall_s: float
    copy_job_s: float | None


class PartitionScalingRun(TypedDict):
    """One partition count's flow: each batch, and the target broker's time to bring up as many new partitions."""

    partitions: int
    topics: int
    first_copy: BatchFigures
    incremental: BatchFigures
    nothing_new: BatchFigures
    broker_creation_s: float


class PartitionScaling(TypedDict):
    """The load, FEW's and MANY's runs, and MANY over FEW per batch (wall time)."""

    records: int
    record_size: int
    partitions_per_topic: int
    few: PartitionScalingRun
    many: PartitionScalingRun
    wall_ratios: dict[Batch, float]
    first_copy_ratio_less_broker_creation: float
    """The first copy's MANY/FEW ratio once each run's ``broker_creation_s`` is taken off."""
    ratio_target: float


def partition_scaling_params(args: argparse.Namespace) -> PartitionScalingParams | None:
    """The case's ``params.partition_scaling``; ``None`` under ``--skip-partition-scaling``."""
    if args.skip_partition_scaling:
        return None
    return {"records": args.partition_scaling_records, "partitions": list(args.partition_scaling_partitions)}


def timed_replicate(flow: AirmirrorFlow, expected_records: int, timeout: float) -> BatchFigures:
    """One fresh ``airmirror -v replicate`` of the flow, timed; it must report ``expected_records``."""
    started = time.monotonic()
    done = subprocess.run(airmirror_command(flow.config, flow.flow), capture_output=True, text=True, timeout=timeout)
    wall_s = time.monotonic() - started
    if done.returncode != 0:
        raise SystemExit(f"airmirror replicate of {flow.flow} exited {done.returncode}: {done.stderr[-2000:]}")
    copied = json.loads(done.stdout)["records"]
    if copied != expected_records:
        raise SystemExit(f"VERIFICATION FAILED: {flow.flow} copied {copied} records, expected {expected_records}")
    job = list(COPY_JOB_LOG.finditer(done.stderr))
    return {"wall_s": round(wall_s, 2), "copy_job_s": float(job[-1].group("seconds")) if job else None}


def partition_scaling_run(
    clusters: Clusters, args: argparse.Namespace, workdir: Path, partitions: int
) -> PartitionScalingRun:
    """The same ``--partition-scaling-records`` over ``partitions`` partitions (topics of :data:`TOPIC_PARTITIONS`),
    copied by one flow, batch by batch (:data:`BATCHES`).  After each batch every remote partition's digest must
    equal its source partition's."""
    per_topic = TOPIC_PARTITIONS
    alias = f"ps{partitions}"
    topics = [f"{alias}-{i:04d}" for i in range(partitions // per_topic)]
    source, target = clusters.source.bootstrap, clusters.target.bootstrap
    create_topics(source, dict.fromkeys(topics, per_topic))
    started = time.monotonic()
    for i, topic in enumerate(topics):
        share = args.partition_scaling_records // len(topics) + (
            1 if i < args.partition_scaling_records % len(topics) else 0
        )
        load_topic(source, topic, per_topic, share, RECORD_SIZE)
    log(
        f"loaded {len(topics)} topics x {per_topic} partitions, {args.partition_scaling_records} records "
        f"in {time.monotonic() - started:.1f} s"
    )
    flow = airmirror_flow(clusters, f"{alias}-.*", workdir, alias, args.spark_master)
    timeout = args.timeout * max(1.0, partitions / 200)
    batches: dict[Batch, BatchFigures] = {}
    for batch, new_records in zip(BATCHES, (args.partition_scaling_records, partitions, 0), strict=True):
        if batch == "incremental":
            for topic in topics:
                load_topic(source, topic, per_topic, per_topic, RECORD_SIZE, first=args.partition_scaling_records)
        time.sleep(args.settle_seconds)
        batches[batch] = timed_replicate(flow, new_records, timeout)
        sources = topics_digest(source, topics, per_topic)
        copies = topics_digest(target, [flow.remote_topic(t) for t in topics], per_topic)
        wrong = [f"{topics[i // per_topic]}-{i % per_topic}" for i, digest in enumerate(sources) if copies[i] != digest]
        if wrong:
            raise SystemExit(
                f"VERIFICATION FAILED: after the {batch} batch, remote partitions differ from {', '.join(wrong[:10])}"
            )
        log(f"partition scaling, {partitions} partitions, {batch}: {batches[batch]}")
    creation_s = round(
        partition_creation_s(target, [f"{alias}-probe-{i:04d}" for i in range(len(topics))], per_topic), 2
    )
    log(
        f"partition scaling, {partitions} partitions: the target broker brings up {partitions} new partitions "
        f"in {creation_s} s"
    )
    return {
        "partitions": partitions,
        "topics": len(topics),
        "first_copy": batches["first_copy"],
        "incremental": batches["incremental"],
        "nothing_new": batches["nothing_new"],
        "broker_creation_s": creation_s,
    }


def run_partition_scaling(clusters: Clusters, args: argparse.Namespace, workdir: Path) -> PartitionScaling:
    """The case: FEW, then MANY (``--partition-scaling-partitions``), and the ratios MANY/FEW."""
    few, many = (partition_scaling_run(clusters, args, workdir, p) for p in args.partition_scaling_partitions)
    return {
        "records": args.partition_scaling_records,
        "record_size": RECORD_SIZE,
        "partitions_per_topic": TOPIC_PARTITIONS,
        "few": few,
        "many": many,
        "wall_ratios": {batch: ratio(many[batch]["wall_s"], few[batch]["wall_s"]) for batch in BATCHES},
        "first_copy_ratio_less_broker_creation": ratio(
            many["first_copy"]["wall_s"] - many["broker_creation_s"],
            few["first_copy"]["wall_s"] - few["broker_creation_s"],
        ),
        "ratio_target": RATIO_TARGET,
    }


def partition_scaling_lines(spread: PartitionScaling | None) -> list[str]:
    """The case's table (no lines when the bench did not run it)."""
    if not spread:
        return []
    few, many = spread["few"], spread["many"]
    lines = [
        "",
        f"partition scaling: {spread['records']:,} records x {spread['record_size']} B, topics of "
        f"{spread['partitions_per_topic']} partitions (issue 22's target: ratio <= {spread['ratio_target']})",
        "",
        f"| airmirror batch | {few['partitions']:,} partitions s | {many['partitions']:,} partitions s | ratio |",
        "|---|---:|---:|---:|",
    ]
    for batch, value in spread["wall_ratios"].items():
        lines.append(f"| {batch} | {few[batch]['wall_s']:.1f} | {many[batch]['wall_s']:.1f} | {value:.2f} |")
    lines.append(
        f"| the target broker bringing up as many new partitions | {few['broker_creation_s']:.1f} "
        f"| {many['broker_creation_s']:.1f} | |"
    )
    lines.append(f"| first copy less that | | | {spread['first_copy_ratio_less_broker_creation']:.2f} |")
    return lines
