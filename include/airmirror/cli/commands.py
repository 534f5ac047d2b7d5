"""One function per CLI verb: parse nothing, print nothing of their own; each calls the same library functions
the Airflow tasks call, then hands the result to :mod:`airmirror.cli.render`.  Each returns the exit code.

A verb imports the library modules that need the metadata DB or Spark when it runs, so that ``validate`` and
``acls`` import neither.
"""

from __future__ import annotations

import argparse
import sys
from datetime import UTC, datetime, timedelta

from airmirror.cli import render
from airmirror.config import load_config
from airmirror.config.durations import positive_duration
from airmirror.config.explain import explain_flow
from airmirror.errors import InputError
from airmirror.kafka.acls import principal, required_acls, takeover_acls
from airmirror.replication.options import BatchOptions, parse_batch_options

REPLICATE_OPTIONS = ("topics", "start_from", "until", "max_records", "dry_run", "reset_cursor")
"""The ``replicate`` flags that are batch options (:func:`~airmirror.replication.options.parse_batch_options`)."""


def flag(option: str) -> str:
    """How an error names a ``replicate`` option: ``start_from`` -> ``--start-from``."""
    return "--" + option.replace("_", "-")


def validate(args: argparse.Namespace) -> int:
    config = load_config(args.config)
    for warning in config.warnings:
        print(f"warning: {warning}", file=sys.stderr)
    if (args.flow or args.json) and not args.explain:
        raise InputError("--flow and --json: only with --explain")
    if args.explain:
        flows = [config.flow(args.flow)] if args.flow else config.enabled_flows()
        render.print_explanations({flow.name: explain_flow(config, flow) for flow in flows}, args.json)
        return 0
    flows_named = ", ".join(f.name for f in config.enabled_flows()) or "none"
    print(f"{args.config}: valid; clusters: {', '.join(config.clusters)}; enabled flows: {flows_named}")
    return 0


def replicate(args: argparse.Namespace) -> int:
    from airmirror.replication.pipeline import replicate_once
    from airmirror.replication.run_failures import failures_recorded
    from airmirror.replication.spark.session import BackgroundSession, spark_session
    from airmirror.store.opening import open_flow

    given = {option: getattr(args, option) for option in REPLICATE_OPTIONS}
    options = parse_batch_options(named=flag, allow_now=True, **given)
    if args.continuous or args.for_ is not None:
        return replicate_continuously_for(args, options)
    with open_flow(args.config, args.flow) as (flow, store), failures_recorded(flow, store):
        session_args = (flow.spark.master, f"airmirror {flow.name}", flow.spark.conf)
        spark = (lambda: spark_session(*session_args)) if args.dry_run else BackgroundSession(*session_args)
        report = replicate_once(flow, store, options, spark)
    render.print_replicate_report(report, args.json)
    return 0


def run_duration(args: argparse.Namespace) -> timedelta | None:
    """``--for DURATION`` (only with ``--continuous``), or ``None`` to run until a signal."""
    if args.for_ is None:
        return None
    if not args.continuous:
        raise InputError("--for: only with --continuous")
    return positive_duration(args.for_, "--for")


def replicate_continuously_for(args: argparse.Namespace, options: BatchOptions) -> int:
    """``replicate --continuous [--for DURATION]``: batches back to back until the duration or a signal."""
    from airmirror.replication.continuous import StopOnSignals, replicate_continuously
    from airmirror.replication.run_failures import failures_recorded
    from airmirror.replication.spark.session import BackgroundSession
    from airmirror.store.opening import open_flow

    duration = run_duration(args)
    with open_flow(args.config, args.flow) as (flow, store), failures_recorded(flow, store), StopOnSignals() as signals:
        spark = BackgroundSession(flow.spark.master, f"airmirror {flow.name}", flow.spark.conf)
        on_batch = None if args.json else render.print_batch_summary
        report = replicate_continuously(
            flow, store, options, spark, stop=signals.event, duration=duration, on_batch=on_batch
        )
    render.print_continuous_report(report, args.json)
    return 0


def schemas(args: argparse.Namespace) -> int:
    from airmirror.replication.schema_sync import schemas_verb
    from airmirror.store.opening import open_flow

    with open_flow(args.config, args.flow) as (flow, store):
        report = schemas_verb(flow, store, dry_run=args.dry_run)
    render.print_schema_sync(flow.name, report, args.dry_run, args.json)
    return 0


