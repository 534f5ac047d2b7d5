"""One record as ``airmirror verify`` compares it: what :mod:`airmirror.migration.partition_compare` reads of each
side and :mod:`airmirror.migration.folded_alignment` pairs.  Plain values."""

from __future__ import annotations

from typing import NamedTuple

from airmirror.schemas.framing import IdSlot

Headers = tuple[tuple[str, bytes | None], ...]


class SchemaIdSlot(NamedTuple):
    """Where a source record names a schema id (:class:`~airmirror.schemas.framing.IdSlot`), and the id the flow's
    map gives for it (``None``: unmapped)."""

    slot: IdSlot
    mapped_id: int | None

    @property
    def source_id(self) -> int:
        return self.slot.schema_id

    def name(self, headers: Headers) -> str:
        slot = self.slot
        return f"header {headers[slot.header][0]}" if slot.header >= 0 else slot.side.value


class Record(NamedTuple):
    """What a comparison looks at of one record; ``headers`` is empty for a record without headers.  A source
    record read through a :class:`~airmirror.migration.partition_compare.SchemaIdMap` carries its ``schema_ids``,
    which are not part of its content."""

    offset: int
    key: bytes | None
    value: bytes | None
    headers: Headers
    timestamp: int
    schema_ids: tuple[SchemaIdSlot, ...] = ()

    def content(self) -> tuple[bytes | None, bytes | None, Headers, int]:
        return self.key, self.value, self.headers, self.timestamp
