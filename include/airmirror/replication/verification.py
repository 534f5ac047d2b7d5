"""``airmirror verify``: proof that a flow's target holds exactly what it copied from the source.

Contract:
- The run holds the flow's lease, so no batch copies while it compares, and refuses a flow with an
  unfinished batch (its committed chunks are in the target but not yet in the DB): finish it first.
- Every partition with a cursor (narrowed by ``--topics``) is compared, one Spark task each
  (:mod:`airmirror.replication.spark.verify_job`): the source from its first copied offset to the cursor,
  the remote partition from that offset's copy to its last stable offset, so anything written into the
  remote topic after the last copy is found too.  The offset-sync runs in the DB say which source offset
  each target offset holds (:mod:`airmirror.replication.partition_compare` gives the verdicts).
- Offsets retention has since deleted, on either side, are left out of the comparison, and the partition's
  note says how many.  A compacted topic (``cleanup.policy`` with ``compact``) may have lost superseded
  records and tombstones on either side after the copy: that is counted as compaction, not as a difference.
- Nothing changes on either cluster.  The result is stored in the metadata DB with its time
  (:meth:`~airmirror.store.MetadataStore.record_verification`) and shown by ``airmirror status``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass

from pyspark.sql import SparkSession

from airmirror.config import FlowConfig
from airmirror.errors import InputError, ReplicationFailure
from airmirror.kafka.authorization import access_scope
from airmirror.kafka.clients import source_admin, target_admin
from airmirror.kafka.offsets import partition_offsets
from airmirror.kafka.topics import describe_topic_configs, replicated_topics
from airmirror.model import OffsetRun, PartitionKey, PartitionOffsets, PartitionVerification, Verdict, Verification
from airmirror.replication.partition_compare import RunMap
from airmirror.replication.spark.verify_job import VerifyTask, run_verify_job
from airmirror.store import MetadataStore, describe_holder
from airmirror.store.rows import utcnow

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Bounds:
    """The compared ranges of one partition, after retention on either side."""

    source_start: int
    target_start: int
    note: str


def compared_bounds(runs: list[OffsetRun], source: PartitionOffsets, target: PartitionOffsets) -> Bounds:
    """Where the comparison of a partition starts on each side: its first copied offset and that offset's copy,
    moved past what retention deleted since on the source, then on the target."""
    mapping = RunMap(runs)
    start = max(runs[0].upstream_start, source.log_start)
    following = next((r for r in runs if r.upstream_end > start), None)
    notes = []
    if source.log_start > runs[0].upstream_start:
        notes.append(f"source offsets before {source.log_start} deleted by retention, not compared")
    if following is None:
        return Bounds(start, target.stable_end, "; ".join(notes))
    target_start = mapping.to_target(max(start, following.upstream_start))
    assert target_start is not None
    if target.log_start > target_start:
        notes.append(f"target offsets before {target.log_start} deleted by retention, not compared")
        target_start = target.log_start
        after = next((r for r in runs if r.downstream_start + r.length > target_start), None)
        start = mapping.to_source(max(target_start, after.downstream_start)) if after is not None else source.stable_end
        assert start is not None
    return Bounds(start, target_start, "; ".join(notes))


def compacted(configs: dict[str, dict]) -> dict[str, bool]:
    """Per topic, whether its ``cleanup.policy`` includes ``compact``."""
    return {topic: "compact" in (entries["cleanup.policy"].value or "") for topic, entries in configs.items()}


def verify_tasks(flow: FlowConfig, store: MetadataStore, topics_regex: str | None) -> list[VerifyTask]:
    """One task per replicated partition with a cursor (see the module contract)."""
    source, target = source_admin(flow), target_admin(flow)
    cursors = store.cursors(flow.name)
    mappings = replicated_topics(flow, source, topics_regex)
    remote = {m.source_topic: m.remote_topic for m in mappings}
    keys = [k for m in mappings for p in range(m.partitions) if (k := PartitionKey(m.source_topic, p)) in cursors]
    runs = {key: store.offset_runs(flow.name, key) for key in keys}
    keys = [key for key in keys if runs[key]]
    if not keys:
        narrowed = f" matching --topics '{topics_regex}'" if topics_regex else ""
        raise InputError(f"--flow {flow.name}: no partition{narrowed} has been replicated yet; nothing to verify")
    source_offsets = partition_offsets(source, keys)
    remote_keys = {key: PartitionKey(remote[key.topic], key.partition) for key in keys}
    target_offsets = partition_offsets(target, list(remote_keys.values()))
    source_compacted = compacted(describe_topic_configs(source, sorted({k.topic for k in keys})))
    target_compacted = compacted(describe_topic_configs(target, sorted(set(remote.values()))))
    source_config, target_config = flow.source_client("consumer"), flow.target_client("consumer")
    source_access, target_access = access_scope(flow, flow.source), access_scope(flow, flow.target)
    tasks = []
    for key in keys:
        remote_key = remote_keys[key]
        bounds = compared_bounds(runs[key], source_offsets[key], target_offsets[remote_key])
        tasks.append(
            VerifyTask(
                topic=key.topic,
                partition=key.partition,
                remote_topic=remote_key.topic,
                runs=runs[key],
                source_start=bounds.source_start,
                source_end=max(bounds.source_start, cursors[key]),
                source_later_end=max(cursors[key], source_offsets[key].stable_end),
                target_start=bounds.target_start,
                target_end=max(bounds.target_start, target_offsets[remote_key].stable_end),
                source_compacted=source_compacted[key.topic],
                target_compacted=target_compacted[remote_key.topic],
                note=bounds.note,
                source_access=source_access,
                target_access=target_access,
                source_consumer_config=source_config,
                target_consumer_config=target_config,
            )
        )
    return tasks


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
        tasks = verify_tasks(flow, store, topics_regex)
        log.info("verifying %d partitions of flow %s", len(tasks), flow.name)
        verified_at = utcnow()
        rows = run_verify_job(spark(), tasks, on_progress)
    partitions = sorted(
        (PartitionVerification(**{**row, "verdict": Verdict(row["verdict"])}) for row in rows), key=lambda p: p.key
    )
    return store.record_verification(Verification(flow.name, verified_at, topics_regex, partitions))
