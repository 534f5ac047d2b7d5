"""Checkpoints: where each source consumer group resumes on the target, written in MM2's format
(the DAG's checkpoint task and ``airmirror checkpoint`` both call :func:`emit_checkpoints`).

Contract of one run for flow ``source->target``:
1. ``emit.checkpoints.enabled = false`` or a negative ``emit.checkpoints.interval.seconds``: nothing happens
   (no group offset sync either, as in MM2, which then runs no checkpoint task); the report says which key.
2. Groups: every source group covered by :mod:`airmirror.kafka.groups` with committed offsets on routed
   topics (replicated topics, and failback topics, see :mod:`airmirror.checkpoints.translation`).
3. Each committed offset is translated exactly; an offset not yet translatable yields no checkpoint.
4. Monotonic per group-partition: a checkpoint is written when it is the first, when the group rewound on
   the source (upstream offset below the previous checkpoint's), or when its downstream offset advanced.
   Otherwise (same position, or a lower one without a source rewind) nothing is written.
5. Checkpoints go to ``{source}.checkpoints.internal`` (the policy's name) partition 0 on the target, created if missing
   (see :func:`airmirror.kafka.topics.ensure_internal_topic`); key group, topic on the target, partition; value
   version 0, upstream offset, downstream offset, the group's commit metadata.  They are stored in the metadata DB with
   their emission time only after the target acknowledged them, so a failed write is retried next run.
6. With ``sync.group.offsets.enabled`` every group's newest checkpoints are then committed to the same group
   on the target per :mod:`airmirror.checkpoints.group_sync`.  If any group's sync FAILED (after all groups were
   handled and recorded) :class:`~airmirror.errors.ReplicationFailure` is raised.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime

from airmirror.checkpoints.group_sync import sync_group_offsets
from airmirror.checkpoints.translation import TranslatedOffset, Translator
from airmirror.config import FlowConfig
from airmirror.errors import ReplicationFailure
from airmirror.kafka.clients import target_admin
from airmirror.kafka.groups import CommittedOffset, group_offsets
from airmirror.kafka.records import OutgoingRecord, write_records
from airmirror.kafka.topics import COMPACTED, ensure_internal_topic
from airmirror.mm2.wire_formats import Checkpoint
from airmirror.model import GroupSyncOutcome, GroupSyncRecord, PartitionKey, StoredCheckpoint
from airmirror.store import MetadataStore

log = logging.getLogger(__name__)

REPLICATION_FACTOR_KEY = "checkpoints.topic.replication.factor"


def is_newer(checkpoint: StoredCheckpoint, previous: StoredCheckpoint | None) -> bool:
    """Rule 4: write ``checkpoint`` after ``previous`` (the last one written for its group-partition)?"""
    return (
        previous is None
        or checkpoint.upstream_offset < previous.upstream_offset
        or checkpoint.downstream_offset > previous.downstream_offset
    )


def wire_checkpoint(checkpoint: StoredCheckpoint) -> Checkpoint:
    """The MM2 record of a checkpoint (it names the topic on the target)."""
    return Checkpoint(
        checkpoint.group,
        checkpoint.remote_topic,
        checkpoint.partition,
        checkpoint.upstream_offset,
        checkpoint.downstream_offset,
        checkpoint.metadata,
    )


@dataclass
class GroupCheckpoints:
    """One group's run: checkpoints written, partitions unchanged (rule 4), partitions not yet translatable,
    and the group offset sync outcome (``None`` when group offset sync is disabled)."""

    group: str
    written: list[StoredCheckpoint] = field(default_factory=list)
    unchanged: list[PartitionKey] = field(default_factory=list)
    not_yet: list[PartitionKey] = field(default_factory=list)
    sync: GroupSyncRecord | None = None


@dataclass
class CheckpointReport:
    """What one :func:`emit_checkpoints` run did; ``off_by`` says what turned checkpoints off
    (:attr:`~airmirror.config.flow_settings.CheckpointSettings.off_by`), ``None`` when they were emitted."""

    flow: str
    off_by: str | None
    topic: str
    groups: list[GroupCheckpoints] = field(default_factory=list)
    seconds: float = 0.0
    latency_ms: int | None = None
    """MM2's ``checkpoint-latency-ms`` of the checkpoints written: the target's acknowledgement time minus their
    record timestamp; ``None`` when none was written."""

    @property
    def written(self) -> int:
        return sum(len(g.written) for g in self.groups)

    @property
    def skipped_groups(self) -> list[str]:
        """Groups whose offset sync was skipped because the target group is active."""
        return [
            g.group for g in self.groups if g.sync is not None and g.sync.outcome is GroupSyncOutcome.SKIPPED_ACTIVE
        ]


def emit_checkpoints(flow: FlowConfig, store: MetadataStore) -> CheckpointReport:
    """One checkpoint run of ``flow`` (see the module contract)."""
    started = time.monotonic()
    topic = flow.policy.checkpoints_topic(flow.source)
    report = CheckpointReport(flow.name, flow.checkpoints.off_by, topic)
    if report.off_by is not None:
        log.info("%s for %s: no checkpoints, no group offset sync", report.off_by, flow.name)
        return report
    translator = Translator(flow, store)
    committed = group_offsets(flow, translator.routed_back)
    previous = {(c.group, c.key): c for c in store.checkpoints(flow.name)}
    now = datetime.now(UTC)
    for group, offsets in committed.items():
        translations = translator.translate({key: o.offset for key, o in offsets.items()})
        report.groups.append(_group_checkpoints(group, offsets, translations, previous, now))
    written = [c for g in report.groups for c in g.written]
    if written:
        ensure_internal_topic(flow, target_admin(flow), topic, COMPACTED, REPLICATION_FACTOR_KEY)
        timestamp = int(now.timestamp() * 1000)
        write_records(flow, topic, [_outgoing(c, timestamp) for c in written])
        report.latency_ms = max(0, int(time.time() * 1000) - timestamp)
        store.save_checkpoints(flow.name, written)
    log.info("%s: wrote %d checkpoints for %d groups to %s", flow.name, len(written), len(report.groups), topic)
    if flow.checkpoints.sync_group_offsets_enabled:
        _sync_groups(flow, store, report)
    report.seconds = time.monotonic() - started
    return report


def _group_checkpoints(
    group: str,
    offsets: Mapping[PartitionKey, CommittedOffset],
    translations: Mapping[PartitionKey, TranslatedOffset],
    previous: Mapping[tuple[str, PartitionKey], StoredCheckpoint],
    now: datetime,
) -> GroupCheckpoints:
    result = GroupCheckpoints(group)
    for key, translation in sorted(translations.items()):
        if translation.downstream_offset is None:
            result.not_yet.append(key)
            continue
        checkpoint = StoredCheckpoint(
            group,
            key.topic,
            key.partition,
            translation.route.target_topic,
            translation.upstream_offset,
            translation.downstream_offset,
            offsets[key].metadata,
            now,
        )
        if is_newer(checkpoint, previous.get((group, key))):
            result.written.append(checkpoint)
        else:
            result.unchanged.append(key)
    return result


def _outgoing(checkpoint: StoredCheckpoint, timestamp: int) -> OutgoingRecord:
    record = wire_checkpoint(checkpoint)
    return OutgoingRecord(record.key(), record.value(), timestamp)


def _sync_groups(flow: FlowConfig, store: MetadataStore, report: CheckpointReport) -> None:
    for group in report.groups:
        newest = store.checkpoints(flow.name, group.group)
        if newest:
            group.sync = sync_group_offsets(flow, store, group.group, newest)
    failed = [g.group for g in report.groups if g.sync is not None and g.sync.outcome is GroupSyncOutcome.FAILED]
    if failed:
        raise ReplicationFailure(
            f"group offset sync of {flow.name} failed for {', '.join(failed)} (see airmirror status for details)"
        )
