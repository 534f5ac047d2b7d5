"""The schema ids of copied records: rewritten per record in the copy job (``airmirror.schema.ids``).

Contract:

1. **Which records.**  Only the records of a topic that :attr:`RecordIds.framed` lists are read, and of them the ids
   :func:`~airmirror.schemas.framing.id_slots` finds: the frames of the sides it lists (those with a
   ``{topic}-key``/``{topic}-value`` subject on the source registry, both sides of a topic matching
   ``airmirror.schema.topics``), and schema-id headers.  A task asks the source registry for its subjects again once
   :data:`UNKNOWN_ID_TTL_S` has passed since the list it holds was read, so a topic that gets its first subject while a
   live stream copies it is framed from then on (:meth:`IdTranslator.framed`); should the registry not answer within
   :data:`REFRESH_WAIT_S`, the task goes on with the list it holds.  A payload that is not framed (null, short, another
   first byte, or a side a header names) is copied as it is; every other record is copied as it is, untouched.
2. **translate**: a framed id is replaced by its target id (but on a side a field transform wrote in Avro with a
   derived schema, whose id is the target's already: :mod:`airmirror.schemas.avro_fields` rule 4), and so is the id form
   of a ``__key_schema_id`` / ``__value_schema_id`` header; nothing else changes (Protobuf message indexes, payload,
   other headers, their order). **keep**: nothing changes, but every id is checked to be on the target.  A header in the
   GUID form names its schema by content: it is found on the source registry (``/schemas/guids``), its schema copied
   like an id, and the header rewritten to the target's GUID of it; where either registry has no GUIDs (Apicurio 3.3),
   the record is handled as one with an unknown id (rule 4), never copied naming a schema the target registry cannot
   serve.
3. **An id not in the map** (a schema registered after the run's schema sync) is copied from the source registry to the
   target in the same run (:meth:`~airmirror.schemas.subject_copy.SubjectCopier.copy_id`, under the record topic's
   subject when it holds the id) and added to :attr:`IdTranslator.new_ids`, which the driver stores.
4. **An id the source registry does not know**: with ``airmirror.schema.unknown = fail``,
   :class:`~airmirror.errors.UnknownSchemaId` naming topic, partition, offset, side and id: the chunk is aborted, so
   nothing of it is written; with ``pass`` the record is copied unchanged and counted (:meth:`IdTranslator.rewriter`
   says so).  So is an id whose schema the target registry refuses (:class:`~airmirror.errors.SchemaRefused`,
   :mod:`airmirror.schemas.subject_copy` rule 9), whose error names the record as well.  An unknown id is asked for
   again once :data:`UNKNOWN_ID_TTL_S` has passed (the topic-sync interval of a live run), so a schema registered late,
   or a registry node that had not seen it yet, is picked up within a stream.  A registry that is down fails the task
   (:mod:`airmirror.schemas.registry_client`), before its chunk commits.
5. Whatever is rewritten, offsets and exactly-once are those of the copy: the rewrite is a pure function of the record
   and the id map, so a retried chunk writes the same bytes.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass, field

from airmirror.config.schema_registries import RegistryAccess, SchemaIds
from airmirror.errors import ReplicationFailure, SchemaRefused, UnknownSchemaId
from airmirror.schemas.framing import (
    FRAME_LENGTH,
    HEADERS,
    MAGIC_ID,
    NO_SIDES,
    GuidSlot,
    IdSlot,
    Side,
    guid_slots,
    id_slots,
    with_guid,
    with_ids,
)
from airmirror.schemas.registry_client import RegistryClient
from airmirror.schemas.subject_copy import SubjectCopier, SubjectNames, topic_of

Headers = dict[str, str | bytes | None] | list[tuple[str, str | bytes | None]] | None
"""A record's headers as confluent-kafka types them; a consumer returns a list (or ``None``), rewritten as a list."""
Rewrite = Callable[
    [int, bytes | None, bytes | None, Headers, frozenset[Side]], tuple[bytes | None, bytes | None, Headers, bool]
]
"""One source partition's rewrite (:meth:`IdTranslator.rewriter`): offset, key, value, headers and the sides left as
they are in; key, value, headers to write and whether the record passed with an unknown id out."""
SETTLED = (NO_SIDES, frozenset({Side.KEY}), frozenset({Side.VALUE}), frozenset(Side))
"""Every set of sides a rewrite may be told to leave (rule 2)."""
UNKNOWN_ID_TTL_S = 10.0
"""How long an id the source registry did not know is taken as unknown before it is asked for again (rule 4): a live
run's topic-sync interval (:data:`airmirror.replication.continuous.TOPIC_SYNC_INTERVAL_S`); also how old a task's
list of the source's subjects gets before it is read again (rule 1)."""
REFRESH_WAIT_S = 2.0
"""How long a task waits for the source registry's subjects when it reads them again (rule 1)."""


def subject_sides(subjects: Iterable[str], topics: Collection[str]) -> dict[str, set[Side]]:
    """The sides of each of ``topics`` that a ``{topic}-key``/``{topic}-value`` subject of ``subjects`` frames."""
    framed: dict[str, set[Side]] = {}
    for subject in subjects:
        named = topic_of(subject)
        if named is not None and named[0] in topics:
            framed.setdefault(named[0], set()).add(named[1])
    return framed


