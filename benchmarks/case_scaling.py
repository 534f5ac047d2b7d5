"""The scaling case: airmirror's wall time at four times the records and at four times the partitions of the copier
case's load, each a fresh source topic and a fresh ``airmirror replicate``, against the copier case's airmirror run.
Results: ``scaling`` (:class:`Scaling`)."""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import Final, TypedDict

from runs import CopyFigures, airmirror_flow, prepare_source, run_airmirror
from shared import Clusters, log

GROWN: Final = ("records_x4", "partitions_x4")
"""The grown runs, in run order."""


class ScalingBase(TypedDict):
    """The copier case's airmirror run."""

    records: int
    partitions: int
    wall_s: float
    steady_mb_s: float


class ScalingRun(ScalingBase):
    """A grown run, and its wall time over the base run's."""

    peak_rss_mb: int
    wall_growth: float


class Scaling(TypedDict):
    """The base run and the two grown ones."""

    base: ScalingBase
    records_x4: ScalingRun
    partitions_x4: ScalingRun


def run_scaling(clusters: Clusters, base: CopyFigures, args: argparse.Namespace, workdir: Path) -> Scaling:
    """airmirror wall time at x4 records and x4 partitions, against ``base``, the copier case's airmirror run (x1,
    ``--partitions`` partitions); each run's timeout is four times ``--timeout``."""

    def grown(key: str, records: int, partitions: int) -> ScalingRun:
        time.sleep(args.settle_seconds)
        source = prepare_source(clusters, f"bench-{key.replace('_', '-')}", partitions, records, args.record_size)
        flow = airmirror_flow(clusters, source.name, workdir, f"air{key.replace('_', '')}", args.spark_master)
        result = run_airmirror(clusters, source, flow, workdir, args.timeout * 4, name=f"airmirror_{key}")
        log(f"airmirror {key}: {result['wall_s']} s wall, {result['steady_mb_s']} MB/s steady")
        return {
            "records": records,
            "partitions": partitions,
            "wall_s": result["wall_s"],
            "steady_mb_s": result["steady_mb_s"],
            "peak_rss_mb": result["peak_rss_mb"],
            "wall_growth": round(result["wall_s"] / base["wall_s"], 2),
        }

    return {
        "base": {
            "records": args.records,
            "partitions": args.partitions,
            "wall_s": base["wall_s"],
            "steady_mb_s": base["steady_mb_s"],
        },
        "records_x4": grown("records_x4", args.records * 4, args.partitions),
        "partitions_x4": grown("partitions_x4", args.records, args.partitions * 4),
    }


def scaling_lines(scaling: Scaling | None) -> list[str]:
    """How airmirror scales with records and partitions (no lines when the bench did not run it)."""
    if not scaling:
        return []
    base = scaling["base"]
    lines = [
        "",
        "| airmirror scaling | records | partitions | wall s | growth | steady MB/s |",
        "|---|---:|---:|---:|---:|---:|",
        f"| base | {base['records']:,} | {base['partitions']} | {base['wall_s']:.1f} | 1.00 "
        f"| {base['steady_mb_s']:.1f} |",
    ]
    for key in GROWN:
        s = scaling[key]
        lines.append(
            f"| {key} | {s['records']:,} | {s['partitions']} | {s['wall_s']:.1f} | {s['wall_growth']:.2f} "
            f"| {s['steady_mb_s']:.1f} |"
        )
    return lines
