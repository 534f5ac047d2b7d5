"""The schema-id case (issue 24): a real schema registry per cluster (``avro_data.py``) and a topic of ``--records``
Avro values, copied by fresh ``airmirror replicate`` runs with ``airmirror.schema.ids = off`` and ``= translate``,
alternating over ``--schema-ids-rounds`` rounds, each into its own remote topic.  An ``off`` copy must equal the
source; a ``translate`` copy must equal the source with every value naming the target registry's id, and its first
values must decode with the target registry alone.  Results: ``schema_ids`` (:class:`SchemaIds`), whose
``ratio_steady`` issue 24 wants at :data:`GOAL` at least.
"""

from __future__ import annotations

import argparse
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any, TypedDict

from avro_data import (
    AvroValues,
    Registries,
    decoded_values,
    latest_id,
    registry_lines,
    start_registries,
    stop_registries,
)
from kafka_io import reframed, topic_digest
from runs import (
    CopyFigures,
    SourceTopic,
    airmirror_flow,
    alternating_rounds,
    check_copy,
    prepare_source,
    run_airmirror,
)
from shared import Clusters, log, ratio

MODES = ("off", "translate")
GOAL = 0.9
DECODED = 3
"""How many values of a translated copy are decoded with the target registry."""


class SchemaIdsRun(CopyFigures):
    """One run: its mode and round, its figures and the load average after it (a translating run is a
    :class:`TranslatedRun`)."""

    mode: str
    round: int
    load_avg_1m_after: float


class TranslatedRun(SchemaIdsRun):
    """A translating run, and its schema's id on the target."""

    target_schema_id: int


class SchemaIdsRatios(TypedDict):
    """Translate over off, summed over the rounds (:func:`schema_ids_ratios`)."""

    ratio_steady: float
    ratio_wall: float
    cpu_ratio: float
    task_cpu_ratio: float


class SchemaIds(SchemaIdsRatios):
    """The load, the source schema's id, every run in run order and the ratios against :data:`GOAL`."""

    records: int
    record_size: int
    partitions: int
    payload_mb: float
    rounds: int
    source_schema_id: int
    runs: list[SchemaIdsRun]
    goal: float


def run_schema_ids(clusters: Clusters, args: argparse.Namespace, workdir: Path) -> SchemaIds:
    """The case, over ``--records`` x ``--record-size`` x ``--partitions``; the registries run under ``workdir`` for
    its length."""
    registries = start_registries(workdir)
    try:
        time.sleep(args.settle_seconds)
        values = AvroValues(registries.source, "bench-avro", args.record_size)
        source = prepare_source(clusters, "bench-avro", args.partitions, args.records, 0, values=values)
        runs = []
        for round_, mode in alternating_rounds(args.schema_ids_rounds, MODES):
            time.sleep(args.settle_seconds)
            runs.append(schema_ids_run(clusters, source, registries, values, args, workdir, mode, round_))
            log(f"schema ids {mode}, round {round_}: {runs[-1]}")
    finally:
        stop_registries(workdir)
    return {
        "records": args.records,
        "record_size": args.record_size,
        "partitions": args.partitions,
        "payload_mb": round(source.payload_bytes / 1e6, 1),
        "rounds": args.schema_ids_rounds,
        "source_schema_id": values.schema_id,
        "runs": runs,
        **schema_ids_ratios(runs),
        "goal": GOAL,
    }


def schema_ids_run(
    clusters: Clusters,
    source: SourceTopic,
    registries: Registries,
    values: AvroValues,
    args: argparse.Namespace,
    workdir: Path,
    mode: str,
    round_: int,
) -> SchemaIdsRun:
    """One fresh ``airmirror replicate`` of the Avro topic with ``airmirror.schema.ids = mode``, checked: ``off``
    copies the source as it is; ``translate`` copies it with every value naming the target's id, which decodes with
    the target registry alone."""
    lines = (*registry_lines(registries), f"airmirror.schema.ids = {mode}")
    flow = airmirror_flow(clusters, source.name, workdir, f"ids{mode[0]}{round_}", args.spark_master, extra_lines=lines)
    result = run_airmirror(
        clusters, source, flow, workdir, args.timeout, name=f"airmirror_ids_{mode}_{round_}", verify_copy=False
    )
    remote = flow.remote_topic(source.name)
    figures: SchemaIdsRun = {"mode": mode, "round": round_, **result, "load_avg_1m_after": round(os.getloadavg()[0], 2)}
    if mode == "off":
        check_copy(clusters, source, remote)
        return figures
    target_id = latest_id(registries.target, f"{remote}-value")
    if target_id == values.schema_id:
        raise SystemExit(f"the schema has id {target_id} on both registries: nothing to translate")
    translated = topic_digest(
        clusters.source.bootstrap, source.name, source.partitions, partial(reframed, schema_id=target_id)
    )
    check_copy(clusters, SourceTopic(source.name, source.partitions, source.records, 0, translated), remote)
    check_decodes(clusters, source, remote, registries, values.record)
    translating: TranslatedRun = {**figures, "target_schema_id": target_id}
    return translating


