"""Heartbeat emissions and replication latency (:class:`HeartbeatStore`, a part of
:class:`~airmirror.store.metadata_store.MetadataStore`).

Contract: the newest value per key is kept (an upsert): per flow the newest heartbeat it wrote to its target,
per (flow, heartbeat source alias, heartbeat target alias) the newest latency observed from a copied
heartbeat.  Each carries the time it was emitted or observed.  They describe what was written to the target
cluster, so callers save them only after the target acknowledged the write.
"""

from __future__ import annotations

from sqlalchemy import select

from airmirror.model import HeartbeatEmission, HeartbeatLatency
from airmirror.store.engine import EngineHolder
from airmirror.store.rows import as_columns, upsert
from airmirror.store.schema import heartbeat_emissions, heartbeat_latency


class HeartbeatStore(EngineHolder):
    """Heartbeat emissions and latencies of the store's flows (see the module docstring for the contract)."""

    def record_heartbeat_latency(self, flow: str, latency: HeartbeatLatency) -> None:
        """Make ``latency`` the newest observation for its heartbeat source and target aliases."""
        with self._write(f"record the heartbeat latency of flow {flow!r}") as connection:
            upsert(connection, heartbeat_latency, [{"flow": flow, **as_columns(latency)}])

    def heartbeat_latencies(self, flow: str) -> list[HeartbeatLatency]:
        """The newest latency per heartbeat source and target alias seen by the flow."""
        with self._read(f"read the heartbeat latencies of flow {flow!r}") as connection:
            rows = connection.execute(
                select(heartbeat_latency)
                .where(heartbeat_latency.c.flow == flow)
                .order_by(heartbeat_latency.c.source_alias, heartbeat_latency.c.target_alias)
            )
            return [
                HeartbeatLatency(row.source_alias, row.target_alias, row.heartbeat_at, row.observed_at, row.latency_ms)
                for row in rows
            ]

    def record_heartbeat_emitted(self, flow: str, emission: HeartbeatEmission) -> None:
        """Make ``emission`` the flow's newest heartbeat written to its target."""
        with self._write(f"record the heartbeat emitted by flow {flow!r}") as connection:
            upsert(connection, heartbeat_emissions, [{"flow": flow, **as_columns(emission)}])

    def heartbeat_emission(self, flow: str) -> HeartbeatEmission | None:
        """The flow's newest heartbeat written to its target, ``None`` before the first."""
        with self._read(f"read the heartbeat emitted by flow {flow!r}") as connection:
            row = connection.execute(
                select(heartbeat_emissions).where(heartbeat_emissions.c.flow == flow)
            ).one_or_none()
        return None if row is None else HeartbeatEmission(row.topic, row.heartbeat_at)
