"""Retention deletes a batch only when nothing needs it: every table that names a batch is one retention knows."""

from __future__ import annotations

from airmirror.store.retention import KEEPERS
from airmirror.store.schema import batch_ranges, batches, metadata, offset_syncs


def test_every_reference_to_a_batch_keeps_it_or_is_let_go_by_retention() -> None:
    referencing = {
        fk.parent.table.name
        for table in metadata.tables.values()
        for fk in table.foreign_keys
        if fk.column.table is batches
    }
    let_go = {batch_ranges.name, offset_syncs.name}  # deleted with the batch / batch_id set to NULL
    assert referencing == {table.name for table in KEEPERS} | let_go
    assert offset_syncs.c.batch_id.nullable