def check_decodes(
    clusters: Clusters,
    source: SourceTopic,
    remote: str,
    registries: Registries,
    record: Callable[[int], dict[str, Any]],
) -> None:
    """Exit unless the first :data:`DECODED` values of ``remote``'s partition 0 decode, with the target registry
    alone, to ``record(i)`` of the source record ``i`` each is a copy of."""
    shown = min(DECODED, source.records // source.partitions)
    decoded = decoded_values(clusters.target.bootstrap, remote, 0, registries.target, shown)
    wanted = [record(i * source.partitions) for i in range(shown)]
    if decoded != wanted:
        raise SystemExit(
            f"VERIFICATION FAILED: {remote} does not decode with the target registry: {str(decoded)[:300]} "
            f"!= {str(wanted)[:300]}"
        )


@dataclass
class _Totals:
    """One mode's seconds summed over the rounds."""

    steady_s: float = 0.0
    wall_s: float = 0.0
    cpu_s: float = 0.0
    task_cpu_s: float = 0.0


def schema_ids_ratios(runs: list[SchemaIdsRun]) -> SchemaIdsRatios:
    """Translate over off, summed over the rounds: throughput of the copy jobs and of whole runs (above 1:
    translate is faster), and CPU seconds of the whole process tree and of the copy tasks' Python workers alone
    (above 1: translate spends more).  The CPU ratios hardly depend on what else the machine runs; on an idle
    machine, where the copy tasks keep every core busy, the throughput ratio is about 1 / ``task_cpu_ratio``."""
    totals = {run["mode"]: _Totals() for run in runs}
    for run in runs:
        total = totals[run["mode"]]
        total.steady_s += run["steady_s"]
        total.wall_s += run["wall_s"]
        total.cpu_s += run["cpu_s"]
        total.task_cpu_s += run["cpu_s_by_role"].get("python", 0.0)
    off, translate = totals["off"], totals["translate"]
    return {
        "ratio_steady": ratio(off.steady_s, translate.steady_s),
        "ratio_wall": ratio(off.wall_s, translate.wall_s),
        "cpu_ratio": ratio(translate.cpu_s, off.cpu_s),
        "task_cpu_ratio": ratio(translate.task_cpu_s, off.task_cpu_s),
    }


def schema_ids_lines(case: SchemaIds | None) -> list[str]:
    """The case's table (no lines when the bench did not run it)."""
    if not case:
        return []
    verdict = "meets" if case["ratio_steady"] >= case["goal"] else "BELOW"
    lines = [
        "",
        f"schema ids: {case['records']:,} Avro records x ~{case['record_size']} B x {case['partitions']} "
        f"partitions, {case['rounds']} rounds of off and translate",
        "",
        "| airmirror.schema.ids | round | wall s | copy job s | steady MB/s | CPU s | copy tasks' CPU s "
        "| load avg after |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for run in case["runs"]:
        lines.append(
            f"| {run['mode']} | {run['round']} | {run['wall_s']:.1f} | {run['steady_s']:.2f} "
            f"| {run['steady_mb_s']:.1f} | {run['cpu_s']:.1f} | {run['cpu_s_by_role'].get('python', 0.0):.1f} "
            f"| {run['load_avg_1m_after']:.1f} |"
        )
    lines += [
        "",
        f"translate / off: throughput {case['ratio_steady']:.2f} over the copy jobs ({verdict} issue 24's goal of "
        f"{case['goal']}), {case['ratio_wall']:.2f} over whole runs; CPU {case['cpu_ratio']:.2f}, "
        f"copy tasks' CPU {case['task_cpu_ratio']:.2f}",
    ]
    return lines