@dataclass(frozen=True)
class RecordIds:
    """What a copy task needs to handle schema ids: plain data, so it pickles to Spark executors.  ``ids`` is the
    stored id map when the job was planned, ``framed`` the framed sides per source topic (rule 1) as read at
    ``framed_at`` (``time.time()``), ``unknown`` the ``airmirror.schema.unknown`` policy, ``derived`` the sides per
    source topic whose records the flow's chain writes with derived schemas (never framed here:
    :mod:`airmirror.schemas.avro_fields` rule 5).  The registries' settings hold credentials and stay out of the
    repr."""

    mode: SchemaIds
    unknown: str
    ids: Mapping[int, int] = field(repr=False)
    framed: Mapping[str, frozenset[Side]] = field(repr=False)
    names: SubjectNames = field(repr=False)
    source: RegistryAccess = field(repr=False)
    target: RegistryAccess = field(repr=False)
    framed_at: float = field(default_factory=time.time)
    derived: Mapping[str, frozenset[Side]] = field(default_factory=dict, repr=False)


_MISS = object()


class IdTranslator:
    """One copy task's translation (rules 2-4); its registry clients are opened on first need and closed by
    :meth:`close`."""

    def __init__(self, record_ids: RecordIds) -> None:
        self.record_ids = record_ids
        self.ids: dict[int, int] = dict(record_ids.ids)
        self.new_ids: dict[int, int] = {}
        """Ids this task mapped itself (rule 3), source -> target."""
        self.unknown: dict[int | str, float] = {}
        """Ids and GUIDs that could not be mapped (rule 4), and when that was found (``time.monotonic()``)."""
        self._guids: dict[str, str] = {}
        """Source GUID -> target GUID (rule 2)."""
        self._framed = dict(record_ids.framed)
        self._framed_at = record_ids.framed_at
        self._copier: SubjectCopier | None = None
        self._frames: dict[bytes, bytes] = {}
        """Source frame (magic byte and id) -> the frame to write instead, empty when the id maps to itself."""

    def framed(self, topic: str) -> frozenset[Side]:
        """The framed sides of ``topic`` (empty: its records are copied untouched), the source's subjects read
        again once :data:`UNKNOWN_ID_TTL_S` has passed (rule 1)."""
        if time.time() - self._framed_at >= UNKNOWN_ID_TTL_S:
            self._framed_at = time.time()
            try:
                subjects = self._registries().source.subjects(wait_s=REFRESH_WAIT_S)
            except ReplicationFailure:
                subjects = []  # the registry is slow or down: the list held stands, read again later
            derived = self.record_ids.derived
            for named, sides in subject_sides(subjects, self.record_ids.names.remote_topics).items():
                self._framed[named] = (self._framed.get(named, frozenset()) | sides) - derived.get(named, frozenset())
        return self._framed.get(topic, frozenset())

    def rewriter(self, topic: str, partition: int) -> Rewrite:
        """The rewrite of source partition ``topic``/``partition``'s records (a framed topic): called with a record's
        offset, key, value and headers, and the sides to leave as they are (rule 2), it returns the record to write and
        whether it was passed through unchanged with an unknown id (rule 4).

        A record without a schema-id header, whose ids are all in the map, takes a short way: its ids are only the
        frames of its topic's framed sides (:func:`~airmirror.schemas.framing.id_slots` without headers), and each
        is swapped for a frame cached per source frame, the topic's sides looked up once per call of this method.
        Every other record takes :func:`~airmirror.schemas.framing.id_slots` itself.  A unit test holds both ways
        equal."""
        framed = self.framed(topic)
        key_framed, value_framed = Side.KEY in framed, Side.VALUE in framed
        frames, slots = self._frames, self._rewrite_slots
        unsettled = {settled: framed - settled for settled in SETTLED}

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
            offset: int, key: bytes | None, value: bytes | None, headers: Headers, settled: frozenset[Side] = NO_SIDES
        ) -> tuple[bytes | None, bytes | None, Headers, bool]:
            if headers is None or (isinstance(headers, list) and not any(name in HEADERS for name, _ in headers)):
                new_key = reframed(key) if key_framed and Side.KEY not in settled else key
                new_value = reframed(value) if value_framed and Side.VALUE not in settled else value
                if new_key is not _MISS and new_value is not _MISS:
                    return new_key, new_value, headers, False  # type: ignore[return-value]
            return slots(topic, partition, offset, key, value, headers, unsettled[settled])

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
        self,
        topic: str,
        partition: int,
        offset: int,
        key: bytes | None,
        value: bytes | None,
        headers: Headers,
        framed: frozenset[Side],
    ) -> tuple[bytes | None, bytes | None, Headers, bool]:
        listed = headers if isinstance(headers, list) else None
        slots = id_slots(framed, key, value, listed)
        guids = guid_slots(listed)
        if not slots and not guids:
            return key, value, headers, False
        replaced: dict[IdSlot, int] = {}
        passed = False
        for slot in slots:
            target_id = self._target_id(topic, partition, offset, slot, listed)
            if target_id is None:
                passed = True
            elif target_id != slot.schema_id:
                replaced[slot] = target_id
        renamed: dict[int, str] = {}
        for guid_slot in guids:
            target_guid = self._target_guid(topic, partition, offset, guid_slot, listed)
            if target_guid is None:
                passed = True
            elif target_guid != guid_slot.guid:
                renamed[guid_slot.header] = target_guid
        if not replaced and not renamed:
            return key, value, headers, passed
        key, value, rewritten = with_ids(key, value, listed, replaced)
        for index, target_guid in renamed.items():
            if rewritten is not None:
                name, data = rewritten[index]
                rewritten[index] = (name, with_guid(data, target_guid) if isinstance(data, bytes) else data)
        return key, value, rewritten, passed

    def _target_id(self, topic: str, partition: int, offset: int, slot: IdSlot, headers: Headers) -> int | None:
        """The target id of ``slot``'s id (rule 3), ``None`` for an unknown id under ``pass`` (rule 4)."""
        source_id = slot.schema_id
        target_id = self.ids.get(source_id)
        if target_id is not None:
            return target_id
        where = f"{topic}-{partition}@{offset}: the {slot.side.value}"
        if slot.header >= 0 and isinstance(headers, list):
            where = f"{topic}-{partition}@{offset}: the header {headers[slot.header][0]}"
        target_id = self._copy(topic, slot.side, source_id, f"{where} names schema id {source_id}")
        if target_id is None and self.record_ids.unknown == "fail":
            raise UnknownSchemaId(
                f"{where} names schema id {source_id}, which the schema registry of cluster "
                f"{self.record_ids.source.alias!r} does not know (airmirror.schema.unknown = fail); nothing of this "
                "chunk was written. Register the schema, or set airmirror.schema.unknown = pass to copy such records "
                "unchanged"
            )
        return target_id

    def _target_guid(self, topic: str, partition: int, offset: int, slot: GuidSlot, headers: Headers) -> str | None:
        """The target GUID of ``slot``'s GUID (rule 2), ``None`` under ``pass`` when there is none (rule 4)."""
        if slot.guid in self._guids:
            return self._guids[slot.guid]
        name = headers[slot.header][0] if isinstance(headers, list) else slot.side.header
        where = f"{topic}-{partition}@{offset}: the header {name} names schema GUID {slot.guid}"
        target_guid, why = None, "was not found again yet"
        told = self.unknown.get(slot.guid)
        if told is None or time.monotonic() - told >= UNKNOWN_ID_TTL_S:
            registries = self._registries()
            source_id = registries.source.guid_schema_id(slot.guid)
            target_id = None if source_id is None else self.ids.get(source_id)
            if source_id is not None and target_id is None:
                target_id = self._copy(topic, slot.side, source_id, where)
            target_guid = None if target_id is None else registries.target.guid(target_id)
            why = (
                f"which the schema registry of cluster {self.record_ids.source.alias!r} does not know (or it has no "
                "GUIDs)"
                if source_id is None
                else f"whose schema the schema registry of cluster {self.record_ids.target.alias!r} names by no GUID"
            )
            if target_guid is None:
                self.unknown[slot.guid] = time.monotonic()
        if target_guid is None:
            if self.record_ids.unknown == "fail":
                raise UnknownSchemaId(
                    f"{where}, {why} (airmirror.schema.unknown = fail); nothing of this chunk was written. Set "
                    "airmirror.schema.unknown = pass to copy such records unchanged (they are counted)"
                )
            return None
        self.unknown.pop(slot.guid, None)
        self._guids[slot.guid] = target_guid
        return target_guid

    def _copy(self, topic: str, side: Side, source_id: int, where: str) -> int | None:
        """Rule 3; ``None`` for an id the source does not know, or (under ``pass``) whose schema the target refuses
        (remembered for :data:`UNKNOWN_ID_TTL_S`, rule 4).  ``where`` names the record, for a refusal's error."""
        told = self.unknown.get(source_id)
        if told is not None and time.monotonic() - told < UNKNOWN_ID_TTL_S:
            return None
        try:
            target_id = self._registries().copy_id(source_id, f"{topic}-{side.value}")
        except SchemaRefused as refused:
            if self.record_ids.unknown == "fail":
                raise SchemaRefused(
                    f"{where}: {refused} (airmirror.schema.unknown = fail); nothing of this chunk was written"
                ) from refused
            target_id = None
        if target_id is None:
            self.unknown[source_id] = time.monotonic()
            return None
        self.unknown.pop(source_id, None)
        self.ids[source_id] = self.new_ids[source_id] = target_id
        return target_id

    def _registries(self) -> SubjectCopier:
        """The task's copier, and through it its registry clients, opened on first need."""
        if self._copier is None:
            record_ids = self.record_ids
            self._copier = SubjectCopier(
                RegistryClient(record_ids.source), RegistryClient(record_ids.target), record_ids.mode, record_ids.names
            )
        return self._copier

    def close(self) -> None:
        if self._copier is not None:
            self._copier.source.close()
            self._copier.target.close()
