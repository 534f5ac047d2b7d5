"""The Avro part of the transform case (issue 41): a real registry per cluster (``avro_data.py``) and ``--records``
Avro values copied with schema ids translated, by fresh runs of airmirror without a chain and through
``MaskField$Value`` on two fields, over ``--transforms-rounds`` rounds; every copy checked record by record against
the copy worked out from the source, and its first values decoded with the target registry alone.  MM2 has no such
run: its field SMTs fail on the bytes it hands them.  Results: ``transforms.avro`` (:class:`AvroTransforms`).
"""

from __future__ import annotations

import argparse
import time
from functools import partial
from pathlib import Path
from typing import TypedDict

from avro_data import (
    AVRO_MASK_CHAIN,
    AvroValues,
    Registries,
    latest_id,
    masked_record,
    masked_reframed,
    registry_lines,
    start_registries,
    stop_registries,
)
from case_schema_ids import check_decodes
from kafka_io import reframed, topic_digest
from runs import (
    CopyFigures,
    SourceTopic,
    airmirror_flow,
    alternating_rounds,
    check_copy,
    prepare_source,
    run_airmirror,
    summed_seconds,
)
from shared import Clusters, log, ratio

TOPIC = "bench-avro-mask"
RUNS = ("airmirror_avro_ids", "airmirror_avro_mask")
"""The runs: ids translated only, then ids translated and two fields masked."""


class AvroTransformsRun(CopyFigures):
    """One run: its name and round, its figures and the schema's id on the target."""

    run: str
    round: int
    target_schema_id: int


class MaskVsIds(TypedDict):
    """The masking runs over the others, steady and wall, over the seconds summed over the rounds."""

    steady: float
    wall: float


class AvroTransforms(TypedDict):
    """The load, every run in run order, and the masking runs over the others."""

    records: int
    payload_mb: float
    runs: list[AvroTransformsRun]
    mask_vs_ids: MaskVsIds


def run_avro_transforms(clusters: Clusters, args: argparse.Namespace, workdir: Path) -> AvroTransforms:
    """The case over ``--records`` x ``--record-size`` x ``--partitions``; the registries run under ``workdir`` for
    its length."""
    registries = start_registries(workdir)
    try:
        time.sleep(args.settle_seconds)
        values = AvroValues(registries.source, TOPIC, args.record_size)
        source = prepare_source(clusters, TOPIC, args.partitions, args.records, 0, values=values)
        runs: list[AvroTransformsRun] = []
        for round_, name in alternating_rounds(args.transforms_rounds, RUNS):
            time.sleep(args.settle_seconds)
            runs.append(avro_transforms_run(clusters, source, registries, values, args, workdir, name, round_))
            log(f"{name}, round {round_}: {runs[-1]}")
    finally:
        stop_registries(workdir)
    seconds = summed_seconds(runs, RUNS)
    ids, mask = seconds["airmirror_avro_ids"], seconds["airmirror_avro_mask"]
    return {
        "records": args.records,
        "payload_mb": round(source.payload_bytes / 1e6, 1),
        "runs": runs,
        "mask_vs_ids": {
            "steady": ratio(ids["steady_s"], mask["steady_s"]),
            "wall": ratio(ids["wall_s"], mask["wall_s"]),
        },
    }


def avro_transforms_run(
    clusters: Clusters,
    source: SourceTopic,
    registries: Registries,
    values: AvroValues,
    args: argparse.Namespace,
    workdir: Path,
    name: str,
    round_: int,
) -> AvroTransformsRun:
    """One run of the case (:data:`RUNS`), into a remote topic of its own, checked."""
    masks = name == "airmirror_avro_mask"
    lines = (*registry_lines(registries), *(AVRO_MASK_CHAIN if masks else ()))
    alias = f"avro{'mask' if masks else 'ids'}{round_}"
    flow = airmirror_flow(clusters, source.name, workdir, alias, args.spark_master, extra_lines=lines)
    figures = run_airmirror(clusters, source, flow, workdir, args.timeout, name=f"{name}_{round_}", verify_copy=False)
    remote = flow.remote_topic(source.name)
    target_id = latest_id(registries.target, f"{remote}-value")
    reshape = partial(masked_reframed if masks else reframed, schema_id=target_id)
    expected = topic_digest(clusters.source.bootstrap, source.name, source.partitions, reshape)
    check_copy(clusters, SourceTopic(source.name, source.partitions, source.records, 0, expected), remote)
    check_decodes(
        clusters, source, remote, registries, lambda i: masked_record(values.record(i)) if masks else values.record(i)
    )
    return {"run": name, "round": round_, **figures, "target_schema_id": target_id}


def avro_transforms_lines(avro: AvroTransforms | None) -> list[str]:
    """The case's table (no lines when the bench did not run it)."""
    if not avro:
        return []
    lines = [
        "",
        "| Avro run | round | wall s | steady s | steady MB/s | CPU s |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    lines += [
        f"| {run['run']} | {run['round']} | {run['wall_s']:.1f} | {run['steady_s']:.2f} | "
        f"{run['steady_mb_s']:.1f} | {run['cpu_s']:.1f} |"
        for run in avro["runs"]
    ]
    lines.append(
        f"Avro, MaskField on two fields / ids translated only: steady {avro['mask_vs_ids']['steady']:.2f}, "
        f"wall {avro['mask_vs_ids']['wall']:.2f}"
    )
    return lines
