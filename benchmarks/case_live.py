"""The live case (issues 11, 22 and 35): the ``--live-copiers`` one after the other, each copying continuously while
a producer writes a steady load (:func:`live.run_live`), after ``--live-warm-up-seconds`` of transactions on both
clusters; at ``--partitions`` (``live_lag_ms``) and, unless ``--skip-live-wide``, at ``--live-wide-partitions``
(``live_wide_lag_ms``, its watches fetching in batches).  Each result maps a copier to its
:class:`~live.LiveFigures`, or to :class:`LiveError` when its records went missing or arrived twice (the other
copiers still run, and the bench exits 1).
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import TypedDict, final

from copiers import mm2_properties
from kafka_io import warm_up_transactions
from live import LiveFigures, run_live
from runs import AIRMIRROR, airmirror_flow
from shared import Clusters, log

from airmirror.devtools.local_kafka import free_port
from airmirror.devtools.mm2 import mm2_command, write_mm2_files

LIVE_COPIERS = ("airmirror", "mm2_tuned", "mm2_eos")
"""The copiers the case can run: airmirror ``replicate --continuous``, MM2 tuned, and MM2 tuned with exactly-once."""


class LiveWideParams(TypedDict):
    """The whole-cluster load, as the results' ``params.live.wide`` give it."""

    partitions: int
    rate: int


class LiveParams(TypedDict):
    """The case's flags, as the results' ``params.live`` give them."""

    rate: int
    seconds: float
    copiers: list[str]
    wide: LiveWideParams | None
    watch_partitions_per_process: int


@final
class LiveError(TypedDict):
    """A copier whose records went missing or arrived twice, or that never started copying: why."""

    error: str


LiveCase = dict[str, LiveFigures | LiveError]
"""One load's results, per copier in run order."""


class LiveLoad(TypedDict):
    """What a table's heading says of a load."""

    rate: int
    partitions: int
    seconds: float


class LiveTableParams(TypedDict):
    """The results' ``params`` that the tables read."""

    partitions: int
    record_size: int
    live: LiveParams | None


def live_params(args: argparse.Namespace) -> LiveParams | None:
    """The case's ``params.live``; ``None`` under ``--skip-live``."""
    if args.skip_live:
        return None
    return {
        "rate": args.live_rate,
        "seconds": args.live_seconds,
        "copiers": args.live_copiers,
        "wide": None if args.skip_live_wide else {"partitions": args.live_wide_partitions, "rate": args.live_wide_rate},
        "watch_partitions_per_process": args.live_watch_partitions,
    }


def run_live_cases(clusters: Clusters, args: argparse.Namespace, workdir: Path) -> tuple[LiveCase, LiveCase | None]:
    """Warm the brokers' transaction paths up (``--live-warm-up-seconds``), then the case at ``--partitions`` and,
    unless ``--skip-live-wide``, at ``--live-wide-partitions`` (else ``None``)."""
    if args.live_warm_up_seconds:
        counts = [
            warm_up_transactions(broker.bootstrap, args.live_warm_up_seconds)
            for broker in (clusters.source, clusters.target)
        ]
        log(f"live warm-up: {' and '.join(map(str, counts))} transactions in {args.live_warm_up_seconds:.0f} s each")
    live = run_live_case(clusters, args, workdir, args.partitions, args.live_rate, "live")
    if args.skip_live_wide:
        return live, None
    return live, run_live_case(
        clusters, args, workdir, args.live_wide_partitions, args.live_wide_rate, "live-wide", batched_watch=True
    )


