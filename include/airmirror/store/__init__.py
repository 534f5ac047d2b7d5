"""Persistent replication state: cursors, batches, offset syncs and gaps (see :mod:`.metadata_store`)."""

from airmirror.store.metadata_store import (
    BatchRecord,
    MetadataStore,
    PartitionStats,
    StaleCursorError,
    alembic_config,
    create_store_engine,
)
from airmirror.store.schema import BatchState

__all__ = [
    "BatchRecord",
    "BatchState",
    "MetadataStore",
    "PartitionStats",
    "StaleCursorError",
    "alembic_config",
    "create_store_engine",
]
