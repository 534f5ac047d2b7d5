"""Persistent replication state in SQL: :class:`MetadataStore` (see :mod:`.metadata_store`) over cursors,
batches, offset syncs and gaps (:mod:`.batches`), checkpoints and group syncs (:mod:`.checkpoints`), heartbeat
latency (:mod:`.heartbeats`), topic incarnations (:mod:`.incarnations`), retention of the history
(:mod:`.retention`), and flow leases (:mod:`.flow_lease`).
The value types it stores and returns live in :mod:`airmirror.model`."""

from airmirror.store.engine import alembic_config, create_store_engine
from airmirror.store.flow_lease import (
    DEFAULT_LEASE_TTL_SECONDS,
    FlowBusyError,
    FlowLease,
    FlowLeaseLostError,
    FlowLeaseRecord,
    describe_holder,
)
from airmirror.store.metadata_store import MetadataStore
from airmirror.store.range_commits import StaleCursorError

__all__ = [
    "DEFAULT_LEASE_TTL_SECONDS",
    "FlowBusyError",
    "FlowLease",
    "FlowLeaseLostError",
    "FlowLeaseRecord",
    "MetadataStore",
    "StaleCursorError",
    "alembic_config",
    "create_store_engine",
    "describe_holder",
]
