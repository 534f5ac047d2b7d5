"""Group offset sync: commit a source group's checkpoints to the same group on the target
(MM2's ``sync.group.offsets.enabled``).

Contract, per group:
- Offsets are committed only while the target group is EMPTY or absent (DEAD).  A group in any other state
  (members consuming, rebalancing, unknown) is skipped, and so is a commit the broker refuses because
  members joined meanwhile.  A skip is never silent: outcome ``SKIPPED_ACTIVE`` in the metadata DB (shown by
  ``airmirror status`` and ``airmirror translate``), a warning in the log, and the returned record.
- Only forward: a partition is committed when the target group has no offset for it or a lower one.  The
  target is never rewound, not even when the group rewound on the source.
- The committed offset is the checkpoint's downstream offset with the group's commit metadata.
- Outcomes: ``SYNCED`` (some offsets committed), ``UP_TO_DATE`` (nothing to move forward),
  ``SKIPPED_ACTIVE``, ``FAILED`` (any other error, logged as an error).  Every outcome is stored.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime

from confluent_kafka import ConsumerGroupState, ConsumerGroupTopicPartitions, TopicPartition

from airmirror.client.failover import ACTIVE_GROUP_ERRORS, INACTIVE_STATES
from airmirror.config import FlowConfig
from airmirror.errors import ReplicationFailure
from airmirror.kafka.authorization import naming_refusals
from airmirror.kafka.clients import REQUEST_TIMEOUT_S, ClusterAdmin, target_admin
from airmirror.kafka.groups import describe_group
from airmirror.kafka.retry import retry_transient
from airmirror.model import GroupSyncOutcome, GroupSyncRecord, PartitionKey, StoredCheckpoint
from airmirror.store import MetadataStore

log = logging.getLogger(__name__)


def forward_offsets(
    checkpoints: Sequence[StoredCheckpoint], target_offsets: Mapping[PartitionKey, int]
) -> list[StoredCheckpoint]:
    """The checkpoints that move the target group forward: no target offset yet, or a lower one."""
    return [
        c
        for c in checkpoints
        if target_offsets.get(PartitionKey(c.remote_topic, c.partition), -1) < c.downstream_offset
    ]


def sync_group_offsets(
    flow: FlowConfig, store: MetadataStore, group: str, checkpoints: Sequence[StoredCheckpoint]
) -> GroupSyncRecord:
    """Apply the contract to ``group`` with its newest ``checkpoints``; store, log and return the outcome."""
    admin = target_admin(flow)
    try:
        with naming_refusals(admin.access, group=group):
            record = _sync(flow, admin, group, checkpoints)
    except ReplicationFailure as error:
        record = _record(group, GroupSyncOutcome.FAILED, "UNKNOWN", 0, str(error))
    store.record_group_sync(flow.name, record)
    if record.outcome is GroupSyncOutcome.SKIPPED_ACTIVE:
        log.warning("group offset sync of %s skipped for group '%s': %s", flow.name, group, record.detail)
    elif record.outcome is GroupSyncOutcome.FAILED:
        log.error("group offset sync of %s failed for group '%s': %s", flow.name, group, record.detail)
    else:
        log.info("group offset sync of %s for group '%s': %s", flow.name, group, record.detail)
    return record


def _sync(
    flow: FlowConfig, admin: ClusterAdmin, group: str, checkpoints: Sequence[StoredCheckpoint]
) -> GroupSyncRecord:
    where = f"group '{group}' on cluster '{flow.target}'"
    description = describe_group(admin, group)
    state = description.state
    if state not in INACTIVE_STATES:
        members = len(description.members)
        detail = f"target group is active ({state.name}, {members} members): offsets not committed"
        return _record(group, GroupSyncOutcome.SKIPPED_ACTIVE, state.name, 0, detail)
    committed = retry_transient(
        lambda: admin.list_consumer_group_offsets(
            [ConsumerGroupTopicPartitions(group)], request_timeout=REQUEST_TIMEOUT_S
        )[group].result(),
        f"list the committed offsets of {where}",
    )
    target_offsets = {PartitionKey(tp.topic, tp.partition): tp.offset for tp in committed.topic_partitions}
    moves = forward_offsets(checkpoints, target_offsets)
    if not moves:
        return _record(group, GroupSyncOutcome.UP_TO_DATE, state.name, 0, "target group is at or past every checkpoint")
    request = ConsumerGroupTopicPartitions(
        group, [TopicPartition(c.remote_topic, c.partition, c.downstream_offset, c.metadata) for c in moves]
    )
    result = retry_transient(
        lambda: admin.alter_consumer_group_offsets([request], request_timeout=REQUEST_TIMEOUT_S)[group].result(),
        f"commit offsets of {where}",
    )
    errors = [tp.error for tp in result.topic_partitions if tp.error is not None]
    if any(error.code() in ACTIVE_GROUP_ERRORS for error in errors):
        detail = f"target group became active while committing ({errors[0].str()}): offsets not committed"
        return _record(group, GroupSyncOutcome.SKIPPED_ACTIVE, state.name, 0, detail)
    if errors:
        return _record(group, GroupSyncOutcome.FAILED, state.name, 0, f"commit refused: {errors[0].str()}")
    described = "absent" if state is ConsumerGroupState.DEAD else "empty"
    detail = f"committed {len(moves)} offsets to the {described} target group"
    return _record(group, GroupSyncOutcome.SYNCED, state.name, len(moves), detail)


def _record(group: str, outcome: GroupSyncOutcome, state: str, committed: int, detail: str) -> GroupSyncRecord:
    return GroupSyncRecord(group, outcome, state, committed, detail, datetime.now(UTC))
