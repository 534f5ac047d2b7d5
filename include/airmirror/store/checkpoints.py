"""Checkpoints and group offset syncs (:class:`CheckpointStore`, a part of
:class:`~airmirror.store.metadata_store.MetadataStore`).

Contract: the newest value per key is kept (an upsert): per (flow, group, source topic, partition) the newest
checkpoint, per (flow, group) the newest group offset sync outcome.  Each carries the time it was emitted or
observed.  They describe what was written to the target cluster, so callers save them only after the target
acknowledged the write.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import Row, select

from airmirror.model import GroupSyncRecord, StoredCheckpoint
from airmirror.store.engine import EngineHolder
from airmirror.store.rows import as_columns, from_columns, upsert
from airmirror.store.schema import checkpoints, group_syncs


class CheckpointStore(EngineHolder):
    """Checkpoints and group offset syncs of the store's flows (see the module docstring for the contract)."""

    def save_checkpoints(self, flow: str, saved: Sequence[StoredCheckpoint]) -> None:
        """Make each checkpoint the newest of its (group, topic, partition) in one transaction."""
        with self._write(f"save {len(saved)} checkpoints of flow {flow!r}") as connection:
            upsert(connection, checkpoints, [_checkpoint_row(flow, checkpoint) for checkpoint in saved])

    def checkpoints(self, flow: str, group: str | None = None) -> list[StoredCheckpoint]:
        """The newest checkpoints of the flow (of one group when given), by group, topic and partition."""
        query = select(checkpoints).where(checkpoints.c.flow == flow)
        if group is not None:
            query = query.where(checkpoints.c.group_id == group)
        with self._read(f"read the checkpoints of flow {flow!r}") as connection:
            rows = connection.execute(
                query.order_by(checkpoints.c.group_id, checkpoints.c.topic, checkpoints.c.partition)
            )
            return [_stored_checkpoint(row) for row in rows]

    def record_group_sync(self, flow: str, record: GroupSyncRecord) -> None:
        """Make ``record`` the newest group offset sync outcome of its group."""
        with self._write(f"record the group offset sync of {record.group!r} in flow {flow!r}") as connection:
            upsert(connection, group_syncs, [{"flow": flow, **as_columns(record, {"group": "group_id"})}])

    def group_syncs(self, flow: str, group: str | None = None) -> list[GroupSyncRecord]:
        """The newest group offset sync outcome of every group of the flow (or of one group), by group."""
        query = select(group_syncs).where(group_syncs.c.flow == flow)
        if group is not None:
            query = query.where(group_syncs.c.group_id == group)
        with self._read(f"read the group offset syncs of flow {flow!r}") as connection:
            rows = connection.execute(query.order_by(group_syncs.c.group_id))
            return [
                GroupSyncRecord(
                    row.group_id, row.outcome, row.target_state, row.offsets_committed, row.detail, row.synced_at
                )
                for row in rows
            ]


CHECKPOINT_COLUMNS = {"group": "group_id", "metadata": "commit_metadata"}
"""How :class:`~airmirror.model.StoredCheckpoint` fields are named as columns of ``airmirror_checkpoints``."""


def _checkpoint_row(flow: str, checkpoint: StoredCheckpoint) -> dict[str, Any]:
    return {"flow": flow, **as_columns(checkpoint, CHECKPOINT_COLUMNS)}


def _stored_checkpoint(row: Row[Any]) -> StoredCheckpoint:
    return from_columns(StoredCheckpoint, row, CHECKPOINT_COLUMNS)
