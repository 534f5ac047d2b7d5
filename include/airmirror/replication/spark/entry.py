"""Entry point of the spark-submit application (``spark_apps/replicate_batch.py``).

By default it runs step 3 of a batch (the copy job) for the flow's unfinished batch, inside whatever Spark
session spark-submit provides (a remote master included).  Planning and recording stay with the caller (the
Airflow tasks), so a retried submit simply resumes the same batch: see
:mod:`airmirror.replication.spark.task_writer` for why that is exactly-once.

With ``--continuous [--for DURATION]`` it runs the continuous loop of :mod:`airmirror.replication.continuous`
(every step of every batch) on that session, as ``airmirror replicate --continuous`` does.  A live DAG run
(:mod:`airmirror.dag_factory.live`) passes ``--live-seconds S`` (with its ``--topics`` and ``--max-records``
params): above zero, the flow's unfinished batch and then batches back to back run for ``S`` seconds; zero
is the default one-batch copy.

Its output, one line of JSON on stdout, is for the person or tool that submitted it (the DAG's
``SparkSubmitOperator`` reads none of it: ``record_batch`` reads what was copied from the metadata DB): an
array of :class:`~airmirror.model.RangeCopied` for a copy, a
:class:`~airmirror.replication.continuous.ContinuousReport` otherwise, as :func:`~airmirror.model.to_json`
writes them.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from datetime import timedelta

from pyspark.sql import SparkSession

from airmirror.config.durations import positive_duration
from airmirror.errors import AirmirrorError, ReplicationFailure
from airmirror.model import RangeCopied, to_json
from airmirror.replication.continuous import ContinuousReport, StopOnSignals, replicate_continuously
from airmirror.replication.options import BatchOptions, parse_batch_options
from airmirror.replication.pipeline import run_batch, unfinished_batch
from airmirror.store import describe_holder
from airmirror.store.opening import open_flow


def run_pending_batch(
    config_path: str, flow_name: str, batch_id: int | None, spark: SparkSession, holder: str
) -> list[RangeCopied]:
    """Copy the flow's unfinished batch (which must be ``batch_id`` when given), holding the flow's lease."""
    with (
        open_flow(config_path, flow_name) as (flow, store),
        store.hold_flow(flow.name, describe_holder(holder)) as lease,
    ):
        batch = unfinished_batch(flow, store)
        if batch is None or (batch_id is not None and batch.batch_id != batch_id):
            raise ReplicationFailure(f"flow {flow.name} has no unfinished batch {batch_id or ''}".rstrip())
        return run_batch(flow, store.fenced_by(lease), batch, lambda: spark)


def run_continuously(
    config_path: str,
    flow_name: str,
    duration: timedelta | None,
    spark: SparkSession,
    holder: str,
    options: BatchOptions | None = None,
) -> ContinuousReport:
    """Batches back to back on ``spark`` until ``duration`` has passed or a SIGTERM/SIGINT arrives."""
    with open_flow(config_path, flow_name) as (flow, store), StopOnSignals() as signals:
        return replicate_continuously(
            flow,
            store,
            options or BatchOptions(),
            lambda: spark,
            stop=signals.event,
            duration=duration,
            holder=describe_holder(holder),
        )


def live_options(args: argparse.Namespace) -> BatchOptions:
    """The live run's ``--topics`` and ``--max-records`` (its DAG params) as BatchOptions."""
    return parse_batch_options(
        named=lambda option: f"--{option.replace('_', '-')}",
        topics=args.topics or None,
        max_records=args.max_records,
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="replicate_batch.py", description="airmirror copy job for spark-submit")
    parser.add_argument("config")
    parser.add_argument("--flow", required=True)
    parser.add_argument("--batch-id", type=int)
    parser.add_argument("--holder", default="spark-submit replicate_batch.py", help="who holds the flow's lease")
    parser.add_argument("--continuous", action="store_true", help="plan, copy and record batches back to back")
    parser.add_argument("--for", dest="for_", metavar="DURATION", help="with --continuous: stop after 30s, 5m, 2h, 1d")
    parser.add_argument("--live-seconds", type=float, default=0.0, help="a live DAG run's window; 0: copy one batch")
    parser.add_argument("--topics", default="", help="with --live-seconds: the run's topics param")
    parser.add_argument(
        "--max-records",
        type=lambda text: int(text) if text else None,
        help="with --live-seconds: the run's max records param",
    )
    args = parser.parse_args(argv)
    spark = SparkSession.builder.appName(f"airmirror {args.flow}").getOrCreate()
    try:
        if args.live_seconds > 0:
            live = timedelta(seconds=args.live_seconds)
            report = run_continuously(args.config, args.flow, live, spark, args.holder, live_options(args))
            print(json.dumps(to_json(report)))
        elif args.continuous:
            duration = None if args.for_ is None else positive_duration(args.for_, "--for")
            print(json.dumps(to_json(run_continuously(args.config, args.flow, duration, spark, args.holder))))
        else:
            print(json.dumps(to_json(run_pending_batch(args.config, args.flow, args.batch_id, spark, args.holder))))
        return 0
    except AirmirrorError as error:
        print(f"airmirror: error: {error}", file=sys.stderr)
        return error.exit_code
    finally:
        spark.stop()
