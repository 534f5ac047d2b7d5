"""Topic incarnations: noticing that a source or remote topic was deleted, recreated or truncated, and what a
flow then does.  Offsets only mean something within one incarnation of a topic, so airmirror never maps an
offset of one incarnation through offset-sync runs of another.

Source topics (the planner detects it, see :func:`airmirror.replication.plan_arithmetic.source_reset`):

* ``airmirror.source.reset.policy = reset`` (default): like MM2's consumer under ``auto.offset.reset``, the
  partition starts again in its new incarnation.  The batch's commit records a *source reset* (time, old and
  new topic id, abandoned cursor, new start; ``status`` shows it) and retires the partition's offset-sync
  runs, so the next runs are a new generation.
  After a truncation that leader epochs located (:func:`diverged_cursors`), only the runs from the divergence
  point on are retired, and the partition continues from there.
* ``fail``: only the affected partitions stop: they are recorded as stopped (``status`` shows them), left out
  of every plan, and every run fails after copying everything else, with an error that names the
  topic-partition, the old and new ids or offsets, and ``airmirror reset``, which resolves it.

Remote topics: the id of every remote topic is recorded the first time a run sees it.  Each run compares,
before anything is written: a remote topic that is gone or has another id is stopped.  It is never
recreated silently, its offset-sync runs are retired at once (nothing is translated through them any more),
its ranges drop out of an unfinished batch, and every run fails naming it until ``airmirror reset`` re-seeds
it: the next run then creates the remote topic if it is missing and copies the source topic from its start
(per ``auto.offset.reset``).

Rerouted topics: the source topic of every remote topic is recorded with it.  Where the flow now names another
remote topic for a source topic (a changed ``RegexRouter``, :mod:`airmirror.config.transforms` rule 7, or a
changed replication policy), the source topic starts afresh in its new remote topic, by itself: it is re-seeded
as ``airmirror reset`` re-seeds it (:func:`follow_reroutes`), so it is copied from its start into the new topic
and nothing is translated through the old topic's runs any more; the old remote topic keeps what was copied.  A
resumed batch finishes into the remote topics it was planned with; the change applies from the next batch.

A resumed batch (:mod:`airmirror.replication.resume`) drops an unfinished range whose remote topic is stopped.
One whose source topic is gone or has another id ends where its copy got to when chunks of it are committed,
so its cursor records how far the old incarnation was copied, and drops out otherwise.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from confluent_kafka.admin import AdminClient

from airmirror.config import FlowConfig
from airmirror.errors import InputError, ReplicationFailure
from airmirror.kafka.clients import cluster_metadata, source_admin
from airmirror.kafka.offsets import divergence_points
from airmirror.kafka.topic_ids import settled_topic_ids, topic_ids
from airmirror.kafka.topics import TopicMapping
from airmirror.model import CursorState, NoJobYet, PartitionKey, PartitionOffsets, PlannedRange, ResetsCursor, Stop
from airmirror.replication.plan_arithmetic import needs_validation
from airmirror.replication.spark.progress import forget_progress, supersede_jobs
from airmirror.store import MetadataStore

log = logging.getLogger(__name__)


def reset_command(flow: FlowConfig, topic: str) -> str:
    return f"airmirror reset {flow.config_path} --flow {flow.name} --topic {topic}"


def diverged_cursors(
    flow: FlowConfig, cursors: Mapping[PartitionKey, CursorState], offsets: Mapping[PartitionKey, PartitionOffsets]
) -> dict[PartitionKey, int]:
    """Per stored cursor whose source log diverged below it, the offset where it diverged: cursors of the
    same incarnation whose leader epoch changed since are validated with the leader (see
    :mod:`airmirror.replication.plan_arithmetic`).  Read-only."""
    suspects = {
        key: (state.next_offset, epoch)
        for key, state in cursors.items()
        if (epoch := state.leader_epoch) is not None
        and key in offsets
        and state.source_topic_id == offsets[key].topic_id
        and needs_validation(state.next_offset, epoch, offsets[key])
    }
    return divergence_points(flow.source_client("consumer"), suspects)


def writable_mappings(
    flow: FlowConfig, store: MetadataStore, target: AdminClient, mappings: list[TopicMapping], *, dry_run: bool
) -> list[TopicMapping]:
    """The mappings whose remote topics may be written: rerouted source topics are re-seeded
    (:func:`follow_reroutes`), remote topics recorded with another id than they have now (or gone) are stopped
    (unless ``dry_run``), and stopped topics stay out until reset.  Called holding the flow's lease."""
    follow_reroutes(flow, store, mappings, dry_run=dry_run)
    stopped = {stop.topic for stop in store.stops(flow.name) if stop.partition is None}
    recorded = store.remote_topic_ids(flow.name)
    current = topic_ids(
        target, [m.remote_topic for m in mappings if m.remote_topic in recorded and m.source_topic not in stopped]
    )
    usable = []
    for mapping in mappings:
        if mapping.source_topic in stopped:
            continue
        old = recorded.get(mapping.remote_topic)
        new = current.get(mapping.remote_topic, old)
        if new == old:
            usable.append(mapping)
            continue
        change = "was deleted" if new is None else f"was recreated (topic id {old} -> {new})"
        reason = (
            f"remote topic {mapping.remote_topic} on cluster {flow.target} {change}; airmirror stopped replicating "
            f"{mapping.source_topic} into it and translates nothing through its old offset-syncs; "
            f"run `{reset_command(flow, mapping.source_topic)}` to copy {mapping.source_topic} again from its start"
        )
        log.error("%s", reason)
        if not dry_run:
            store.stop_remote_topic(flow.name, mapping.source_topic, mapping.remote_topic, reason)
    return usable


