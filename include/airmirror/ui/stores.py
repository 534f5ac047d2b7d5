"""The replication view's metadata stores: opened read-only, once per database for the life of the process.

Contract: the view never migrates or writes a store.  Each store is opened with
:meth:`~airmirror.store.MetadataStore.open_read_only` the first time a request needs it and its engine (a
connection pool) is kept for later requests; :func:`readable_store` checks the schema on every call, so a
store that a task migrates after the API server started becomes readable without a restart.
"""

from __future__ import annotations

import threading

from airmirror.config import FlowConfig
from airmirror.store import MetadataStore

_stores: dict[str, MetadataStore] = {}
_lock = threading.Lock()


def readable_store(flow: FlowConfig) -> MetadataStore:
    """The flow's store, opened read-only; raises
    :class:`~airmirror.store.metadata_store.SchemaNotCurrentError` when its schema is missing or not this
    airmirror's, and :class:`~airmirror.errors.ReplicationFailure` when it cannot be read."""
    url = str(flow.metadata_db_url)
    with _lock:
        store = _stores.get(url)
        if store is None:
            store = _stores[url] = MetadataStore.open_read_only(url)
    store.check_schema()
    return store
