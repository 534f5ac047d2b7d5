"""The schema ids of copied records: rewritten per record in the copy job (``airmirror.schema.ids``).

Contract:

1. **Which records.**  Only the records of a topic that :attr:`RecordIds.framed` lists are read, and of them the ids
   :func:`~airmirror.schemas.framing.id_slots` finds: the frames of the sides it lists (those with a
   ``{topic}-key``/``{topic}-value`` subject on the source registry, both sides of a topic matching
   ``airmirror.schema.topics``), and schema-id headers.  A payload that is not framed (null, short, another first
   byte, or a side a header names) is copied as it is; every other record is copied as it is, untouched.
2. **translate**: a framed id is replaced by its target id, and so is the id form of a ``__key_schema_id`` /
   ``__value_schema_id`` header; nothing else changes (Protobuf message indexes, payload, other headers, their order).
   **keep**: nothing changes, but every id is checked to be on the target.
3. **An id not in the map** (a schema registered after the run's schema sync) is copied from the source registry to
   the target in the same run (:meth:`~airmirror.schemas.subject_copy.SubjectCopier.copy_id`, under the record
   topic's subject when it holds the id) and added to :attr:`IdTranslator.new_ids`, which the driver stores.
4. **An id the source registry does not know**: with ``airmirror.schema.unknown = fail``,
   :class:`~airmirror.errors.UnknownSchemaId` naming topic, partition, offset, side and id: the chunk is aborted, so
   nothing of it is written; with ``pass`` the record is copied unchanged and counted (:meth:`IdTranslator.rewriter`
   says so).  An unknown id is asked for again once :data:`UNKNOWN_ID_TTL_S` has passed (the topic-sync interval of
   a live run), so a schema registered late, or a registry node that had not seen it yet, is picked up within a
   stream.  A registry that is down fails the task (:mod:`airmirror.schemas.registry_client`), before its chunk
   commits.
5. Whatever is rewritten, offsets and exactly-once are those of the copy: the rewrite is a pure function of the
   record and the id map, so a retried chunk writes the same bytes.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from airmirror.config.schema_registries import RegistryAccess, SchemaIds
from airmirror.errors import UnknownSchemaId
from airmirror.schemas.framing import FRAME_LENGTH, HEADERS, MAGIC_ID, IdSlot, Side, id_slots, with_ids
from airmirror.schemas.registry_client import RegistryClient
from airmirror.schemas.subject_copy import SubjectCopier, SubjectNames

Headers = dict[str, str | bytes | None] | list[tuple[str, str | bytes | None]] | None
"""A record's headers as confluent-kafka types them; a consumer returns a list (or ``None``), rewritten as a list."""
Rewrite = Callable[[int, bytes | None, bytes | None, Headers], tuple[bytes | None, bytes | None, Headers, bool]]
"""One source partition's rewrite (:meth:`IdTranslator.rewriter`): offset, key, value, headers in; key, value,
headers to write and whether the record passed with an unknown id out."""
UNKNOWN_ID_TTL_S = 10.0
"""How long an id the source registry did not know is taken as unknown before it is asked for again (rule 4): a live
run's topic-sync interval (:data:`airmirror.replication.continuous.TOPIC_SYNC_INTERVAL_S`)."""


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


_MISS = object()


