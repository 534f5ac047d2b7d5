"""Lag over time (:class:`LagStore`, a part of :class:`~airmirror.store.metadata_store.MetadataStore`).

Contract: samples are only added, one row per partition and sampling time, so the figures can be plotted over
time; reading returns them oldest first.  Each batch commit adds one sample per partition it copied
(:mod:`airmirror.replication.recording`).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from sqlalchemy import select

from airmirror.model import LagSample
from airmirror.store.engine import EngineHolder
from airmirror.store.rows import as_columns, from_columns, insert_many
from airmirror.store.schema import lag_samples


class LagStore(EngineHolder):
    """Lag samples of the store's flows (see the module docstring for the contract)."""

    def record_lag_samples(self, flow: str, samples: Sequence[LagSample]) -> None:
        """Add ``samples`` of ``flow``."""
        with self._transaction(f"record lag samples of flow {flow!r}") as connection:
            insert_many(connection, lag_samples, [{"flow": flow, **as_columns(sample)} for sample in samples])

    def lag_samples(self, flow: str, since: datetime | None = None) -> list[LagSample]:
        """The flow's samples taken at or after ``since`` (all without it), oldest first."""
        query = select(lag_samples).where(lag_samples.c.flow == flow)
        if since is not None:
            query = query.where(lag_samples.c.sampled_at >= since)
        order = (lag_samples.c.sampled_at, lag_samples.c.topic, lag_samples.c.partition)
        with self._transaction(f"read lag samples of flow {flow!r}") as connection:
            return [from_columns(LagSample, row) for row in connection.execute(query.order_by(*order))]
