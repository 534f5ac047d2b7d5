"""Leader waits: the source partitions a flow's plans leave where they stand because they have no leader
(:mod:`airmirror.replication.plan_inputs`), one row each in ``airmirror_leader_waits``.

Contract: :meth:`LeaderWaitStore.record_leader_waits` makes the rows of a plan's partitions say what the plan found,
keeping ``since`` of a partition that still waits, and writes nothing when nothing changed (a plan runs every round
of a live run).  The rows are bounded by the flow's partitions, never by its history.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from sqlalchemy import and_, delete, or_, select

from airmirror.model import LeaderWait, PartitionKey
from airmirror.store.engine import EngineHolder
from airmirror.store.rows import utcnow
from airmirror.store.schema import leader_waits


class LeaderWaitStore(EngineHolder):
    """The flow's partitions waiting for a leader (see the module docstring)."""

    def leader_waits(self, flow: str) -> list[LeaderWait]:
        """The flow's partitions waiting for a leader, by topic and partition."""
        with self._read(f"read the leader waits of flow {flow!r}") as connection:
            rows = connection.execute(
                select(leader_waits).where(leader_waits.c.flow == flow).order_by(leader_waits.c.topic, "partition")
            )
            return [LeaderWait(row.topic, row.partition, row.since, row.reason) for row in rows]

    def record_leader_waits(
        self, flow: str, planned: Iterable[PartitionKey], waiting: Mapping[PartitionKey, str]
    ) -> None:
        """A plan of the partitions ``planned`` found ``waiting`` (partition to the broker's error) without a
        leader: rows are added for those, kept (with their ``since``) for those still waiting and removed for the
        others planned; nothing is written when the rows already say so."""
        known = {wait.key: wait for wait in self.leader_waits(flow)}
        answered = [key for key in planned if key in known and key not in waiting]
        new = {key: reason for key, reason in waiting.items() if key not in known}
        if not answered and not new:
            return
        now = utcnow()
        with self._write(f"record the leader waits of flow {flow!r}") as connection:
            if answered:
                connection.execute(
                    delete(leader_waits).where(
                        leader_waits.c.flow == flow,
                        or_(
                            *(
                                and_(leader_waits.c.topic == k.topic, leader_waits.c.partition == k.partition)
                                for k in answered
                            )
                        ),
                    )
                )
            if new:
                connection.execute(
                    leader_waits.insert(),
                    [
                        {"flow": flow, "topic": k.topic, "partition": k.partition, "since": now, "reason": reason}
                        for k, reason in new.items()
                    ],
                )
