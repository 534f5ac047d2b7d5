"""``airmirror verify``: proof that a flow's target holds exactly what it copied from the source.

Contract:
- The run holds the flow's lease, so no batch copies while it compares, and refuses a flow with an
  unfinished batch (its committed chunks are in the target but not yet in the DB): finish it first.
- Every partition with a cursor (narrowed by ``--topics``) gets a verdict, whether or not its topics still
  exist or the flow still selects them.  One whose topics are gone, recreated or stopped, or whose records
  below the cursor no offset-sync run maps, gets a verdict of its own, never ``equal``, with its reason
  (:mod:`airmirror.migration.verify_bounds`).  The others are compared by one Spark task each
  (:mod:`airmirror.migration.verify_job`): the source from its first copied offset to the cursor, the
  remote partition from that offset's copy to its last stable offset, so anything written into the remote
  topic after the last copy is found too.  The offset-sync runs in the DB say which source offset each target
  offset holds, exactly or, through a folded run, in order (:mod:`airmirror.migration.partition_compare`
  gives the verdicts).  The runs are read with one query per compared partition and pickled into its task;
  folding (:meth:`~airmirror.store.MetadataStore.fold_runs`) bounds them per partition, so neither grows with
  the flow's history.
- Records deleted from the start of either side are left out only where retention explains them (see
  :mod:`~airmirror.migration.verify_bounds`); the partition's note says what was left out.  A compacted topic
  (``cleanup.policy`` with ``compact``) may have lost superseded records and tombstones on either side after the
  copy: that is counted as compaction, not as a difference.
- With ``airmirror.schema.ids = translate``, the records of a topic whose schema ids the copy translated are
  compared through the flow's stored id map (:class:`~airmirror.migration.partition_compare.SchemaIdMap`): a
  translated copy is ``equal``, a copy whose id the map does not explain is ``schema_id``.  Which topics are framed
  is read from the source registry here, as the copy job reads it
  (:func:`~airmirror.replication.schema_sync.record_ids`), never by a Spark task.  ``keep`` and ``off`` compare
  bytes as they are.
- Nothing changes on either cluster.  The result is stored in the metadata DB with its time
  (:meth:`~airmirror.store.MetadataStore.record_verification`) and shown by ``airmirror status``.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from confluent_kafka.admin import ConfigEntry, TopicMetadata
from pyspark.sql import SparkSession

from airmirror.config import FlowConfig
from airmirror.config.schema_registries import SchemaIds
from airmirror.config.transforms import may_drop
from airmirror.errors import InputError, ReplicationFailure
from airmirror.kafka.authorization import access_scope
from airmirror.kafka.clients import ClusterAdmin, cluster_metadata, source_admin, target_admin
from airmirror.kafka.offsets import offsets_for_time, partition_offsets
from airmirror.kafka.topic_ids import topic_ids
from airmirror.kafka.topics import describe_topic_configs
from airmirror.migration.partition_compare import SchemaIdMap
from airmirror.migration.verify_bounds import (
    Horizons,
    Retention,
    Topics,
    compared_bounds,
    uncomparable,
    unmapped_below_cursor,
)
from airmirror.migration.verify_job import VerifyTask, run_verify_job
from airmirror.model import CursorState, PartitionKey, PartitionVerification, Verdict, Verification
from airmirror.replication.schema_sync import record_ids
from airmirror.store import MetadataStore, describe_holder
from airmirror.store.rows import utcnow

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class VerificationPlan:
    """The Spark tasks of the partitions to compare, and the verdicts of those that cannot be compared."""

    tasks: list[VerifyTask]
    uncompared: list[PartitionVerification]


def uncompared(
    key: PartitionKey, remote_topic: str, cursor: int, verdict: Verdict, reason: str
) -> PartitionVerification:
    """The verdict of a partition whose records were not read: empty ranges at its cursor, no records."""
    return PartitionVerification(
        topic=key.topic,
        partition=key.partition,
        remote_topic=remote_topic,
        verdict=verdict,
        first_offset=None,
        source_start=cursor,
        source_end=cursor,
        target_start=0,
        target_end=0,
        source_records=0,
        target_records=0,
        reason=reason,
    )


def topic_states(
    flow: FlowConfig,
    store: MetadataStore,
    source: ClusterAdmin,
    target: ClusterAdmin,
    cursors: Mapping[PartitionKey, CursorState],
) -> dict[str, Topics]:
    """Per source topic of ``cursors``: its and its remote topic's incarnation now and when copied."""
    names = sorted({key.topic for key in cursors})
    remotes = {name: flow.remote_topic(name) for name in names}
    source_listing, target_listing = cluster_metadata(source).topics, cluster_metadata(target).topics
    source_ids, target_ids = topic_ids(source, names), topic_ids(target, remotes.values())
    recorded = store.remote_topic_ids(flow.name)
    cursor_ids = {
        key.topic: state.source_topic_id for key, state in cursors.items() if state.source_topic_id is not None
    }

    def partitions(listing: Mapping[str, TopicMetadata], topic: str) -> int:
        return len(listing[topic].partitions) if topic in listing and listing[topic].error is None else 0

    return {
        name: Topics(
            source_id=source_ids.get(name),
            source_partitions=partitions(source_listing, name),
            target_id=target_ids.get(remotes[name]),
            target_partitions=partitions(target_listing, remotes[name]),
            cursor_source_id=cursor_ids.get(name),
            recorded_target_id=recorded.get(remotes[name]),
        )
        for name in names
    }


