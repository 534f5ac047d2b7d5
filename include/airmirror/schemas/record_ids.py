"""The schema ids of copied records: rewritten per record in the copy job (``airmirror.schema.ids``).

Contract:

1. **Which records.**  Only the sides (key, value) of a topic that :attr:`RecordIds.framed` lists are read: those with
   a ``{topic}-key``/``{topic}-value`` subject on the source registry, both sides of a topic matching
   ``airmirror.schema.topics``.  A payload of such a side that is not framed (:mod:`airmirror.schemas.framing`: null,
   short, another first byte) is copied as it is; every other record is copied as it is, untouched.  A record whose
   ``__key_schema_id`` / ``__value_schema_id`` header names the side's schema (an id or a GUID) carries that side's
   payload unframed, as confluent-kafka's deserializers read it (the header first): the payload is copied as it is,
   even when it starts with a zero byte.
2. **translate**: a framed id is replaced by its target id, and so is the id form of a ``__key_schema_id`` /
   ``__value_schema_id`` header; nothing else changes (Protobuf message indexes, payload, other headers, their order).
   **keep**: nothing changes, but every id is checked to be on the target.
3. **An id not in the map** (a schema registered after the run's schema sync) is copied from the source registry to
   the target in the same run (:meth:`~airmirror.schemas.subject_copy.SubjectCopier.copy_id`, under the record
   topic's subject when it holds the id) and added to :attr:`IdTranslator.new_ids`, which the driver stores.
4. **An id the source registry does not know**: with ``airmirror.schema.unknown = fail``,
   :class:`~airmirror.errors.UnknownSchemaId` naming topic, partition, offset, side and id: the chunk is aborted, so
   nothing of it is written; with ``pass`` the record is copied unchanged and counted (:meth:`IdTranslator.rewrite`
   says so).  A registry that is down fails the task (:mod:`airmirror.schemas.registry_client`), before its chunk
   commits.
5. Whatever is rewritten, offsets and exactly-once are those of the copy: the rewrite is a pure function of the
   record and the id map, so a retried chunk writes the same bytes.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from airmirror.config.schema_registries import RegistryAccess, SchemaIds
from airmirror.errors import UnknownSchemaId
from airmirror.schemas.framing import HEADERS, Side, framed_id, with_id
from airmirror.schemas.registry_client import RegistryClient
from airmirror.schemas.subject_copy import SubjectCopier, SubjectNames

Headers = dict[str, str | bytes | None] | list[tuple[str, str | bytes | None]] | None
"""A record's headers as confluent-kafka types them; a consumer returns a list (or ``None``), rewritten as a list."""


@dataclass(frozen=True)
class RecordIds:
    """What a copy task needs to handle schema ids: plain data, so it pickles to Spark executors.  ``ids`` is the
    stored id map when the job was planned, ``framed`` the framed sides per source topic (rule 1), ``unknown`` the
    ``airmirror.schema.unknown`` policy.  The registries' settings hold credentials and stay out of the repr."""

    mode: SchemaIds
    unknown: str
    ids: Mapping[int, int] = field(repr=False)
    framed: Mapping[str, frozenset[Side]] = field(repr=False)
    names: SubjectNames = field(repr=False)
    source: RegistryAccess = field(repr=False)
    target: RegistryAccess = field(repr=False)


def header_sides(headers: Headers) -> frozenset[Side]:
    """The sides whose schema a header names (rule 1): their payloads are not framed."""
    if not isinstance(headers, list):
        return frozenset()
    return frozenset(HEADERS[name] for name, data in headers if name in HEADERS and data is not None)


class IdTranslator:
    """One copy task's translation (rules 2-4); its registry clients are opened on first need and closed by
    :meth:`close`."""

    def __init__(self, record_ids: RecordIds) -> None:
        self.record_ids = record_ids
        self.ids: dict[int, int] = dict(record_ids.ids)
        self.new_ids: dict[int, int] = {}
        """Ids this task mapped itself (rule 3), source -> target."""
        self.unknown: set[int] = set()
        self._copier: SubjectCopier | None = None

    def framed(self, topic: str) -> frozenset[Side]:
        """The framed sides of ``topic`` (empty: its records are copied untouched)."""
        return self.record_ids.framed.get(topic, frozenset())

    def rewrite(
        self, topic: str, partition: int, offset: int, key: bytes | None, value: bytes | None, headers: Headers
    ) -> tuple[bytes | None, bytes | None, Headers, bool]:
        """The record to write for source record ``topic``/``partition``@``offset`` of a framed topic, and whether it
        was passed through unchanged with an unknown id (rule 4)."""
        sides = self.framed(topic) - header_sides(headers)
        passed = False
        if Side.KEY in sides:
            key, unknown = self._payload(topic, partition, offset, Side.KEY, key)
            passed = passed or unknown
        if Side.VALUE in sides:
            value, unknown = self._payload(topic, partition, offset, Side.VALUE, value)
            passed = passed or unknown
        if isinstance(headers, list) and any(name in HEADERS for name, _ in headers):
            rewritten: list[tuple[str, str | bytes | None]] = []
            for name, data in headers:
                side = HEADERS.get(name)
                if side is not None and isinstance(data, bytes):
                    data, unknown = self._payload(topic, partition, offset, side, data)
                    passed = passed or unknown
                rewritten.append((name, data))
            headers = rewritten
        return key, value, headers, passed

    def _payload(
        self, topic: str, partition: int, offset: int, side: Side, data: bytes | None
    ) -> tuple[bytes | None, bool]:
        source_id = framed_id(data)
        if source_id is None or data is None:
            return data, False
        target_id = self.ids.get(source_id)
        if target_id is None:
            target_id = self._copy(topic, side, source_id)
        if target_id is None:
            if self.record_ids.unknown == "fail":
                raise UnknownSchemaId(
                    f"{topic}-{partition}@{offset}: the {side.value} names schema id {source_id}, which the schema "
                    f"registry of cluster {self.record_ids.source.alias!r} does not know (airmirror.schema.unknown "
                    "= fail); nothing of this chunk was written. Register the schema, or set airmirror.schema.unknown "
                    "= pass to copy such records unchanged"
                )
            return data, True
        return (data if target_id == source_id else with_id(data, target_id)), False

    def _copy(self, topic: str, side: Side, source_id: int) -> int | None:
        """Rule 3; ``None`` for an id the source does not know (remembered, so it is asked once)."""
        if source_id in self.unknown:
            return None
        if self._copier is None:
            record_ids = self.record_ids
            self._copier = SubjectCopier(
                RegistryClient(record_ids.source), RegistryClient(record_ids.target), record_ids.mode, record_ids.names
            )
        target_id = self._copier.copy_id(source_id, f"{topic}-{side.value}")
        if target_id is None:
            self.unknown.add(source_id)
            return None
        self.ids[source_id] = self.new_ids[source_id] = target_id
        return target_id

    def close(self) -> None:
        if self._copier is not None:
            self._copier.source.close()
            self._copier.target.close()
