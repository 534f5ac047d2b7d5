"""``airmirror takeover CONFIG --flow A->B --from-mm2``: continue a flow exactly where a stopped MirrorMaker 2
left it, without copying again what MM2 copied.

Contract:
- **MM2 must be stopped, and proven so.**  The flow's MM2 dedicated-mode worker group (``{source}-mm2`` on the
  target, see :meth:`~airmirror.config.FlowConfig.mm2_worker`) is described by name: the takeover refuses,
  changing nothing, unless it is EMPTY or absent.  A listing cannot prove that (a user without DESCRIBE on a
  group does not see it listed), so a refused describe fails too (exit 1), naming the ACL to grant
  (``airmirror acls --takeover``) and ``--mm2-stopped``, the flag with which the user vouches that every MM2
  worker of the flow is stopped (``mm2_stopped``: the group is not looked at).  It holds the flow's lease, and
  only takes over partitions airmirror has never copied (a flow with cursors is refused).
- **What it reads**: MM2's stored source offsets (its Connect offsets topic on the target), its offset syncs
  (the flow's offset-syncs topic) and its checkpoints (``{source}.checkpoints.internal`` on the target).  A
  topic that does not exist holds nothing; one the user may not DESCRIBE or READ is an error naming the ACL
  (:func:`~airmirror.kafka.acls.takeover_acls`), never taken as absent.
- **Where each partition continues**: after the last source record MM2 really copied, found by the tail walk
  of :mod:`airmirror.migration.takeover_tail` from MM2's last offset sync, not by MM2's stored offset alone
  (it lags by up to ``offset.flush.interval.ms``).  So no record MM2 copied is copied again and none is missed.
  The walk reads the source through the flow's transforms (the same file's SMTs, which MM2 ran): a copy MM2 made
  through the same chain (``Filter``, ``DropHeaders``, the classes MM2 can run on its bytes) continues exactly, its
  dropped records absent from both sides of the walk.
  A partition whose last sync's source record is gone (retention) continues after MM2's stored offset.
- **Translation**: the walk's exact runs are stored as offset-sync runs, and MM2's offset syncs up to the
  walk's start are imported, so a group that consumed MM2's copies translates as MM2 would translate it
  (:mod:`airmirror.checkpoints.translation`): below the walk's start, or below the cursor of a partition not
  walked, never past the exact position, and not at all without an imported sync at or before it.  MM2's last
  checkpoints become the flow's previous checkpoints, so checkpoints only move forward.
- **One transaction**: cursors, runs and imported syncs are recorded as one committed batch
  (:meth:`~airmirror.store.MetadataStore.record_takeover`); ``--dry-run`` reads everything and records nothing.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from airmirror.config import FlowConfig
from airmirror.errors import AccessDenied, InputError, ReplicationFailure
from airmirror.kafka.authorization import access_scope
from airmirror.kafka.clients import ClusterAdmin, admin_client, cluster_metadata
from airmirror.kafka.groups import group_activity
from airmirror.kafka.offsets import partition_offsets
from airmirror.kafka.topic_ids import topic_ids
from airmirror.kafka.topics import TopicMapping, refuse_hidden_topics, replicated_topics
from airmirror.migration.partition_compare import transformed_records
from airmirror.migration.takeover_tail import follow_tail, imported_syncs, mm2_copied_offsets, mm2_offset_syncs
from airmirror.migration.verify_job import records_of
from airmirror.mm2.wire_formats import Checkpoint, OffsetSync, WireFormatError
from airmirror.model import (
    JsonObject,
    OffsetRun,
    PartitionKey,
    PlannedRange,
    RangeResult,
    StoredCheckpoint,
    json_object,
)
from airmirror.replication.incarnations import record_remote_topics
from airmirror.replication.spark.range_reader import RangeReader
from airmirror.replication.spark.record_transforms import RecordTransforms
from airmirror.store import MetadataStore, describe_holder

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class PartitionTakeover:
    """Where one source partition continues: ``cursor``, after the last record MM2 copied (``last_copied``;
    ``mm2_offset`` is the last one MM2 stored), with the walk's exact ``runs`` and the MM2 ``syncs`` imported."""

    topic: str
    partition: int
    remote_topic: str
    mm2_offset: int | None
    last_copied: int | None
    cursor: int
    recopied: int
    runs: tuple[OffsetRun, ...] = field(repr=False)
    syncs: tuple[OffsetSync, ...] = field(repr=False)
    note: str = ""


@dataclass(frozen=True)
class TakeoverPlan:
    """A takeover of ``flow`` from MM2: per partition where it continues, and the checkpoints imported;
    ``batch_id`` is the batch that recorded it (``None`` in a dry run)."""

    flow: str
    worker_group: str
    offsets_topic: str
    partitions: list[PartitionTakeover]
    checkpoints: list[StoredCheckpoint]
    batch_id: int | None

    def as_dict(self) -> JsonObject:
        """The plan as JSON (``airmirror takeover --json``): per partition its runs and syncs counted."""
        return {
            "flow": self.flow,
            "dry_run": self.batch_id is None,
            "batch_id": self.batch_id,
            "mm2_worker_group": self.worker_group,
            "mm2_offsets_topic": self.offsets_topic,
            "checkpoints_imported": len(self.checkpoints),
            "partitions": [
                {
                    **{k: v for k, v in json_object(p).items() if k not in ("runs", "syncs")},
                    "runs": len(p.runs),
                    "syncs_imported": len(p.syncs),
                }
                for p in self.partitions
            ],
        }