def retentions(admin: ClusterAdmin, topics: Sequence[str]) -> dict[str, tuple[bool, Retention]]:
    """Per topic: whether it is compacted, and its deletion by retention."""

    def value(entries: dict[str, ConfigEntry], name: str) -> str | None:
        return entries[name].value if name in entries else None

    found = {}
    for topic, entries in describe_topic_configs(admin, sorted(set(topics))).items():
        policy = value(entries, "cleanup.policy") or ""
        found[topic] = (
            "compact" in policy,
            Retention.of(policy, value(entries, "retention.ms"), value(entries, "retention.bytes")),
        )
    return found


def retention_horizons(
    admin: ClusterAdmin, keys: Mapping[PartitionKey, int], ends: Mapping[PartitionKey, int], now_ms: int
) -> dict[PartitionKey, int]:
    """Per partition of ``keys`` (each with the other side's ``retention.ms``), the first offset of a record
    younger than ``now_ms`` minus that retention; one look-up per distinct retention."""
    found: dict[PartitionKey, int] = {}
    for retention_ms in sorted(set(keys.values())):
        group = [key for key, ms in keys.items() if ms == retention_ms]
        found.update(offsets_for_time(admin, group, now_ms - retention_ms, ends))
    return found


def schema_id_maps(flow: FlowConfig, store: MetadataStore, remotes: Mapping[str, str]) -> dict[str, SchemaIdMap]:
    """Per source topic of ``remotes`` (source -> remote topic) whose schema ids the copy translates, how: the
    stored id map (one object, shared by every topic's map, so it pickles once) and the topic's framed sides."""
    if flow.schema_ids is not SchemaIds.TRANSLATE or not remotes:
        return {}
    found = record_ids(flow, store, dict(remotes))
    if found is None:
        return {}
    ids = dict(found.ids)
    return {topic: SchemaIdMap(ids, sides) for topic, sides in found.framed.items() if sides}


