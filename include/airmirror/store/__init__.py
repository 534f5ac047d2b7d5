"""Persistent replication state: cursors, batches, offset syncs, gaps, checkpoints, group syncs and heartbeat
latency (see :mod:`.metadata_store`)."""

from airmirror.store.metadata_store import (
    BatchRecord,
    GroupSyncRecord,
    HeartbeatEmission,
    HeartbeatLatency,
    MetadataStore,
    PartitionStats,
    StaleCursorError,
    StoredCheckpoint,
    alembic_config,
    create_store_engine,
)
from airmirror.store.schema import BatchState, GroupSyncOutcome

__all__ = [
    "BatchRecord",
    "BatchState",
    "GroupSyncOutcome",
    "GroupSyncRecord",
    "HeartbeatEmission",
    "HeartbeatLatency",
    "MetadataStore",
    "PartitionStats",
    "StaleCursorError",
    "StoredCheckpoint",
    "alembic_config",
    "create_store_engine",
]
