"""The big-partition case (issue 9): one source partition of ``--big-partition-records`` N x :data:`RECORD_SIZE`-byte
records (stamped with their produce time) and, first, the same at N/10, each copied by one fresh ``airmirror
replicate`` at the flow's default settings and checked.  The peak RSS of the whole process tree must not grow with
the partition: ``peak_rss_ratio_big_vs_small`` is what issue 9 bounds at :data:`RSS_RATIO_LIMIT`.  Results:
``big_partition`` (:class:`BigPartition`: the big run's figures, the small run's prefixed ``small_``).
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import NotRequired, TypedDict

from runs import CopyFigures, airmirror_flow, prepare_source, run_airmirror
from shared import Clusters, TreeUsage, log, ratio

RECORD_SIZE = 100
RSS_RATIO_LIMIT = 1.2


class BigRun(CopyFigures):
    """One run of the case: its figures, its records and their payload, and its throughput over its wall time."""

    records: int
    payload_mb: float
    mb_s: float


class RunFigures(TypedDict):
    """The figures of one run that the table shows."""

    records: int
    wall_s: float
    records_per_s: int
    mb_s: float
    steady_mb_s: float
    peak_rss_mb: int
    peak_rss_by_role_mb: dict[str, float]


class BigPartition(RunFigures):
    """The big run's figures, the small run's (``small_``), the peak RSS ratio against its limit, and the runs' RSS
    timelines (columns ``rss_timeline_columns``)."""

    record_size: int
    partitions: int
    payload_mb: float
    small_records: int
    small_wall_s: float
    small_records_per_s: int
    small_mb_s: float
    small_steady_mb_s: float
    small_peak_rss_mb: int
    small_peak_rss_by_role_mb: dict[str, float]
    peak_rss_ratio_big_vs_small: float
    peak_rss_ratio_limit: float
    peak_rss_within_limit: bool
    rss_timeline_columns: list[str]
    rss_timeline: list[list[float]]
    small_rss_timeline: list[list[float]]
    transaction_timeout_ms: NotRequired[int]
    """Only in results of before the case ran at the flow's default settings: the target producer's setting then."""


def run_big_partition(clusters: Clusters, args: argparse.Namespace, workdir: Path) -> BigPartition:
    """The case's two runs, small first, each timed out at ``--timeout`` per million records (``--timeout`` at
    least).  The source is loaded just before each copy and deleted from neither cluster (the brokers' home is
    removed at the end)."""
    runs: dict[str, BigRun] = {}
    for label, records in (("small", args.big_partition_records // 10), ("big", args.big_partition_records)):
        time.sleep(args.settle_seconds)
        source = prepare_source(clusters, f"bench-big-{label}", 1, records, RECORD_SIZE, stamp_now=True)
        flow = airmirror_flow(clusters, source.name, workdir, f"airbig{label}", args.spark_master)  # a user's defaults
        time.sleep(args.settle_seconds)
        log(f"airmirror big partition ({label}, {records:,} records) ...")
        timeout = args.timeout * max(1.0, records / 1_000_000)
        result = run_airmirror(clusters, source, flow, workdir, timeout, name=f"airmirror_big_{label}", timeline=True)
        runs[label] = {
            **result,
            "records": records,
            "payload_mb": round(source.payload_bytes / 1e6, 1),
            "mb_s": round(source.payload_bytes / 1e6 / result["wall_s"], 2),
        }
        log(
            f"airmirror big partition ({label}): {result['wall_s']} s wall, {result['records_per_s']:,} records/s, "
            f"{result['peak_rss_mb']} MB peak RSS {result['peak_rss_by_role_mb']}"
        )
    big, small = runs["big"], runs["small"]
    rss_ratio = ratio(big["peak_rss_mb"], small["peak_rss_mb"])
    return {
        "records": big["records"],
        "small_records": small["records"],
        "record_size": RECORD_SIZE,
        "partitions": 1,
        "payload_mb": big["payload_mb"],
        "wall_s": big["wall_s"],
        "records_per_s": big["records_per_s"],
        "mb_s": big["mb_s"],
        "steady_mb_s": big["steady_mb_s"],
        "peak_rss_mb": big["peak_rss_mb"],
        "peak_rss_by_role_mb": big["peak_rss_by_role_mb"],
        "small_wall_s": small["wall_s"],
        "small_records_per_s": small["records_per_s"],
        "small_mb_s": small["mb_s"],
        "small_steady_mb_s": small["steady_mb_s"],
        "small_peak_rss_mb": small["peak_rss_mb"],
        "small_peak_rss_by_role_mb": small["peak_rss_by_role_mb"],
        "peak_rss_ratio_big_vs_small": rss_ratio,
        "peak_rss_ratio_limit": RSS_RATIO_LIMIT,
        "peak_rss_within_limit": rss_ratio <= RSS_RATIO_LIMIT,
        "rss_timeline_columns": ["s", "total", *TreeUsage.ROLES],
        "rss_timeline": big["rss_timeline"],
        "small_rss_timeline": small["rss_timeline"],
    }


def small_run(big: BigPartition) -> RunFigures:
    """The small run's figures in ``big`` (its ``small_`` keys)."""
    return {
        "records": big["small_records"],
        "wall_s": big["small_wall_s"],
        "records_per_s": big["small_records_per_s"],
        "mb_s": big["small_mb_s"],
        "steady_mb_s": big["small_steady_mb_s"],
        "peak_rss_mb": big["small_peak_rss_mb"],
        "peak_rss_by_role_mb": big["small_peak_rss_by_role_mb"],
    }


def big_partition_lines(big: BigPartition | None) -> list[str]:
    """The case's table (no lines when the bench did not run it)."""
    if not big:
        return []
    timeout = big.get("transaction_timeout_ms")
    settings = "default settings" if timeout is None else f"target producer transaction.timeout.ms {timeout:,}"
    lines = [
        "",
        f"big partition: 1 partition x {big['record_size']} B records, {settings}",
        "",
        "| airmirror big partition | records | wall s | records/s | MB/s | steady MB/s | peak RSS MB "
        "| CLI / JVM / Python MB |",
        "|---|---:|---:|---:|---:|---:|---:|---|",
    ]
    for label, run in (("small", small_run(big)), ("big", big)):
        roles = run["peak_rss_by_role_mb"]
        lines.append(
            f"| {label} | {run['records']:,} | {run['wall_s']:.1f} | {run['records_per_s']:,} "
            f"| {run['mb_s']:.1f} | {run['steady_mb_s']:.1f} | {run['peak_rss_mb']:,} "
            f"| {roles.get('cli', 0):,} / {roles.get('jvm', 0):,} / {roles.get('python', 0):,} |"
        )
    verdict = "within" if big["peak_rss_within_limit"] else "ABOVE"
    lines += [
        "",
        f"peak_rss_ratio_big_vs_small: {big['peak_rss_ratio_big_vs_small']:.2f} "
        f"({verdict} issue 9's limit of {big['peak_rss_ratio_limit']})",
    ]
    return lines