def refuse_running_mm2(flow: FlowConfig, target: ClusterAdmin, group: str) -> None:
    """Raise unless MM2's worker group for the flow is proven inactive on the target (see the module contract)."""
    try:
        found = group_activity(target, group)
    except AccessDenied as denied:
        raise AccessDenied(
            f"cannot prove MirrorMaker 2 is stopped for flow {flow.name}: {denied}; or, once every MM2 worker of the "
            "flow is stopped, pass --mm2-stopped"
        ) from denied
    if found.active:
        raise ReplicationFailure(
            f"MirrorMaker 2 is still running flow {flow.name}: its worker group '{group}' on cluster "
            f"'{flow.target}' is {found.state} with {found.members} members; stop every MM2 worker of the "
            "flow, then take over"
        )


def takeover_admin(flow: FlowConfig, alias: str) -> ClusterAdmin:
    """An admin client of cluster ``alias`` whose refusals also name the takeover's ACLs."""
    return admin_client(flow, alias, takeover=True)


def topic_records(flow: FlowConfig, alias: str, topic: str) -> Iterator[tuple[bytes | None, bytes | None]]:
    """Every committed ``(key, value)`` of ``topic`` on cluster ``alias``, partition after partition, each in
    offset order; nothing when the topic does not exist.  A topic the user may not DESCRIBE or READ raises
    :class:`~airmirror.errors.AccessDenied` naming the ACL."""
    admin = takeover_admin(flow, alias)
    found = cluster_metadata(admin, topic).topics.get(topic)
    if found is None or found.error is not None:
        refuse_hidden_topics(admin, [topic])
        return
    keys = [PartitionKey(topic, p) for p in sorted(found.partitions)]
    offsets = partition_offsets(admin, keys)
    config, access = flow.client_config(alias, "consumer"), access_scope(flow, alias, takeover=True)
    for key in keys:
        with RangeReader(
            config, topic, key.partition, offsets[key].log_start, offsets[key].stable_end, access=access
        ) as reader:
            for record in records_of(reader):
                yield record.key, record.value


def mm2_checkpoints(flow: FlowConfig, remote_to_source: dict[str, str]) -> list[StoredCheckpoint]:
    """MM2's newest checkpoint per group and partition of the flow's topics, as the flow's previous checkpoints."""
    newest: dict[tuple[str, str, int], Checkpoint] = {}
    for key, value in topic_records(flow, flow.target, flow.policy.checkpoints_topic(flow.source)):
        try:
            checkpoint = Checkpoint.decode(key or b"", value or b"")
        except WireFormatError:
            continue
        if checkpoint.topic in remote_to_source:
            newest[(checkpoint.group, checkpoint.topic, checkpoint.partition)] = checkpoint
    now = datetime.now(UTC)
    return [
        StoredCheckpoint(
            c.group,
            remote_to_source[c.topic],
            c.partition,
            c.topic,
            c.upstream_offset,
            c.downstream_offset,
            c.metadata,
            now,
        )
        for c in newest.values()
    ]


def take_over_partition(
    flow: FlowConfig,
    key: PartitionKey,
    remote: str,
    mm2_offset: int | None,
    written: list[OffsetSync],
    sides: tuple[Any, Any],
) -> PartitionTakeover:
    """Where ``key`` continues (see the module contract); ``sides`` are its source and remote offsets."""
    source_offsets, target_offsets = sides
    stored_next = mm2_offset + 1 if mm2_offset is not None else source_offsets.log_start
    if not written:
        return PartitionTakeover(
            key.topic,
            key.partition,
            remote,
            mm2_offset,
            mm2_offset,
            stored_next,
            0,
            (),
            (),
            "no MM2 offset sync: continues after MM2's stored offset",
        )
    anchor, syncs = imported_syncs(written)
    if anchor.upstream_offset < source_offsets.log_start or anchor.downstream_offset < target_offsets.log_start:
        note = "the record of MM2's last offset sync is gone (retention): continues after MM2's stored offset"
        return PartitionTakeover(
            key.topic, key.partition, remote, mm2_offset, mm2_offset, stored_next, 0, (), tuple(syncs), note
        )
    source_config, target_config = flow.source_client("consumer"), flow.target_client("consumer")
    source_access, target_access = (
        access_scope(flow, flow.source, takeover=True),
        access_scope(flow, flow.target, takeover=True),
    )
    with (
        RangeReader(
            source_config,
            key.topic,
            key.partition,
            anchor.upstream_offset,
            source_offsets.stable_end,
            access=source_access,
        ) as source,
        RangeReader(
            target_config,
            remote,
            key.partition,
            anchor.downstream_offset,
            target_offsets.stable_end,
            access=target_access,
        ) as target,
    ):
        source_records = records_of(source)
        steps = flow.transform_steps(key.topic)
        if steps:  # MM2 ran the same chain: its copies are of the transformed records, the dropped ones absent
            source_records = transformed_records(source_records, RecordTransforms(steps, remote, key.partition))
        tail = follow_tail(f"{remote}-{key.partition}", source_records, records_of(target))
    last = tail.last_copied if tail.last_copied is not None else anchor.upstream_offset - 1
    return PartitionTakeover(
        key.topic, key.partition, remote, mm2_offset, last, last + 1, tail.recopied, tail.runs, tuple(syncs)
    )


