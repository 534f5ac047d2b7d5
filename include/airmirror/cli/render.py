"""How the CLI shows results: text for people, ``--json`` for programs.  Printing only, no Kafka or DB."""

from __future__ import annotations

import json
import sys
from dataclasses import asdict
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from airmirror.config.schema_registries import SchemaIds
from airmirror.model import (
    GroupSyncOutcome,
    GroupSyncRecord,
    HeartbeatEmission,
    HeartbeatLatency,
    MovesCursor,
    PartitionVerification,
    Verdict,
    Verification,
    utc_text,
)

if TYPE_CHECKING:  # the reports' modules import Spark and the DB: only verbs that need them import them
    from airmirror.checkpoints.checkpoint_emitter import CheckpointReport
    from airmirror.checkpoints.translate_view import GroupInspection
    from airmirror.config.explain import EffectiveSetting
    from airmirror.heartbeats.heartbeat_emitter import HeartbeatReport
    from airmirror.kafka.acls import AclRequirement
    from airmirror.migration.takeover import TakeoverPlan
    from airmirror.replication.continuous import ContinuousReport
    from airmirror.replication.health import FlowHealth
    from airmirror.replication.incarnations import TopicReset
    from airmirror.replication.pipeline import BatchSummary, ReplicateReport
    from airmirror.replication.schema_sync import SchemaSyncReport
    from airmirror.replication.status import FlowStatus, PartitionStatus, SchemaFigures


def to_json(document: Any) -> str:
    """JSON text of ``document``; datetimes as ISO-8601."""
    return json.dumps(document, indent=2, default=lambda value: value.isoformat())