class IdTranslator:
    """One copy task's translation (rules 2-4); its registry clients are opened on first need and closed by
    :meth:`close`."""

    def __init__(self, record_ids: RecordIds) -> None:
        self.record_ids = record_ids
        self.ids: dict[int, int] = dict(record_ids.ids)
        self.new_ids: dict[int, int] = {}
        """Ids this task mapped itself (rule 3), source -> target."""
        self.unknown: dict[int, float] = {}
        """Ids the source registry did not know, and when it said so (``time.monotonic()``; rule 4)."""
        self._copier: SubjectCopier | None = None
        self._frames: dict[bytes, bytes] = {}
        """Source frame (magic byte and id) -> the frame to write instead, empty when the id maps to itself."""

    def framed(self, topic: str) -> frozenset[Side]:
        """The framed sides of ``topic`` (empty: its records are copied untouched)."""
        return self.record_ids.framed.get(topic, frozenset())

    def rewriter(self, topic: str, partition: int) -> Rewrite:
        """The rewrite of source partition ``topic``/``partition``'s records (a framed topic): called with a record's
        offset, key, value and headers, it returns the record to write and whether it was passed through unchanged
        with an unknown id (rule 4).

        A record without a schema-id header, whose ids are all in the map, takes a short way: its ids are only the
        frames of its topic's framed sides (:func:`~airmirror.schemas.framing.id_slots` without headers), and each
        is swapped for a frame cached per source frame, the topic's sides looked up once per call of this method.
        Every other record takes :func:`~airmirror.schemas.framing.id_slots` itself.  A unit test holds both ways
        equal."""
        framed = self.framed(topic)
        key_framed, value_framed = Side.KEY in framed, Side.VALUE in framed
        frames, slots = self._frames, self._rewrite_slots

        def reframed(data: bytes | None) -> bytes | object | None:
            """``data`` naming its mapped id (itself when not framed or mapped to the same id); :data:`_MISS` when
            its id is not in the map yet (the general way maps it, or fails or passes it)."""
            if data is None:
                return data
            frame = frames.get(data[:FRAME_LENGTH])
            if frame is None:
                if len(data) < FRAME_LENGTH or data[0] != MAGIC_ID:
                    return data
                frame = self._frame(data[:FRAME_LENGTH])
                if frame is None:
                    return _MISS
            return frame + data[FRAME_LENGTH:] if frame else data

        def rewrite(
            offset: int, key: bytes | None, value: bytes | None, headers: Headers
        ) -> tuple[bytes | None, bytes | None, Headers, bool]:
            if headers is None or (isinstance(headers, list) and not any(name in HEADERS for name, _ in headers)):
                new_key = reframed(key) if key_framed else key
                new_value = reframed(value) if value_framed else value
                if new_key is not _MISS and new_value is not _MISS:
                    return new_key, new_value, headers, False  # type: ignore[return-value]
            return slots(topic, partition, offset, key, value, headers)

        return rewrite

    def _frame(self, source: bytes) -> bytes | None:
        """The frame to write for framed prefix ``source`` (empty when its id maps to itself), cached; ``None`` when
        its id is not in the map."""
        target_id = self.ids.get(int.from_bytes(source[1:], "big"))
        if target_id is None:
            return None
        target = bytes([MAGIC_ID]) + target_id.to_bytes(4, "big")
        frame = self._frames[source] = b"" if target == source else target
        return frame

    def _rewrite_slots(
        self, topic: str, partition: int, offset: int, key: bytes | None, value: bytes | None, headers: Headers
    ) -> tuple[bytes | None, bytes | None, Headers, bool]:
        listed = headers if isinstance(headers, list) else None
        slots = id_slots(self.framed(topic), key, value, listed)
        if not slots:
            return key, value, headers, False
        replaced: dict[IdSlot, int] = {}
        passed = False
        for slot in slots:
            target_id = self._target_id(topic, partition, offset, slot, listed)
            if target_id is None:
                passed = True
            elif target_id != slot.schema_id:
                replaced[slot] = target_id
        if not replaced:
            return key, value, headers, passed
        key, value, rewritten = with_ids(key, value, listed, replaced)
        return key, value, rewritten, passed

    def _target_id(self, topic: str, partition: int, offset: int, slot: IdSlot, headers: Headers) -> int | None:
        """The target id of ``slot``'s id (rule 3), ``None`` for an unknown id under ``pass`` (rule 4)."""
        source_id = slot.schema_id
        target_id = self.ids.get(source_id)
        if target_id is None:
            target_id = self._copy(topic, slot.side, source_id)
        if target_id is None and self.record_ids.unknown == "fail":
            where = slot.side.value
            if slot.header >= 0 and isinstance(headers, list):
                where = f"header {headers[slot.header][0]}"
            raise UnknownSchemaId(
                f"{topic}-{partition}@{offset}: the {where} names schema id {source_id}, which the schema "
                f"registry of cluster {self.record_ids.source.alias!r} does not know (airmirror.schema.unknown "
                "= fail); nothing of this chunk was written. Register the schema, or set airmirror.schema.unknown "
                "= pass to copy such records unchanged"
            )
        return target_id

    def _copy(self, topic: str, side: Side, source_id: int) -> int | None:
        """Rule 3; ``None`` for an id the source does not know (remembered for :data:`UNKNOWN_ID_TTL_S`, rule 4)."""
        told = self.unknown.get(source_id)
        if told is not None and time.monotonic() - told < UNKNOWN_ID_TTL_S:
            return None
        if self._copier is None:
            record_ids = self.record_ids
            self._copier = SubjectCopier(
                RegistryClient(record_ids.source), RegistryClient(record_ids.target), record_ids.mode, record_ids.names
            )
        target_id = self._copier.copy_id(source_id, f"{topic}-{side.value}")
        if target_id is None:
            self.unknown[source_id] = time.monotonic()
            return None
        self.unknown.pop(source_id, None)
        self.ids[source_id] = self.new_ids[source_id] = target_id
        return target_id

    def close(self) -> None:
        if self._copier is not None:
            self._copier.source.close()
            self._copier.target.close()
