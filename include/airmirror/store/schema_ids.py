"""Schema registries in SQL (:class:`SchemaIdStore`, a part of :class:`~airmirror.store.metadata_store.MetadataStore`).

Contract:

* The id map of a flow is source schema id -> target schema id.  An id, once mapped, keeps its target id: a
  registry never gives an id to another schema, so a mapping is only ever added (or written again, equal).  Ids a
  copy task mapped in-run are stored by the driver after the job (:mod:`airmirror.schemas.record_ids`, rule 3);
  if the driver dies first, the next run maps them again, to the same ids.
* The synced subjects of a flow are those of its newest schema sync, each with the versions copied.
"""

from __future__ import annotations

from collections.abc import Mapping

from sqlalchemy import func, select

from airmirror.model import SyncedSubject
from airmirror.store.engine import EngineHolder
from airmirror.store.rows import upsert, utcnow
from airmirror.store.schema import partition_totals, schema_ids, schema_subjects


class SchemaIdStore(EngineHolder):
    """The schema id maps and synced subjects of the store's flows (see the module docstring)."""

    def record_schema_ids(self, flow: str, ids: Mapping[int, int]) -> None:
        """Add ``ids`` (source id -> target id) to the flow's map."""
        if not ids:
            return
        now = utcnow()
        rows = [
            {"flow": flow, "source_id": source, "target_id": target, "recorded_at": now}
            for source, target in sorted(ids.items())
        ]
        with self._write(f"record the schema ids of flow {flow!r}") as connection:
            upsert(connection, schema_ids, rows)

    def schema_ids(self, flow: str) -> dict[int, int]:
        """The flow's id map, source id -> target id."""
        with self._read(f"read the schema ids of flow {flow!r}") as connection:
            rows = connection.execute(
                select(schema_ids.c.source_id, schema_ids.c.target_id).where(schema_ids.c.flow == flow)
            )
            return {int(row.source_id): int(row.target_id) for row in rows}

    def schema_id_count(self, flow: str) -> int:
        """How many source ids the flow's map holds (one query, whatever the map's size)."""
        with self._read(f"count the schema ids of flow {flow!r}") as connection:
            count = connection.execute(
                select(func.count()).select_from(schema_ids).where(schema_ids.c.flow == flow)
            ).scalar_one()
        return int(count)

    def record_schema_subjects(self, flow: str, subjects: list[SyncedSubject]) -> None:
        """Record the subjects a schema sync of the flow copied."""
        rows = [
            {
                "flow": flow,
                "subject": s.subject,
                "target_subject": s.target_subject,
                "versions": s.versions,
                "synced_at": s.synced_at,
            }
            for s in subjects
        ]
        with self._write(f"record the schema subjects of flow {flow!r}") as connection:
            upsert(connection, schema_subjects, rows)

    def schema_subjects(self, flow: str) -> list[SyncedSubject]:
        """The flow's synced subjects, by name."""
        with self._read(f"read the schema subjects of flow {flow!r}") as connection:
            rows = connection.execute(
                select(schema_subjects).where(schema_subjects.c.flow == flow).order_by(schema_subjects.c.subject)
            )
            return [SyncedSubject(r.subject, r.target_subject, r.versions, r.synced_at) for r in rows]

    def schema_passed(self, flow: str) -> int:
        """Records of the flow copied unchanged because their schema id was unknown (``airmirror.schema.unknown``)."""
        with self._read(f"read the records passed through of flow {flow!r}") as connection:
            total = connection.execute(
                select(func.coalesce(func.sum(partition_totals.c.schema_passed), 0)).where(
                    partition_totals.c.flow == flow
                )
            ).scalar_one()
        return int(total)