def plan_takeover(
    flow: FlowConfig, store: MetadataStore, mm2_stopped: bool = False
) -> tuple[list[PartitionTakeover], list[StoredCheckpoint]]:
    """Read what MM2 left and decide where every partition MM2 copied continues (nothing is recorded)."""
    group, offsets_topic = flow.mm2_worker()
    source, target = takeover_admin(flow, flow.source), takeover_admin(flow, flow.target)
    if mm2_stopped:
        log.warning("--mm2-stopped: MM2's worker group '%s' on cluster '%s' is not checked", group, flow.target)
    else:
        refuse_running_mm2(flow, target, group)
    if store.cursors(flow.name):
        raise InputError(
            f"--flow {flow.name}: airmirror already replicates this flow; a takeover only starts a flow airmirror "
            "has not copied yet"
        )
    mappings = {m.source_topic: m.remote_topic for m in replicated_topics(flow, source)}
    copied = {
        k: v
        for k, v in mm2_copied_offsets(flow.source, topic_records(flow, flow.target, offsets_topic)).items()
        if k.topic in mappings
    }
    alias, syncs_topic = flow.offset_syncs_place()
    written = {
        k: v for k, v in mm2_offset_syncs(topic_records(flow, alias, syncs_topic)).items() if k.topic in mappings
    }
    keys = sorted(copied.keys() | written.keys())
    if not keys:
        raise InputError(
            f"--flow {flow.name}: MM2 left no copy to take over (no source offsets in '{offsets_topic}' on cluster "
            f"'{flow.target}', no offset syncs in '{syncs_topic}' on cluster '{alias}')"
        )
    source_offsets = partition_offsets(source, keys)
    remote_keys = {key: PartitionKey(mappings[key.topic], key.partition) for key in keys}
    target_offsets = partition_offsets(target, list(remote_keys.values()))
    partitions = [
        take_over_partition(
            flow,
            key,
            mappings[key.topic],
            copied.get(key),
            written.get(key, []),
            (source_offsets[key], target_offsets[remote_keys[key]]),
        )
        for key in keys
    ]
    return partitions, mm2_checkpoints(flow, {remote: source for source, remote in mappings.items()})


def record(flow: FlowConfig, store: MetadataStore, partitions: list[PartitionTakeover]) -> int:
    """Record the takeover as one committed batch (see :meth:`~airmirror.store.MetadataStore.record_takeover`)."""
    ids = topic_ids(takeover_admin(flow, flow.source), {p.topic for p in partitions})
    ranges, results = [], []
    for p in partitions:
        start = min([s.upstream_offset for s in p.syncs] + [p.cursor])
        ranges.append(
            PlannedRange(
                topic=p.topic,
                partition=p.partition,
                start=start,
                end=p.cursor,
                remote_topic=p.remote_topic,
                source_topic_id=ids.get(p.topic),
            )
        )
        results.append(
            RangeResult(
                topic=p.topic,
                partition=p.partition,
                start=start,
                end=p.cursor,
                records=sum(run.copies for run in p.runs),
                bytes=0,
                runs=p.runs,
                downstream_start=p.runs[0].downstream_start if p.runs else None,
                downstream_end=p.runs[-1].downstream_stop if p.runs else None,
            )
        )
    syncs = [s for p in partitions for s in p.syncs]
    return store.record_takeover(flow.name, ranges, results, syncs, {"takeover": "mm2"})


def take_over_from_mm2(
    flow: FlowConfig,
    store: MetadataStore,
    *,
    dry_run: bool = False,
    mm2_stopped: bool = False,
    holder: str | None = None,
) -> TakeoverPlan:
    """Take ``flow`` over from a stopped MM2 per the module contract; with ``dry_run`` only the plan; with
    ``mm2_stopped`` the user vouches that MM2 is stopped."""
    group, offsets_topic = flow.mm2_worker()
    with store.hold_flow(flow.name, holder or describe_holder("airmirror takeover")) as lease:
        store = store.fenced_by(lease)
        partitions, checkpoints = plan_takeover(flow, store, mm2_stopped)
        batch_id = None
        if not dry_run:
            remote = {p.topic: TopicMapping(p.topic, p.remote_topic, p.partition + 1) for p in partitions}
            record_remote_topics(flow, store, takeover_admin(flow, flow.target), remote.values())
            store.save_checkpoints(flow.name, checkpoints)
            batch_id = record(flow, store, partitions)
            log.info("took over flow %s from MM2 as batch %d", flow.name, batch_id)
    return TakeoverPlan(flow.name, group, offsets_topic, partitions, checkpoints, batch_id)