def status(args: argparse.Namespace) -> int:
    """One flow's partitions with ``--flow``; else every enabled flow's health, one line each, worst first."""
    from airmirror.replication.health import latency_note
    from airmirror.replication.status import flow_status
    from airmirror.store.opening import open_flow

    if args.flow is None:
        return status_overview(args)
    enabled = {flow.name for flow in load_config(args.config).enabled_flows()}
    with open_flow(args.config, args.flow) as (flow, store):
        current = flow_status(flow, store)
        emission = store.heartbeat_emission(flow.name)
        latencies, syncs = store.heartbeat_latencies(flow.name), store.group_syncs(flow.name)
        verification = store.last_verification(flow.name)
    note = None if latencies else latency_note(flow, f"{flow.target}->{flow.source}" in enabled, emission)
    render.print_status(current, emission, latencies, syncs, verification, note, args.json)
    return 0


def status_overview(args: argparse.Namespace) -> int:
    """``status CONFIG``: :func:`~airmirror.replication.health.flow_health` of every enabled flow."""
    from airmirror.replication.health import flow_health, worst_first
    from airmirror.store.opening import open_flow

    flows = load_config(args.config).enabled_flows()
    enabled = {flow.name for flow in flows}
    now = datetime.now(UTC)
    healths = []
    for named in flows:
        with open_flow(args.config, named.name) as (flow, store):
            reverse = f"{flow.target}->{flow.source}" in enabled
            healths.append(flow_health(flow, store, now, reverse_enabled=reverse))
    render.print_overview(worst_first(healths), args.json)
    return 0


def verify(args: argparse.Namespace) -> int:
    """Exit 0 when every partition is equal, 1 when any differs."""
    from airmirror.migration.verification import verify_flow
    from airmirror.replication.spark.session import BackgroundSession
    from airmirror.store.opening import open_flow

    topics = parse_batch_options(named=flag, topics=args.topics).topics_regex
    with open_flow(args.config, args.flow) as (flow, store):
        spark = BackgroundSession(flow.spark.master, f"airmirror verify {flow.name}", flow.spark.conf).start()
        verification = verify_flow(flow, store, spark, topics, render.print_verify_progress)
    render.print_verification(verification, args.json)
    return 0 if verification.equal else 1


def heartbeat(args: argparse.Namespace) -> int:
    from airmirror.heartbeats.heartbeat_emitter import emit_heartbeat
    from airmirror.store.opening import open_flow

    with open_flow(args.config, args.flow) as (flow, store):
        report = emit_heartbeat(flow, store)
    render.print_heartbeat_report(report, args.json)
    return 0


def checkpoint(args: argparse.Namespace) -> int:
    from airmirror.checkpoints.checkpoint_emitter import emit_checkpoints
    from airmirror.store.opening import open_flow

    with open_flow(args.config, args.flow) as (flow, store):
        report = emit_checkpoints(flow, store)
    render.print_checkpoint_report(report, args.json)
    return 0


def translate(args: argparse.Namespace) -> int:
    from airmirror.checkpoints.translate_view import inspect_group
    from airmirror.store.opening import open_flow

    with open_flow(args.config, args.flow) as (flow, store):
        inspection = inspect_group(flow, store, args.group)
    render.print_inspection(inspection, args.json)
    return 0


def reset(args: argparse.Namespace) -> int:
    from airmirror.replication.incarnations import reset_topic
    from airmirror.store import describe_holder
    from airmirror.store.opening import open_flow

    with open_flow(args.config, args.flow) as (flow, store):
        done = reset_topic(flow, store, args.topic, describe_holder("airmirror reset"))
    render.print_topic_reset(done, args.json)
    return 0


def takeover(args: argparse.Namespace) -> int:
    from airmirror.migration.takeover import take_over_from_mm2
    from airmirror.store.opening import open_flow

    with open_flow(args.config, args.flow) as (flow, store):
        plan = take_over_from_mm2(flow, store, dry_run=args.dry_run, mm2_stopped=args.mm2_stopped)
    render.print_takeover(plan, args.json)
    return 0


def acls(args: argparse.Namespace) -> int:
    flow = load_config(args.config).flow(args.flow)
    principals = {alias: principal(flow, alias) for alias in (flow.source, flow.target)}
    listed = required_acls(flow) + (takeover_acls(flow) if args.takeover else [])
    render.print_acls(flow.name, principals, listed, args.json)
    return 0
