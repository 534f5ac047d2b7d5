"""The copier case: the same source topic copied by each copier of ``--copiers`` (raw pipe, MM2 default, MM2 tuned,
airmirror), one after another, each into its own target topic and checked; then airmirror's ratios to the others.

Results: ``copiers`` (each copier's :class:`~runs.CopyFigures`, in run order) and ``ratios``, ``steady_ratios`` and
``cpu_per_gb_ratios`` (:func:`ratios`).  The verify and latency cases run on airmirror's flow of this case
(:class:`Copies`).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TypedDict

from copiers import run_copier
from kafka_io import TargetWatch, create_topic
from runs import (
    AirmirrorFlow,
    CopyFigures,
    SourceTopic,
    airmirror_flow,
    check_copy,
    expected_counts,
    prepare_source,
    run_airmirror,
    run_mm2,
    summarize,
)
from shared import Clusters, log, ratio

RAW_PIPE = Path(__file__).with_name("raw_pipe.py")
COPIERS = ("raw_pipe", "mm2_default", "mm2_tuned", "airmirror")
"""Every copier of the case, in the order they run."""


@dataclass(frozen=True)
class Copies:
    """What the case did: its source topic (``None`` when no copier ran), each copier's figures in run order, and
    airmirror's flow (``None`` when airmirror did not run)."""

    source: SourceTopic | None
    figures: dict[str, CopyFigures]
    flow: AirmirrorFlow | None


def run_copiers(clusters: Clusters, args: argparse.Namespace, workdir: Path) -> Copies:
    """The ``--copiers`` over one source topic of ``--records`` x ``--record-size`` over ``--partitions``, each run
    after ``--settle-seconds`` and within ``--timeout``."""
    if not args.copiers:
        return Copies(None, {}, None)
    source = prepare_source(clusters, "bench", args.partitions, args.records, args.record_size)
    flow: AirmirrorFlow | None = None
    figures: dict[str, CopyFigures] = {}
    for name in COPIERS:
        if name not in args.copiers:
            continue
        time.sleep(args.settle_seconds)
        log(f"{name} ...")
        if name == "raw_pipe":
            result = run_raw_pipe(clusters, source, workdir, args.timeout)
        elif name.startswith("mm2"):
            result = run_mm2(clusters, source, workdir, args.timeout, tuned=name == "mm2_tuned")
        else:
            flow = airmirror_flow(clusters, source.name, workdir, "air", args.spark_master)
            result = run_airmirror(clusters, source, flow, workdir, args.timeout)
        figures[name] = result
        log(
            f"{name}: {result['wall_s']} s wall, {result['steady_mb_s']} MB/s steady, "
            f"{result['peak_rss_mb']} MB peak RSS"
        )
    return Copies(source, figures, flow)


def run_raw_pipe(clusters: Clusters, source: SourceTopic, workdir: Path, timeout: float) -> CopyFigures:
    """``raw_pipe.py`` over the whole source topic into ``raw.TOPIC``, measured (its steady part from its first
    consumed record to its final flush, as it reports them) and checked."""
    target_topic = f"raw.{source.name}"
    create_topic(clusters.target.bootstrap, target_topic, source.partitions)
    command = [
        sys.executable,
        str(RAW_PIPE),
        clusters.source.bootstrap,
        source.name,
        str(source.partitions),
        clusters.target.bootstrap,
        target_topic,
    ]
    watch = TargetWatch(clusters.target.bootstrap, target_topic, expected_counts(source))
    run = run_copier("raw_pipe", command, watch, workdir, ends_by_itself=True, timeout=timeout)
    inner = json.loads(run.stdout.strip().splitlines()[-1])
    result = summarize(run, source, inner["done_s"] - inner["first_s"])
    check_copy(clusters, source, target_topic)
    return result


def ratios(copiers: dict[str, CopyFigures]) -> tuple[dict[str, float], dict[str, float], dict[str, float]]:
    """airmirror against every other copier: over wall time and steady rate (higher is better), and its CPU
    seconds per GB over the other's (lower is better); keyed ``airmirror_vs_OTHER``, and empty without airmirror."""
    air = copiers.get("airmirror")
    if air is None:
        return {}, {}, {}
    wall, steady, cpu = {}, {}, {}
    for other in ("mm2_tuned", "mm2_default", "raw_pipe"):
        if other in copiers:
            key = f"airmirror_vs_{other}"
            wall[key] = ratio(copiers[other]["wall_s"], air["wall_s"])
            steady[key] = ratio(air["steady_mb_s"], copiers[other]["steady_mb_s"])
            cpu[key] = ratio(air["cpu_s_per_gb"], copiers[other]["cpu_s_per_gb"])
    return wall, steady, cpu


class Load(TypedDict):
    """The load of the case, as the results' ``params`` give it."""

    records: int
    record_size: int
    partitions: int


class Ratios(TypedDict):
    """The sections of a results document that :func:`ratio_lines` reads (written by :func:`ratios`)."""

    ratios: dict[str, float]
    steady_ratios: dict[str, float]
    cpu_per_gb_ratios: dict[str, float]


def copier_lines(load: Load, copiers: dict[str, CopyFigures]) -> list[str]:
    """The copiers' table (no lines when the bench did not run it)."""
    lines: list[str] = []
    if copiers:
        lines += [
            f"{load['records']:,} records x {load['record_size']} B x {load['partitions']} partitions",
            "",
            "| copier | wall s | steady MB/s | records/s | peak RSS MB | CPU s | CPU s/GB |",
            "|---|---:|---:|---:|---:|---:|---:|",
        ]
    for name, c in copiers.items():
        lines.append(
            f"| {name} | {c['wall_s']:.1f} | {c['steady_mb_s']:.1f} | {c['records_per_s']:,} | {c['peak_rss_mb']:,} "
            f"| {c['cpu_s']:.1f} | {c['cpu_s_per_gb']:.1f} |"
        )
    return lines


def ratio_lines(document: Ratios) -> list[str]:
    """airmirror's ratios to the other copiers (no lines when the bench did not run it)."""
    lines: list[str] = []
    if document["ratios"]:
        lines += [
            "",
            "| ratio (airmirror vs) | wall time | steady | CPU s/GB (airmirror / other, lower is better) |",
            "|---|---:|---:|---:|",
        ]
        for key, value in document["ratios"].items():
            lines.append(
                f"| {key.removeprefix('airmirror_vs_')} | {value:.2f} | {document['steady_ratios'][key]:.2f} "
                f"| {document['cpu_per_gb_ratios'][key]:.2f} |"
            )
    return lines