def follow_reroutes(flow: FlowConfig, store: MetadataStore, mappings: Iterable[TopicMapping], *, dry_run: bool) -> None:
    """Re-seed each source topic of ``mappings`` recorded with another remote topic than its mapping names (the
    module's rerouted topics); a dry run only logs them.  A remote topic recorded without its source (before
    sources were recorded, when no router renamed topics) is the replication policy's name of its source topic.
    Called holding the flow's lease."""
    remote = {m.source_topic: m.remote_topic for m in mappings}
    named_by_policy = {flow.policy.format_remote_topic(flow.source, topic): topic for topic in remote}
    for old_remote, recorded_source in sorted(store.remote_topic_sources(flow.name).items()):
        topic = recorded_source or named_by_policy.get(old_remote)
        new_remote = None if topic is None else remote.get(topic)
        if topic is None or new_remote is None or new_remote == old_remote:
            continue
        log.warning(
            "flow %s: %s now goes to remote topic %s, not %s: it starts afresh there, copied from its start; "
            "%s keeps what was copied",
            flow.name,
            topic,
            new_remote,
            old_remote,
            old_remote,
        )
        if not dry_run:
            _reseed(flow, store, topic, old_remote)


def record_remote_topics(
    flow: FlowConfig, store: MetadataStore, target: AdminClient, mappings: Iterable[TopicMapping]
) -> None:
    """Remember the id and source topic of every remote topic seen for the first time (after topic sync created
    it), waiting for the id of one created a moment ago: one left unrecorded and deleted before the next run would
    be created again, not stopped."""
    recorded = store.remote_topic_ids(flow.name)
    sources = {m.remote_topic: m.source_topic for m in mappings if m.remote_topic not in recorded}
    found = {name: topic_id for name, topic_id in settled_topic_ids(target, sources).items() if topic_id is not None}
    if found:
        store.record_remote_topic_ids(flow.name, found, sources)


