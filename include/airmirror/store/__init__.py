"""Persistent replication state: cursors, batches, offset syncs, gaps, checkpoints, group syncs and heartbeat
latency (see :mod:`.metadata_store`), and flow leases (see :mod:`.flow_lease`)."""

from airmirror.store.flow_lease import (
    DEFAULT_LEASE_TTL_SECONDS,
    FlowBusyError,
    FlowLease,
    FlowLeaseLostError,
    FlowLeaseRecord,
    describe_holder,
)
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
    "DEFAULT_LEASE_TTL_SECONDS",
    "FlowBusyError",
    "FlowLease",
    "FlowLeaseLostError",
    "FlowLeaseRecord",
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
    "describe_holder",
]