def run_live_case(
    clusters: Clusters,
    args: argparse.Namespace,
    workdir: Path,
    partitions: int,
    rate: int,
    label: str,
    batched_watch: bool = False,
) -> LiveCase:
    """The ``--live-copiers`` under the same steady load of ``rate`` records/s over ``partitions`` partitions, one
    after the other (``live.py``); each watch reads in one process per ``--live-watch-partitions`` partitions (with
    batched fetches if ``batched_watch``)."""
    processes = -(-partitions // args.live_watch_partitions)
    results: LiveCase = {}
    for name in args.live_copiers:
        time.sleep(args.settle_seconds)
        log(f"{label} {name} ...")
        live_dir = workdir / f"{label}-{name}"
        live_dir.mkdir()
        command, topic, remote = live_copier(name, clusters, args, live_dir, label)
        try:
            results[name] = run_live(
                name,
                command,
                clusters.source.bootstrap,
                clusters.target.bootstrap,
                topic,
                remote,
                workdir=live_dir,
                watch_processes=processes,
                batched_watch=batched_watch,
                partitions=partitions,
                rate=rate,
                size=args.record_size,
                seconds=args.live_seconds,
            )
        except RuntimeError as error:  # records missing or twice, or no copy at all: the other copiers still run
            results[name] = {"error": str(error)}
        log(f"{label} {name}: {results[name]}")
    return results


def live_copier(
    name: str, clusters: Clusters, args: argparse.Namespace, workdir: Path, label: str
) -> tuple[list[str], str, str]:
    """``(command, source topic, remote topic)`` of one live copier, each with its own topic (named after the case's
    ``label``) and aliases."""
    alias, target_alias = f"live{name.replace('_', '')}", f"live{name.replace('_', '')}t"
    topic = f"{label}-{name.replace('_', '-')}"
    if name == "airmirror":
        flow = airmirror_flow(clusters, topic, workdir, alias, args.spark_master)
        command = [AIRMIRROR, "-v", "replicate", str(flow.config), "--flow", flow.flow, "--continuous"]
    else:
        rest_port = free_port() if name == "mm2_eos" else None
        properties = mm2_properties(
            alias,
            target_alias,
            clusters.source.bootstrap,
            clusters.target.bootstrap,
            topic,
            tuned=True,
            exactly_once_rest_port=rest_port,
        )
        command = mm2_command(*write_mm2_files(workdir, name, properties), target_alias)
    return command, topic, f"{alias}.{topic}"


def live_lines(params: LiveTableParams, live: LiveCase | None, wide: LiveCase | None) -> list[str]:
    """The live copiers' lag, per load the bench ran (no lines when it ran none)."""
    lines: list[str] = []
    for figures, is_wide in ((live, False), (wide, True)):
        if figures:
            lines += _load_lines(params, figures, is_wide)
    return lines


def _load_lines(params: LiveTableParams, live: LiveCase, wide: bool) -> list[str]:
    """One load's table: its heading from its first copier's figures, or from ``params`` when every copier failed."""
    first: LiveLoad | None = next((figures for figures in live.values() if "error" not in figures), None)
    if first is None:  # every copier failed: the case's load as asked
        asked = params["live"]
        assert asked is not None, "live results come with their params"
        if wide:
            assert asked["wide"] is not None, "whole-cluster live results come with their params"
            first = {
                "rate": asked["wide"]["rate"],
                "partitions": asked["wide"]["partitions"],
                "seconds": asked["seconds"],
            }
        else:
            first = {"rate": asked["rate"], "partitions": params["partitions"], "seconds": asked["seconds"]}
    lines = [
        "",
        f"live: {first['rate']:,} records/s x {params['record_size']} B over {first['partitions']:,} partitions "
        f"for {first['seconds']:.0f} s",
        "",
        "| live copier | lag p50 ms | p90 | p99 | max | longest gap ms | gaps > 500 ms | CPU s | peak RSS MB "
        "| floor p50 / p99 ms |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for name, figures in live.items():
        if "error" in figures:
            lines.append(f"| {name} | VERIFICATION FAILED: {figures['error']} |")
            continue
        floor = figures["floor"]
        lines.append(
            f"| {name} | {figures['p50']:,} | {figures['p90']:,} | {figures['p99']:,} | {figures['max']:,} "
            f"| {figures['longest_gap_ms']:,} | {figures['gaps_over_500_ms']} | {figures['cpu_s']:.1f} "
            f"| {figures['peak_rss_mb']:,} | {floor['p50']} / {floor['p99']} |"
        )
    return lines
