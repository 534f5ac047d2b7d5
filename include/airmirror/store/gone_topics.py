"""Gone topics: the source topics a flow has copied that its source cluster no longer holds (deleted), one row each in
``airmirror_gone_topics``, written by step 1 of every run
(:func:`airmirror.replication.pipeline.sync_flow_topics`).

Contract: :meth:`GoneTopicStore.record_gone_topics` makes the rows of the topics a run looked for say what it
found, keeping ``since`` of a topic still gone, and writes nothing when nothing changed (step 1 runs every round of
a live run).  A topic created again under its name loses its row at the next run's step 1.  The rows are bounded by
the flow's topics, never by its history.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime

from sqlalchemy import delete, select

from airmirror.store.engine import EngineHolder
from airmirror.store.rows import utcnow
from airmirror.store.schema import gone_topics


class GoneTopicStore(EngineHolder):
    """The flow's copied source topics that the source no longer holds (see the module docstring)."""

    def gone_topics(self, flow: str) -> dict[str, datetime]:
        """Each gone topic of the flow, by name, with since when it has been gone."""
        with self._read(f"read the gone topics of flow {flow!r}") as connection:
            rows = connection.execute(
                select(gone_topics.c.topic, gone_topics.c.since)
                .where(gone_topics.c.flow == flow)
                .order_by(gone_topics.c.topic)
            )
            return {row.topic: row.since for row in rows}

    def record_gone_topics(self, flow: str, looked_for: Iterable[str], gone: Iterable[str]) -> None:
        """A run looked for the copied topics ``looked_for`` on the source and missed ``gone`` (among them): rows are
        added for those, kept (with their ``since``) for those still gone and removed for the others looked for;
        nothing is written when the rows already say so."""
        missing = set(gone)
        known = self.gone_topics(flow)
        back = sorted(topic for topic in set(looked_for) if topic in known and topic not in missing)
        new = sorted(topic for topic in missing if topic not in known)
        if not back and not new:
            return
        with self._write(f"record the gone topics of flow {flow!r}") as connection:
            if back:
                connection.execute(delete(gone_topics).where(gone_topics.c.flow == flow, gone_topics.c.topic.in_(back)))
            if new:
                now = utcnow()
                connection.execute(gone_topics.insert(), [{"flow": flow, "topic": t, "since": now} for t in new])