def refuse_source_resets(
    flow: FlowConfig,
    store: MetadataStore,
    ranges: list[PlannedRange],
    stored_ids: dict[PartitionKey, str | None],
    *,
    dry_run: bool,
) -> list[PlannedRange]:
    """Under ``airmirror.source.reset.policy = fail``, stop the partitions whose ranges reset their source
    cursor (unless ``dry_run``) and leave them out; other ranges pass."""
    if flow.copy.source_reset_policy != "fail":
        return ranges
    kept = []
    for r in ranges:
        if not isinstance(reset := r.begins, ResetsCursor):
            kept.append(r)
            continue
        old_id = stored_ids.get(r.key)
        if old_id is not None and old_id != r.source_topic_id:
            change = f"was recreated (topic id {old_id} -> {r.source_topic_id})"
        elif reset.truncated_at is not None:
            diverged = reset.truncated_at
            change = f"was truncated: its log diverged at offset {diverged}, below the stored cursor {reset.cursor}"
        else:
            change = f"now ends below the stored cursor {reset.cursor}"
        reason = (
            f"source partition {r.key} {change}; airmirror.source.reset.policy = fail stopped it at cursor "
            f"{reset.cursor}; run `{reset_command(flow, r.topic)}` to copy the topic again from its start"
        )
        log.error("%s", reason)
        if not dry_run:
            store.stop_partition(flow.name, r.key, reason)
    return kept


def source_partition_count(flow: FlowConfig, topic: str) -> int:
    """How many partitions the source topic has now (0 when it is gone)."""
    metadata = cluster_metadata(source_admin(flow), topic).topics.get(topic)
    return len(metadata.partitions) if metadata is not None and metadata.error is None else 0


class TopicsStopped(ReplicationFailure):
    """Some of the flow's topics or partitions are stopped; retrying does not help until they are reset."""


def raise_for_stops(flow: FlowConfig, store: MetadataStore) -> None:
    """Fail the run (:class:`TopicsStopped`, exit 1) when any of the flow's topics or partitions is stopped,
    naming each."""
    stops: list[Stop] = store.stops(flow.name)
    if stops:
        raise TopicsStopped(f"flow {flow.name}: " + "; ".join(stop.reason for stop in stops))


@dataclass(frozen=True)
class TopicReset:
    """What ``airmirror reset`` did: the partitions of ``topic`` whose cursors it removed."""

    flow: str
    topic: str
    remote_topic: str
    partitions: list[int]


def reset_topic(flow: FlowConfig, store: MetadataStore, topic: str, holder: str) -> TopicReset:
    """``airmirror reset``: re-seed source ``topic`` so the next run copies it from its start (per
    ``auto.offset.reset``) into its remote topic, creating that topic if it is missing.

    Holding the flow's lease, it fences every copy attempt of the topic and makes the batch log forget the
    topic's progress (:func:`~airmirror.replication.spark.progress.forget_progress`; the target may hold the same
    source offsets already, as after a truncation), then in one DB transaction removes the topic's cursors,
    offset-syncs, checkpoints, stops and recorded remote topic id, and drops its ranges from the unfinished
    batch.  Kafka forgets first: if the DB step fails, the old cursors stay and the next run continues from
    them, or the reset is run again.  A topic the flow does not replicate is an :class:`InputError` (exit 2)."""
    if not flow.should_replicate(topic):
        raise InputError(f"--topic: flow {flow.name} does not replicate topic '{topic}' (give the source topic's name)")
    with store.hold_flow(flow.name, holder) as lease:
        removed = _reseed(flow, store.fenced_by(lease), topic, flow.remote_topic(topic))
    log.warning("flow %s: %s reset; the next run copies it from its start", flow.name, topic)
    return TopicReset(flow.name, topic, flow.remote_topic(topic), sorted(key.partition for key in removed))


def _reseed(flow: FlowConfig, store: MetadataStore, topic: str, remote_topic: str) -> list[PartitionKey]:
    """What :func:`reset_topic` does holding the lease (``store`` is fenced by it), for source ``topic`` copied into
    ``remote_topic``; returns the partitions whose cursors it removed."""
    partitions = {key.partition for key in store.cursor_states(flow.name) if key.topic == topic}
    partitions.update(range(source_partition_count(flow, topic)))
    unfinished = store.unfinished_batch(flow.name)
    supersede_jobs(
        flow,
        [PartitionKey(topic, p) for p in partitions],
        NoJobYet() if unfinished is None else unfinished.jobs,
        None if unfinished is None else unfinished.id,
        check_lease=store.check_lease,
    )
    forget_progress(flow, topic, remote_topic, partitions)
    return store.reset_topic(flow.name, topic, remote_topic)