def verification_plan(flow: FlowConfig, store: MetadataStore, topics_regex: str | None) -> VerificationPlan:
    """What to compare and what cannot be (see the module contract)."""
    subset = re.compile(topics_regex) if topics_regex else None
    cursors = store.cursor_states(flow.name)
    keys = sorted(key for key in cursors if subset is None or subset.fullmatch(key.topic))
    if not keys:
        narrowed = f" matching --topics '{topics_regex}'" if topics_regex else ""
        raise InputError(f"--flow {flow.name}: no partition{narrowed} has been replicated yet; nothing to verify")
    source, target = source_admin(flow), target_admin(flow)
    topics = topic_states(flow, store, source, target, {key: cursors[key] for key in keys})
    stops = {(stop.topic, stop.partition): stop for stop in store.stops(flow.name)}
    remote = {key: PartitionKey(flow.remote_topic(key.topic), key.partition) for key in keys}
    verdicts: list[PartitionVerification] = []
    readable = []
    for key in keys:
        stop = stops.get((key.topic, key.partition)) or stops.get((key.topic, None))
        found = uncomparable(key.partition, topics[key.topic], stop, remote[key].topic)
        if found is not None:
            verdicts.append(uncompared(key, remote[key].topic, cursors[key].next_offset, *found))
        else:
            readable.append(key)
    if not readable:
        return VerificationPlan([], verdicts)
    runs = {key: store.offset_runs(flow.name, key) for key in readable}
    source_offsets = partition_offsets(source, readable)
    target_offsets = partition_offsets(target, [remote[key] for key in readable])
    source_topics = retentions(source, [key.topic for key in readable])
    target_topics = retentions(target, [remote[key].topic for key in readable])
    dropping = {key: may_drop(flow.transform_steps(key.topic), flow.copy.skip_failed_records) for key in readable}
    compared = []
    for key in readable:
        reason = unmapped_below_cursor(runs[key], cursors[key], source_offsets[key], dropping[key])
        if reason is not None:
            verdicts.append(uncompared(key, remote[key].topic, cursors[key].next_offset, Verdict.NO_RUNS, reason))
        else:
            compared.append(key)
    now_ms = int(time.time() * 1000)
    target_retention_ms = {key: target_topics[remote[key].topic][1].ms for key in compared}
    source_retention_ms = {remote[key]: source_topics[key.topic][1].ms for key in compared}
    source_horizons = retention_horizons(
        source,
        {k: ms for k, ms in target_retention_ms.items() if ms >= 0},
        {k: o.stable_end for k, o in source_offsets.items()},
        now_ms,
    )
    target_horizons = retention_horizons(
        target,
        {k: ms for k, ms in source_retention_ms.items() if ms >= 0},
        {k: o.stable_end for k, o in target_offsets.items()},
        now_ms,
    )
    source_config, target_config = flow.source_client("consumer"), flow.target_client("consumer")
    source_access, target_access = access_scope(flow, flow.source), access_scope(flow, flow.target)
    id_maps = schema_id_maps(flow, store, {key.topic: remote[key].topic for key in compared})
    edits_fields = any(step.fields for key in compared for step in flow.transform_steps(key.topic))
    registries = (
        (flow.registry(flow.source).resolved(), flow.registry(flow.target).resolved())
        if edits_fields and flow.schema_ids is not SchemaIds.OFF
        else None
    )
    tasks = []
    for key in compared:
        remote_key, cursor = remote[key], cursors[key].next_offset
        source_compacted, source_retention = source_topics[key.topic]
        target_compacted, target_retention = target_topics[remote_key.topic]
        bounds = compared_bounds(
            runs[key],
            cursor,
            source_offsets[key],
            target_offsets[remote_key],
            (source_retention, target_retention),
            Horizons(source_horizons.get(key), target_horizons.get(remote_key)),
            dropping[key],
        )
        tasks.append(
            VerifyTask(
                topic=key.topic,
                partition=key.partition,
                remote_topic=remote_key.topic,
                runs=runs[key],
                source_start=bounds.source_start,
                source_end=max(bounds.source_start, cursor),
                source_later_end=max(cursor, source_offsets[key].stable_end),
                target_start=bounds.target_start,
                target_end=max(bounds.target_start, target_offsets[remote_key].stable_end),
                source_compacted=source_compacted,
                target_compacted=target_compacted,
                note=bounds.note,
                lost=bounds.lost,
                source_access=source_access,
                target_access=target_access,
                source_consumer_config=source_config,
                target_consumer_config=target_config,
                schema_ids=id_maps.get(key.topic),
                transforms=(steps := flow.transform_steps(key.topic)),
                registries=registries if any(step.fields for step in steps) else None,
                derives=flow.schema_ids is SchemaIds.TRANSLATE,
            )
        )
    return VerificationPlan(tasks, verdicts)


def verify_flow(
    flow: FlowConfig,
    store: MetadataStore,
    spark: Callable[[], SparkSession],
    topics_regex: str | None = None,
    on_progress: Callable[[int, int], None] = lambda done, total: None,
    holder: str | None = None,
) -> Verification:
    """Verify ``flow`` per the module contract; returns the stored verification."""
    with store.hold_flow(flow.name, holder or describe_holder("airmirror verify")):
        unfinished = store.unfinished_batch(flow.name)
        if unfinished is not None:
            raise ReplicationFailure(
                f"flow {flow.name} has unfinished batch {unfinished.id}: its copies are in the target but not yet "
                "recorded; run `airmirror replicate` to finish it, then verify"
            )
        plan = verification_plan(flow, store, topics_regex)
        log.info(
            "verifying %d partitions of flow %s (%d cannot be compared)",
            len(plan.tasks),
            flow.name,
            len(plan.uncompared),
        )
        verified_at = utcnow()
        compared = run_verify_job(spark(), plan.tasks, on_progress) if plan.tasks else []
    partitions = sorted(compared + plan.uncompared, key=lambda p: p.key)
    return store.record_verification(Verification(flow.name, verified_at, topics_regex, partitions))
