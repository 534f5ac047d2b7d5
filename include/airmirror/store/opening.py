"""Open one flow of an MM2 properties file together with its metadata store, for one unit of work."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from os import PathLike

from airmirror.config import FlowConfig, load_config
from airmirror.store import MetadataStore


@contextmanager
def open_flow(config_path: str | PathLike[str], flow_name: str) -> Iterator[tuple[FlowConfig, MetadataStore]]:
    """The enabled flow ``flow_name`` of the file and its (migrated) metadata store, disposed afterwards.

    Config problems raise :class:`~airmirror.errors.ConfigError`; an unreachable database raises
    :class:`~airmirror.errors.ReplicationFailure`.
    """
    flow = load_config(config_path).flow(flow_name)
    store = MetadataStore.open(flow.metadata_db_url)
    try:
        yield flow, store
    finally:
        store.dispose()