def print_replicate_report(report: ReplicateReport, as_json: bool) -> None:
    planned = report.planned
    ranges = [
        {
            "topic": r.topic,
            "partition": r.partition,
            "remote_topic": r.remote_topic,
            "start": r.start,
            "end": r.end,
            "records_planned": r.size,
            "gap": [g.start, g.end] if (g := r.gap()) else None,
            "moved_from": r.begins.cursor if isinstance(r.begins, MovesCursor) else None,
        }
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
    for r in planned.ranges:
        gap = f"  gap {g.start}..{g.end}" if (g := r.gap()) else ""
        gap += f"  cursor moved from {r.begins.cursor}" if isinstance(r.begins, MovesCursor) else ""
        print(f"  {r.topic}-{r.partition} -> {r.remote_topic}: [{r.start}, {r.end}) {r.size} offsets{gap}")
    if report.summary is not None:
        mb = report.summary.bytes / 1e6
        print(f"copied {report.summary.records} records, {mb:.1f} MB in {report.seconds:.1f}s")


def print_batch_summary(summary: BatchSummary) -> None:
    """One line per committed batch of a continuous run, printed as it commits."""
    print(f"batch {summary.batch_id}: copied {summary.records} records, {summary.bytes / 1e6:.1f} MB", flush=True)


def print_continuous_report(report: ContinuousReport, as_json: bool) -> None:
    if as_json:
        print(to_json(asdict(report)))
        return
    print(
        f"stopped by {report.stopped_by} after {report.seconds:.1f}s: {report.batches} batches, "
        f"{report.records} records, {report.bytes / 1e6:.1f} MB"
        + (f", {report.retries} failed rounds retried" if report.retries else "")
    )


def print_status(
    status: FlowStatus,
    emission: HeartbeatEmission | None,
    latencies: list[HeartbeatLatency],
    syncs: list[GroupSyncRecord],
    verification: Verification | None,
    latency_note: str | None,
    as_json: bool,
) -> None:
    if as_json:
        extras = {
            "latency_note": latency_note,
            "heartbeat_emitted": None if emission is None else asdict(emission),
            "heartbeats": [asdict(latency) for latency in latencies],
            "group_syncs": [asdict(sync) for sync in syncs],
            "verification": None if verification is None else verification.as_dict(),
        }
        print(to_json({**status.as_dict(), **extras}))
        return
    print(
        f"flow {status.flow}: total lag {status.total_lag}"
        + (f", unfinished batch {status.unfinished_batch}" if status.unfinished_batch else "")
    )
    header = (
        f"{'partition':<32} {'remote':<32} {'start':>10} {'end':>10} {'cursor':>10} {'lag':>10} {'age s':>8} "
        f"{'latency s':>9} {'copied':>10} {'filtered':>10} {'skipped':>8} {'gaps':>5} {'lost':>8}"
    )
    print(header)
    for p in status.partitions:
        cursor = "-" if p.cursor is None else str(p.cursor)
        print(
            f"{p.topic + '-' + str(p.partition):<32} {p.remote_topic:<32} {p.source_start:>10} {p.source_end:>10} "
            f"{cursor:>10} {p.lag:>10} {seconds(p.record_age_ms):>8} {seconds(p.replication_latency_ms):>9} "
            f"{p.records_copied:>10} {p.records_filtered:>10} {p.records_skipped:>8} {p.gaps:>5} {p.gap_records:>8}"
        )
    print_partition_warnings(status)
    if status.schemas.mode is not SchemaIds.OFF:
        print(describe_schemas(status.schemas))
    if verification is not None:
        print_last_verification(verification)
    if latency_note is not None:
        print(f"heartbeat latency: n/a, {latency_note}")
    elif emission is not None:
        print(f"heartbeat emitted to {emission.topic} at {emission.heartbeat_at.isoformat(timespec='seconds')}")
    for latency in latencies:
        print(
            f"heartbeat {latency.source_alias}->{latency.target_alias}: latency {latency.latency_ms} ms "
            f"(observed {latency.observed_at.isoformat(timespec='seconds')})"
        )
    for sync in syncs:
        print(describe_sync(sync))


def print_overview(healths: list[FlowHealth], as_json: bool) -> None:
    """Every flow's health, one line each, worst first (``airmirror status CONFIG``)."""
    if as_json:
        print(to_json([health.as_json() for health in healths]))
        return
    for h in healths:
        print(describe_health(h))


def describe_health(h: FlowHealth) -> str:
    """``a->b  lagging  lag 1200 records, oldest 412.0 s, latency 0.3 s, last copy 2026-...Z, gaps 0, stopped 0``."""
    latency = "n/a" if h.replication_latency_ms is None else f"{seconds(h.replication_latency_ms)} s"
    last = "never" if h.last_success_at is None else utc_text(h.last_success_at)
    line = (
        f"{h.flow}  {', '.join(state.value for state in h.states)}  lag {h.lag_records} records, oldest "
        f"{seconds(h.oldest_record_age_ms)} s, latency {latency}, last copy {last}, gaps {h.gaps}, "
        f"stopped partitions {h.stopped_partitions}"
    )
    if h.records_filtered or h.records_skipped:
        line += f", filtered {h.records_filtered}, skipped {h.records_skipped}"
    if h.live_run_since is not None:
        line += f", running since {utc_text(h.live_run_since)}"
    if h.last_failure is not None and h.state.value == "failing":
        line += f"; last run failed {utc_text(h.last_failure.failed_at)}: {h.last_failure.error.splitlines()[0]}"
    return line


def describe_schemas(figures: SchemaFigures) -> str:
    """``schemas: translate, 3 subjects synced, 7 ids mapped, 0 records passed through``."""
    return (
        f"schemas: {figures.mode.value}, {figures.subjects} subjects synced, {figures.ids_mapped} ids mapped, "
        f"{figures.records_passed} records passed through"
    )


def print_partition_warnings(status: FlowStatus) -> None:
    """The lines of ``status`` about partitions that need attention: future timestamps, source resets, stops,
    partitions waiting for a leader."""
    for p in status.future_timestamped:
        print(describe_future_timestamp(p, status.checked_at_ms))
    for p in status.partitions:
        if p.source_reset is not None:
            print(
                f"WARNING {p.topic}-{p.partition}: source topic {p.source_reset}; the next run starts it again "
                f"(cursor {p.cursor})"
            )
    for stop in status.stops:
        print(f"STOPPED since {stop.stopped_at.isoformat(timespec='seconds')}: {stop.reason}")
    for wait in status.waiting_for_leader:
        print(
            f"WAITING {wait.topic}-{wait.partition}: waiting for a leader since "
            f"{wait.since.isoformat(timespec='seconds')} ({wait.reason}); the other partitions are copied, and this "
            "one goes on by itself once its leader is back"
        )
    for reset in status.source_resets:
        print(
            f"source reset of {reset.topic}-{reset.partition} at {reset.reset_at.isoformat(timespec='seconds')} "
            f"(batch {reset.batch_id}): cursor {reset.old_cursor} of topic id {reset.old_topic_id} abandoned, "
            f"copied again from {reset.new_start} of topic id {reset.new_topic_id}"
        )


def print_last_verification(verification: Verification) -> None:
    """The flow's last verification: its verdict counts and every partition that is not equal."""
    verified_at = verification.verified_at.isoformat(timespec="seconds")
    print(f"last verification {verification.id} at {verified_at}: {verdict_counts(verification)}")
    for partition in verification.partitions:
        if partition.verdict is not Verdict.EQUAL:
            print(describe_verified_partition(partition))


def seconds(milliseconds: int | None) -> str:
    """A duration in ms as seconds with one decimal, ``-`` when unknown."""
    return "-" if milliseconds is None else f"{milliseconds / 1000:.1f}"


def describe_future_timestamp(partition: PartitionStatus, now_ms: int) -> str:
    """A WARNING line about a partition whose next record to copy is stamped in the future."""
    stamped_ms = partition.future_timestamp_ms
    if stamped_ms is None:
        raise ValueError(f"{partition.topic}-{partition.partition} has no record stamped in the future")
    stamped = datetime.fromtimestamp(stamped_ms / 1000, UTC)
    ahead = timedelta(seconds=round((stamped_ms - now_ms) / 1000))
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


def print_heartbeat_report(report: HeartbeatReport, as_json: bool) -> None:
    heartbeat = report.heartbeat
    if as_json:
        print(
            to_json(
                {
                    "flow": report.flow,
                    "topic": report.topic,
                    "heartbeat": None if heartbeat is None else asdict(heartbeat),
                }
            )
        )
    elif heartbeat is None:
        print(f"flow {report.flow}: {report.off_by}, no heartbeat written")
    else:
        print(
            f"flow {report.flow}: heartbeat {heartbeat.timestamp} written to {report.topic} on {heartbeat.target_alias}"
        )


def print_checkpoint_report(report: CheckpointReport, as_json: bool) -> None:
    if as_json:
        extra = {"enabled": report.off_by is None, "written": report.written, "skipped_groups": report.skipped_groups}
        print(to_json({**asdict(report), **extra}))
        return
    if report.off_by is not None:
        print(f"flow {report.flow}: {report.off_by}, no checkpoints and no group offset sync")
        return
    print(f"flow {report.flow}: {report.written} checkpoints written to {report.topic} for {len(report.groups)} groups")
    for group in report.groups:
        sync = "" if group.sync is None else f"; offset sync {group.sync.outcome.value}: {group.sync.detail}"
        print(
            f"  {group.group}: {len(group.written)} written, {len(group.unchanged)} unchanged, "
            f"{len(group.not_yet)} not yet replicated{sync}"
        )
    for skipped in report.skipped_groups:
        print(f"warning: group '{skipped}' is active on the target: its offsets were not synced", file=sys.stderr)


def print_inspection(inspection: GroupInspection, as_json: bool) -> None:
    if as_json:
        print(to_json(asdict(inspection)))
        return
    covered = "" if inspection.covered else " (excluded by groups/groups.exclude: no checkpoints are emitted)"
    print(f"flow {inspection.flow}, group {inspection.group}{covered}")
    print(
        f"{'partition':<32} {'target partition':<32} {'committed':>10} {'target':>10} {'unreplicated':>12} "
        f"{'checkpoint':>10}"
    )
    for p in inspection.partitions:
        target = str(p.target_offset) if p.target_offset is not None else "never" if p.never else "not yet"
        checkpoint = "-" if p.checkpoint_offset is None else str(p.checkpoint_offset)
        print(
            f"{p.topic + '-' + str(p.partition):<32} {p.target_topic + '-' + str(p.partition):<32} "
            f"{p.committed_offset:>10} {target:>10} {p.not_replicated:>12} {checkpoint:>10}"
        )
    if inspection.sync is not None:
        print(describe_sync(inspection.sync))


def print_topic_reset(done: TopicReset, as_json: bool) -> None:
    if as_json:
        print(to_json(asdict(done)))
    else:
        print(
            f"flow {done.flow}: {done.topic} reset ({len(done.partitions)} cursors removed, offset-syncs retired); "
            f"the next run copies it from its start into {done.remote_topic}"
        )


def print_acls(flow: str, principals: dict[str, str], acls: list[AclRequirement], as_json: bool) -> None:
    """The ACLs of each cluster, for ``principals`` (cluster alias -> ``User:NAME``), as a table or JSON."""
    if as_json:
        print(to_json({"flow": flow, "principals": principals, "acls": [asdict(acl) for acl in acls]}))
        return
    for cluster, principal in principals.items():
        print(f"cluster {cluster}: ALLOW {principal}")
        print(f"  {'resource':<17} {'pattern':<9} {'name':<36} {'operations':<64} needed by")
        for acl in (a for a in acls if a.cluster == cluster):
            print(
                f"  {acl.resource_type:<17} {acl.pattern_type:<9} {acl.name:<36} {','.join(acl.operations):<64} "
                f"{acl.purpose}"
            )


def verdict_counts(verification: Verification) -> str:
    """``3 equal, 1 extra``: how many partitions got each verdict."""
    return ", ".join(f"{n} {verdict}" for verdict, n in verification.counts().items() if n) or "no partitions"


def describe_verified_partition(p: PartitionVerification) -> str:
    """One line: the verdict and where, the ranges compared, the records of each side and any compaction; the
    reason of a partition that could not be compared."""
    if p.verdict not in WHERE and p.verdict is not Verdict.EQUAL:
        return f"  {p.topic}-{p.partition} -> {p.remote_topic}: {p.verdict.value.upper()}: {p.reason}"
    verdict = (
        p.verdict.value
        if p.verdict is Verdict.EQUAL
        else f"{p.verdict.value.upper()} {WHERE[p.verdict]} {p.first_offset}"
    )
    counts = ", ".join(
        f"{n} {name}"
        for name, n in (
            ("missing", p.missing),
            ("extra", p.extra),
            ("different", p.different),
            ("schema_id", p.schema_id),
        )
        if n
    )
    schema_id = (
        f"first schema id difference: {p.schema_id_difference}"
        if p.schema_id_difference and p.verdict is not Verdict.SCHEMA_ID
        else ""
    )
    compaction = ", ".join(
        f"{n} compacted on the {side}"
        for side, n in (("source", p.compacted_source), ("target", p.compacted_target))
        if n
    )
    filtered = f"{p.filtered} filtered by the flow's transforms" if p.filtered else ""
    details = "; ".join(part for part in (p.reason, counts, schema_id, compaction, filtered, p.note) if part)
    return (
        f"  {p.topic}-{p.partition} -> {p.remote_topic}: {verdict}; source [{p.source_start}, {p.source_end}) "
        f"{p.source_records} records, target [{p.target_start}, {p.target_end}) {p.target_records} records"
        + (f" ({details})" if details else "")
    )


#: Where the first difference of a compared partition is, by verdict.
WHERE = {
    Verdict.EXTRA: "at target offset",
    Verdict.MISSING: "from source offset",
    Verdict.DIFFERENT: "at source offset",
    Verdict.SCHEMA_ID: "at source offset",
}


def print_verification(verification: Verification, as_json: bool) -> None:
    if as_json:
        print(to_json(verification.as_dict()))
        return
    narrowed = f" (topics {verification.topics_regex})" if verification.topics_regex else ""
    print(f"verification {verification.id} of flow {verification.flow}{narrowed}: {verdict_counts(verification)}")
    for partition in verification.partitions:
        print(describe_verified_partition(partition))


def print_verify_progress(done: int, total: int) -> None:
    """The verify job's progress, on stderr so that ``--json`` output stays clean."""
    print(f"verify: {done} of {total} partitions compared", file=sys.stderr, flush=True)


def print_takeover(plan: TakeoverPlan, as_json: bool) -> None:
    if as_json:
        print(to_json(plan.as_dict()))
        return
    done = "plan (dry run, nothing changed)" if plan.batch_id is None else f"took over as batch {plan.batch_id}"
    print(
        f"flow {plan.flow} from MirrorMaker 2 (worker group {plan.worker_group}, offsets in "
        f"{plan.offsets_topic}): {done}"
    )
    for p in plan.partitions:
        stored = "-" if p.mm2_offset is None else str(p.mm2_offset)
        last = "-" if p.last_copied is None else str(p.last_copied)
        recopied = f", {p.recopied} re-copied by MM2" if p.recopied else ""
        note = f" ({p.note})" if p.note else ""
        print(
            f"  {p.topic}-{p.partition} -> {p.remote_topic}: MM2 stored {stored}, last copied {last}; "
            f"continues at {p.cursor}"
            f"{recopied}; {len(p.syncs)} offset syncs imported{note}"
        )
    print(f"  {len(plan.checkpoints)} MM2 checkpoints imported")


def print_schema_sync(flow: str, report: SchemaSyncReport, dry_run: bool, as_json: bool) -> None:
    """``airmirror schemas``: each subject, its target subject and each version's ids."""
    if as_json:
        print(to_json({"flow": flow, "dry_run": dry_run, **report.as_dict()}))
        return
    verb = "would register" if dry_run else "registered"
    unchanged = f", {report.unchanged} subjects unchanged" if report.unchanged else ""
    print(
        f"flow {flow} (airmirror.schema.ids = {report.mode.value}): {len(report.subjects)} subjects, "
        f"{report.registered} versions {verb}{unchanged}"
    )
    for subject in report.subjects:
        level = f", compatibility {subject.compatibility}" if subject.compatibility else ""
        print(f"  {subject.subject} -> {subject.target_subject}{level}")
        for v in subject.versions:
            target = "-" if v.target_id is None else f"id {v.target_id} v{v.target_version}"
            state = f" ({verb})" if v.registered else ""
            print(f"    v{v.source_version} id {v.source_id} -> {target}{state}")


def print_explanations(flows: dict[str, list[EffectiveSetting]], as_json: bool) -> None:
    """``validate --explain``: per flow, each setting's effective value and its source, in aligned columns."""
    if as_json:
        print(to_json({"flows": {name: [row.to_json() for row in rows] for name, rows in flows.items()}}))
        return
    for name, rows in flows.items():
        print(f"flow {name}:")
        key_width = max(len(row.key) for row in rows)
        value_width = min(60, max(len(row.value) for row in rows))
        for row in rows:
            print(f"  {row.key:<{key_width}}  {row.value:<{value_width}}  {row.source}")
