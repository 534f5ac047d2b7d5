"""The ``airmirror`` command line.  Exit codes: 0 ok, 1 run-time failure, 2 bad input.

Every verb calls the same library functions the Airflow tasks call.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from collections.abc import Callable, Sequence
from dataclasses import asdict
from datetime import datetime, timedelta, timezone
from typing import Any

from airmirror.checkpoints.emission import CheckpointReport, emit_checkpoints
from airmirror.config import load_config
from airmirror.errors import AirmirrorError
from airmirror.store.opening import flow_and_store
from airmirror.checkpoints.inspection import GroupInspection, inspect_group
from airmirror.heartbeats.emission import emit_heartbeat
from airmirror.replication.incarnations import reset_topic
from airmirror.devtools.local_kafka import BrokerStatus, broker_status, start_broker, stop_broker
from airmirror.replication.pipeline import BatchOptions, ReplicateReport, replicate_once
from airmirror.replication.spark.session import BackgroundSession, spark_session
from airmirror.replication.status import PartitionStatus, flow_status
from airmirror.model import GroupSyncOutcome, GroupSyncRecord
from airmirror.store import describe_holder
from airmirror.replication.options import parse_timestamp


def parse_until(value: str | None) -> int | None:
    """``--until``: ``now`` or an ISO-8601 time (naive means UTC) -> epoch milliseconds."""
    return None if value is None else parse_timestamp(value, "--until", allow_now=True)


def parse_start_from(value: str) -> tuple[str, int | None]:
    """``--start-from``: stored, earliest, latest or an ISO-8601 time -> (mode, timestamp ms)."""
    if value in ("stored", "earliest", "latest"):
        return value, None
    return "timestamp", parse_timestamp(value, "--start-from")


def positive_int(value: str) -> int:
    try:
        number = int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"'{value}' is not a whole number") from None
    if number <= 0:
        raise argparse.ArgumentTypeError(f"'{value}' must be positive")
    return number


def cmd_validate(args: argparse.Namespace) -> int:
    config = load_config(args.config)
    for warning in config.warnings:
        print(f"warning: {warning}", file=sys.stderr)
    flows = ", ".join(f.name for f in config.enabled_flows()) or "none"
    print(f"{args.config}: valid; clusters: {', '.join(config.clusters)}; enabled flows: {flows}")
    return 0


def cmd_replicate(args: argparse.Namespace) -> int:
    start_from, start_ms = parse_start_from(args.start_from)
    options = BatchOptions(
        max_records=args.max_records,
        until_ms=parse_until(args.until),
        topics_regex=args.topics,
        dry_run=args.dry_run,
        start_from=start_from,
        start_ms=start_ms,
        reset_cursor=args.reset_cursor,
    )
    with flow_and_store(args.config, args.flow) as (flow, store):
        session_args = (flow.spark_master, f"airmirror {flow.name}", flow.spark_conf)
        spark = (lambda: spark_session(*session_args)) if args.dry_run else BackgroundSession(*session_args)
        report = replicate_once(flow, store, options, spark)
    print_replicate_report(report, args.json)
    return 0


def print_replicate_report(report: ReplicateReport, as_json: bool) -> None:
    planned = report.planned
    ranges = [
        {"topic": r.topic, "partition": r.partition, "remote_topic": r.remote_topic, "start": r.start, "end": r.end,
         "records_planned": r.size, "gap": [g.start, g.end] if (g := r.gap()) else None, "moved_from": r.moved_from}
        for r in planned.ranges
    ]
    document = {
        "batch_id": planned.batch_id,
        "resumed": planned.resumed,
        "dry_run": planned.batch_id is None,
        "created_topics": report.topics.created,
        "grown_topics": {k: list(v) for k, v in report.topics.grown.items()},
        "ranges": ranges,
        "records": report.summary.records if report.summary else 0,
        "bytes": report.summary.bytes if report.summary else 0,
        "seconds": round(report.seconds, 3),
    }
    if as_json:
        print(json.dumps(document, indent=2))
        return
    label = "plan (dry run, nothing changed)" if document["dry_run"] else f"batch {planned.batch_id}"
    print(f"{label}{' (resumed)' if planned.resumed else ''}")
    for name in report.topics.created:
        print(f"  {'would create' if document['dry_run'] else 'created'} remote topic {name}")
    for r in ranges:
        gap = f"  gap {r['gap'][0]}..{r['gap'][1]}" if r["gap"] else ""
        gap += f"  cursor moved from {r['moved_from']}" if r["moved_from"] is not None else ""
        print(f"  {r['topic']}-{r['partition']} -> {r['remote_topic']}: [{r['start']}, {r['end']}) {r['records_planned']} offsets{gap}")
    if report.summary is not None:
        mb = report.summary.bytes / 1e6
        print(f"copied {report.summary.records} records, {mb:.1f} MB in {report.seconds:.1f}s")


def cmd_status(args: argparse.Namespace) -> int:
    with flow_and_store(args.config, args.flow) as (flow, store):
        status = flow_status(flow, store)
        emission = store.heartbeat_emission(flow.name)
        latencies, syncs = store.heartbeat_latencies(flow.name), store.group_syncs(flow.name)
    if args.json:
        extras = {
            "heartbeat_emitted": None if emission is None else asdict(emission),
            "heartbeats": [asdict(latency) for latency in latencies],
            "group_syncs": [asdict(sync) for sync in syncs],
        }
        print(to_json({**status.as_dict(), **extras}))
        return 0
    print(f"flow {status.flow}: total lag {status.total_lag}" + (f", unfinished batch {status.unfinished_batch}" if status.unfinished_batch else ""))
    header = f"{'partition':<32} {'remote':<32} {'start':>10} {'end':>10} {'cursor':>10} {'lag':>10} {'copied':>10} {'gaps':>5} {'lost':>8}"
    print(header)
    for p in status.partitions:
        cursor = "-" if p.cursor is None else str(p.cursor)
        print(
            f"{p.topic + '-' + str(p.partition):<32} {p.remote_topic:<32} {p.source_start:>10} {p.source_end:>10} "
            f"{cursor:>10} {p.lag:>10} {p.records_copied:>10} {p.gaps:>5} {p.gap_records:>8}"
        )
    for p in status.future_timestamped:
        print(describe_future_timestamp(p, status.checked_at_ms))
    for p in status.partitions:
        if p.source_reset is not None:
            print(f"WARNING {p.topic}-{p.partition}: source topic {p.source_reset}; the next run starts it again (cursor {p.cursor})")
    for stop in status.stops:
        print(f"STOPPED since {stop.stopped_at.isoformat(timespec='seconds')}: {stop.reason}")
    for reset in status.source_resets:
        print(
            f"source reset of {reset.topic}-{reset.partition} at {reset.reset_at.isoformat(timespec='seconds')} "
            f"(batch {reset.batch_id}): cursor {reset.old_cursor} of topic id {reset.old_topic_id} abandoned, "
            f"copied again from {reset.new_start} of topic id {reset.new_topic_id}"
        )
    if emission is not None:
        print(f"heartbeat emitted to {emission.topic} at {emission.heartbeat_at.isoformat(timespec='seconds')}")
    for latency in latencies:
        print(
            f"heartbeat {latency.source_alias}->{latency.target_alias}: latency {latency.latency_ms} ms "
            f"(observed {latency.observed_at.isoformat(timespec='seconds')})"
        )
    for sync in syncs:
        print(describe_sync(sync))
    return 0


def describe_future_timestamp(partition: PartitionStatus, now_ms: int) -> str:
    """A WARNING line about a partition whose next record to copy is stamped in the future."""
    stamped = datetime.fromtimestamp(partition.future_timestamp_ms / 1000, timezone.utc)
    ahead = timedelta(seconds=round((partition.future_timestamp_ms - now_ms) / 1000))
    return (
        f"WARNING {partition.topic}-{partition.partition}: the next record to copy (offset "
        f"{partition.future_timestamp_offset}) is stamped {stamped.isoformat(timespec='seconds')}, {ahead} in the "
        "future: backfill runs and runs with an explicit until stop before it until then; scheduled runs and "
        "manual runs without until copy past it"
    )


def describe_sync(sync: GroupSyncRecord) -> str:
    """One line about a group offset sync; skipped and failed ones start with WARNING."""
    marker = "WARNING " if sync.outcome in (GroupSyncOutcome.SKIPPED_ACTIVE, GroupSyncOutcome.FAILED) else ""
    when = sync.synced_at.isoformat(timespec="seconds")
    return f"{marker}group offset sync of '{sync.group}': {sync.outcome.value}: {sync.detail} ({when})"


def to_json(document: Any) -> str:
    """JSON text of ``document``; datetimes as ISO-8601."""
    return json.dumps(document, indent=2, default=lambda value: value.isoformat())


def cmd_heartbeat(args: argparse.Namespace) -> int:
    with flow_and_store(args.config, args.flow) as (flow, store):
        report = emit_heartbeat(flow, store)
    heartbeat = report.heartbeat
    if args.json:
        print(to_json({"flow": report.flow, "topic": report.topic, "heartbeat": None if heartbeat is None else asdict(heartbeat)}))
    elif heartbeat is None:
        print(f"flow {report.flow}: emit.heartbeats.enabled is false, no heartbeat written")
    else:
        print(f"flow {report.flow}: heartbeat {heartbeat.timestamp} written to {report.topic} on {heartbeat.target_alias}")
    return 0


def cmd_checkpoint(args: argparse.Namespace) -> int:
    with flow_and_store(args.config, args.flow) as (flow, store):
        report = emit_checkpoints(flow, store)
    print_checkpoint_report(report, args.json)
    return 0


def print_checkpoint_report(report: CheckpointReport, as_json: bool) -> None:
    if as_json:
        print(to_json({**asdict(report), "written": report.written, "skipped_groups": report.skipped_groups}))
        return
    if not report.enabled:
        print(f"flow {report.flow}: emit.checkpoints.enabled is false, no checkpoints and no group offset sync")
        return
    print(f"flow {report.flow}: {report.written} checkpoints written to {report.topic} for {len(report.groups)} groups")
    for group in report.groups:
        sync = "" if group.sync is None else f"; offset sync {group.sync.outcome.value}: {group.sync.detail}"
        print(
            f"  {group.group}: {len(group.written)} written, {len(group.unchanged)} unchanged, "
            f"{len(group.not_yet)} not yet replicated{sync}"
        )
    for group in report.skipped_groups:
        print(f"warning: group '{group}' is active on the target: its offsets were not synced", file=sys.stderr)


def cmd_translate(args: argparse.Namespace) -> int:
    with flow_and_store(args.config, args.flow) as (flow, store):
        inspection = inspect_group(flow, store, args.group)
    print_inspection(inspection, args.json)
    return 0


def print_inspection(inspection: GroupInspection, as_json: bool) -> None:
    if as_json:
        print(to_json(asdict(inspection)))
        return
    covered = "" if inspection.covered else " (excluded by groups/groups.exclude: no checkpoints are emitted)"
    print(f"flow {inspection.flow}, group {inspection.group}{covered}")
    print(f"{'partition':<32} {'target partition':<32} {'committed':>10} {'target':>10} {'unreplicated':>12} {'checkpoint':>10}")
    for p in inspection.partitions:
        target = "not yet" if p.target_offset is None else str(p.target_offset)
        checkpoint = "-" if p.checkpoint_offset is None else str(p.checkpoint_offset)
        print(
            f"{p.topic + '-' + str(p.partition):<32} {p.target_topic + '-' + str(p.partition):<32} "
            f"{p.committed_offset:>10} {target:>10} {p.not_replicated:>12} {checkpoint:>10}"
        )
    if inspection.sync is not None:
        print(describe_sync(inspection.sync))


def broker_setting(value: str) -> tuple[str, str]:
    """``--broker-config KEY=VALUE`` -> ``(KEY, VALUE)``; the key is checked by ``start_broker``."""
    key, separator, setting = value.partition("=")
    if not separator or not key:
        raise argparse.ArgumentTypeError(f"'{value}' is not KEY=VALUE")
    return key, setting


def describe_nodes(status: BrokerStatus) -> str:
    """``running (pid P)`` or ``stopped``; for several nodes, that of each node."""
    states = [f"running (pid {node.pid})" if node.running else "stopped" for node in status.nodes]
    if len(states) == 1:
        return states[0]
    return ", ".join(f"node {node.node_id} {state}" for node, state in zip(status.nodes, states))


def cmd_local_kafka(args: argparse.Namespace) -> int:
    if args.action == "start":
        broker = start_broker(args.name, args.port, brokers=args.brokers, broker_config=dict(args.broker_config))
        pids = ", ".join(str(node.pid) for node in broker.status().nodes)
        print(f"kafka '{broker.name}' running on {broker.bootstrap} (pid{'s' if broker.brokers > 1 else ''} {pids})")
    elif args.action == "stop":
        stopped = stop_broker(args.name)
        print(f"kafka '{args.name}' {'stopped' if stopped else 'was not running'}")
    else:
        for status in broker_status():
            print(f"{status.name:<16} {status.bootstrap:<22} {describe_nodes(status)}")
    return 0


def cmd_reset(args: argparse.Namespace) -> int:
    with flow_and_store(args.config, args.flow) as (flow, store):
        done = reset_topic(flow, store, args.topic, describe_holder("airmirror reset"))
    if args.json:
        print(to_json(asdict(done)))
    else:
        print(
            f"flow {done.flow}: {done.topic} reset ({len(done.partitions)} cursors removed, offset-syncs retired); "
            f"the next run copies it from its start into {done.remote_topic}"
        )
    return 0


def flow_verb(
    verbs: argparse._SubParsersAction, name: str, help_text: str, run: Callable[[argparse.Namespace], int]
) -> argparse.ArgumentParser:
    """A verb taking ``CONFIG --flow A->B [--json]``."""
    verb = verbs.add_parser(name, help=help_text)
    verb.add_argument("config")
    verb.add_argument("--flow", required=True, help="source->target")
    verb.add_argument("--json", action="store_true")
    verb.set_defaults(run=run)
    return verb


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="airmirror", description="MirrorMaker 2 compatible replication on Spark")
    parser.add_argument("-v", "--verbose", action="store_true", help="log progress to stderr")
    verbs = parser.add_subparsers(dest="verb", required=True)

    validate = verbs.add_parser("validate", help="check an MM2 properties file")
    validate.add_argument("config")
    validate.set_defaults(run=cmd_validate)

    replicate = verbs.add_parser("replicate", help="copy one bounded micro-batch of a flow")
    replicate.add_argument("config")
    replicate.add_argument("--flow", required=True, help="source->target")
    replicate.add_argument("--max-records", type=positive_int, help="cap per partition")
    replicate.add_argument("--until", help="ISO-8601 time or 'now': copy records before it")
    replicate.add_argument("--topics", help="regex narrowing the flow's topics for this batch")
    replicate.add_argument(
        "--start-from", default="stored", help="stored (default), earliest, latest or an ISO-8601 time"
    )
    replicate.add_argument("--reset-cursor", action="store_true", help="allow --start-from to move existing cursors")
    replicate.add_argument("--dry-run", action="store_true", help="print the plan, change nothing")
    replicate.add_argument("--json", action="store_true")
    replicate.set_defaults(run=cmd_replicate)

    status = verbs.add_parser("status", help="per-partition cursor, lag and gaps of a flow")
    status.add_argument("config")
    status.add_argument("--flow", required=True, help="source->target")
    status.add_argument("--json", action="store_true")
    status.set_defaults(run=cmd_status)

    flow_verb(verbs, "heartbeat", "write one MM2 heartbeat of a flow to its target", cmd_heartbeat)
    flow_verb(verbs, "checkpoint", "write MM2 checkpoints of the source groups, sync group offsets", cmd_checkpoint)
    translate = flow_verb(verbs, "translate", "a source group's committed offsets translated to the target", cmd_translate)
    translate.add_argument("--group", required=True, help="consumer group id on the source")
    reset = flow_verb(verbs, "reset", "re-seed a topic stopped by a deleted or recreated topic", cmd_reset)
    reset.add_argument("--topic", required=True, help="source topic to copy again from its start")

    local_kafka = verbs.add_parser("local-kafka", help="run real KRaft Kafka clusters on 127.0.0.1")
    actions = local_kafka.add_subparsers(dest="action", required=True)
    start = actions.add_parser("start")
    start.add_argument("name")
    start.add_argument("--port", type=int, required=True, help="client port of node 1")
    start.add_argument(
        "--brokers", type=positive_int, default=1, metavar="N",
        help="number of nodes, on ports PORT to PORT+N-1 (default 1)",
    )
    start.add_argument(
        "--broker-config", type=broker_setting, action="append", default=[], metavar="KEY=VALUE",
        help="extra setting for every node's server.properties (repeatable)",
    )
    stop = actions.add_parser("stop")
    stop.add_argument("name")
    actions.add_parser("status")
    local_kafka.set_defaults(run=cmd_local_kafka)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    try:
        return args.run(args)
    except AirmirrorError as error:
        print(f"airmirror: error: {error}", file=sys.stderr)
        return error.exit_code
    except KeyboardInterrupt:
        return 130
    except Exception as error:  # noqa: BLE001 - any other failure is a run-time failure, exit 1
        if args.verbose:
            logging.exception("unexpected failure")
        print(f"airmirror: error: {type(error).__name__}: {error}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
