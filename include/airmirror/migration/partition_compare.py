"""Compare one source partition with its remote partition through its offset-sync runs (``airmirror verify``).
Pure logic: the records come in as iterators, so memory does not grow with the partition (or with a run).

Contract:
- An exact run says where every copied source offset landed: source ``o`` in run ``r``, not in one of its holes, is
  target ``r.downstream_start`` plus the copies of the run's offsets below ``o``
  (:meth:`~airmirror.model.OffsetRun.downstream_at_most`); a source record in a hole was not copied.  A folded run
  (:class:`~airmirror.model.OffsetRun`) only says that its ``records`` copies lie in order in its target range: its
  records are paired by order (:mod:`airmirror.migration.folded_alignment`, whose contract says which pair, which are
  left unpaired and where, and when a run's count falls short).  The records of both sides are walked in target
  order; a folded run is compared as one block at its first target offset.
- A source record at an offset no run covers was never copied: **missing** at that source offset.  A target
  record at an offset no run covers is no copy: **extra** at that target offset.
- A source record whose copy is not in the target, or a copy whose source record is gone, is a difference
  unless compaction of that side explains it: the side's topic is compacted and the absent record is a
  tombstone, or a record with the same key comes later on that side (the cleaner keeps only the newest record
  of a key).  Later records are looked for up to the end of what is compared, then in ``*_later_keys``
  (the keys each side holds beyond the compared range).  Explained absences are counted as compaction.  Inside
  a folded run, an absence is excused (by compaction or :class:`Lost`) only where the alignment says the side
  may lack the record.
- A source record and its copy that differ in key, value, headers (in order; no headers equals an empty list)
  or timestamp are **different** at the source offset.
- Records deleted from the start of one side only (a :class:`Lost` range of source offsets, which the caller
  could not explain by that side's ``retention.ms``) are **missing** at their source offset, unless the side's
  ``retention.bytes`` explains them once the side has been read: :attr:`Lost.excused` is asked at the end, after
  every record has passed :meth:`Lost.weigh`.  A copy without its source record in a folded run is placed at
  the run's at-or-before source offset for that (:meth:`~airmirror.model.OffsetRun.upstream_at_most`).
- Schema ids (``airmirror.schema.ids = translate``, :class:`SchemaIdMap`): a source record is compared as the copy
  job writes it, its framed schema ids (key, value, ``__key_schema_id``/``__value_schema_id`` headers, found by
  :func:`~airmirror.schemas.framing.id_slots` as the copy job finds them) mapped through the flow's id map, and so
  are the keys compaction looks for.  A copy that differs from that only in schema ids, or holds an id the map does
  not map (copied unchanged), is **schema_id** at the source offset, the first of them named
  (:func:`describe_schema_id`): one wrong or missing mapping is told apart from changed data.  A copy that differs
  in anything else is **different**.
- Transforms (a flow's SMT chain, :mod:`airmirror.config.transforms`): a source record is compared as the copy job
  writes it, after the steps of its remote topic (:mod:`airmirror.replication.spark.record_transforms`), and before
  its schema ids are mapped, as the copy job does; a source record the chain drops, or cannot process (which the copy
  skipped under ``errors.tolerance = all``, or failed at and never passed), is **filtered**: counted, and neither
  compared nor a difference.
- The verdict is the first difference in target order; every difference is counted.
"""

from __future__ import annotations

import hashlib
import struct
from bisect import bisect_right
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field

from airmirror.migration.compared_record import Headers, Record, SchemaIdSlot
from airmirror.migration.folded_alignment import compare_folded_run
from airmirror.model import ComparisonFigures, OffsetRun, Verdict
from airmirror.replication.spark.record_transforms import RecordTransforms, TransformFailure
from airmirror.schemas.framing import HeaderValue, IdSlot, Side, framed_id, id_slots, slot_data, with_ids


@dataclass(frozen=True)
class SchemaIdMap:
    """A source topic's schema ids as the copy job translates them: ``ids`` the flow's id map (source id -> target
    id), ``sides`` the topic's framed sides (:attr:`~airmirror.schemas.record_ids.RecordIds.framed`, never empty).
    The ids a record names are found by :func:`~airmirror.schemas.framing.id_slots`, as the copy job finds them.
    Plain data, so it pickles to Spark executors."""

    ids: Mapping[int, int]
    sides: frozenset[Side]

    def expected(self, record: Record, settled: frozenset[Side] = frozenset()) -> Record:
        """``record`` as its copy should be: each framed id replaced by the id the map gives (kept when unmapped), but
        on the ``settled`` sides (written by a field transform with a target id already), every other byte as it is;
        the ids found in :attr:`Record.schema_ids`."""
        slots = id_slots(self.sides - settled if settled else self.sides, record.key, record.value, record.headers)
        if not slots:
            return record
        found = tuple(SchemaIdSlot(slot, self.ids.get(slot.schema_id)) for slot in slots)
        mapped = {s.slot: s.mapped_id for s in found if s.mapped_id is not None and s.mapped_id != s.source_id}
        key, value, headers = with_ids(record.key, record.value, record.headers, mapped)
        return Record(record.offset, key, value, _headers(headers), record.timestamp, found)

    def later_keys(self, keys: Callable[[], Iterator[bytes | None]]) -> Callable[[], Iterator[bytes | None]]:
        """``keys`` (source keys beyond the compared range) as their copies should be."""
        sides = self.sides & {Side.KEY}
        return lambda: (self._key(key, sides) for key in keys())

    def _key(self, key: bytes | None, sides: frozenset[Side]) -> bytes | None:
        mapped = {
            slot: self.ids[slot.schema_id] for slot in id_slots(sides, key, None, None) if slot.schema_id in self.ids
        }
        return with_ids(key, None, None, mapped)[0] if mapped else key


def _headers(headers: Sequence[tuple[str, HeaderValue]] | None) -> Headers:
    """Headers as a comparison holds them (values are bytes or ``None``, as a consumer returns them)."""
    return tuple(
        (name, data if isinstance(data, bytes) or data is None else data.encode()) for name, data in headers or ()
    )


def schema_id_mismatch(source: Record, target: Record) -> tuple[SchemaIdSlot, int] | None:
    """The first schema id that the copy ``target`` holds wrongly, with the id it holds, when ``target`` equals
    ``source`` (read through a :class:`SchemaIdMap`) but for such ids; ``None`` when there is none or the copy
    differs in anything else."""
    if len(target.headers) != len(source.headers):
        return None
    wrong: tuple[SchemaIdSlot, int] | None = None
    restored: dict[IdSlot, int] = {}
    for found in source.schema_ids:
        held_id = framed_id(slot_data(target.key, target.value, target.headers, found.slot))
        if held_id is None:
            return None
        if wrong is None and (found.mapped_id is None or held_id != found.mapped_id):
            wrong = found, held_id
        restored[found.slot] = found.source_id if found.mapped_id is None else found.mapped_id
    key, value, headers = with_ids(target.key, target.value, target.headers, restored)
    if (key, value, _headers(headers), target.timestamp) != source.content():
        return None
    return wrong


def describe_schema_id(source: Record, slot: SchemaIdSlot, held_id: int) -> str:
    """``source offset 7, value: source id 3 maps to 1004, the copy holds 1009`` (``is unmapped`` for an id the
    map does not give)."""
    mapped = "is unmapped" if slot.mapped_id is None else f"maps to {slot.mapped_id}"
    return (
        f"source offset {source.offset}, {slot.name(source.headers)}: source id {slot.source_id} {mapped}, "
        f"the copy holds {held_id}"
    )


#: The fewest bytes Kafka stores per record beside its key, value and headers (length, attributes, timestamp
#: and offset deltas, key and value lengths, header count: one varint byte each at least).
RECORD_OVERHEAD_BYTES = 7


@dataclass
class Lost:
    """Source offsets ``[start, end)`` whose records one side (``side``: ``"source"`` or ``"target"``) no longer
    holds, although the other side does, and which that side's ``retention.ms`` does not explain.

    Retention by size explains them when the side still holds at least ``retention_bytes`` (Kafka deletes a
    segment by size only while the rest of the log stays at or above ``retention.bytes``).  What the side holds
    is counted from the records read (:meth:`weigh`): key, value, headers and :data:`RECORD_OVERHEAD_BYTES` each,
    a lower bound of their size in the log, so a deletion is never excused by an overestimate.
    ``retention_bytes`` is ``-1`` when the topic has no size limit.  ``records`` and ``excused`` are set by
    :func:`compare_partition`.
    """

    side: str
    start: int
    end: int
    retention_bytes: int
    held_bytes: int = 0
    records: int = 0
    excused: bool = False

    def __contains__(self, offset: int | None) -> bool:
        return offset is not None and self.start <= offset < self.end

    def weigh(self, record: Record) -> None:
        """Add ``record``, read on this side, to what the side is known to hold."""
        headers = sum(len(name) + len(data or b"") for name, data in record.headers)
        self.held_bytes += len(record.key or b"") + len(record.value or b"") + headers + RECORD_OVERHEAD_BYTES

    def explained_by_size(self) -> bool:
        return self.retention_bytes >= 0 and self.held_bytes >= self.retention_bytes


class RunMap:
    """Source offset <-> target offset through a partition's runs (sorted, never overlapping): the run holding an
    offset on either side, and the exact mapping inside an exact run."""

    def __init__(self, runs: Sequence[OffsetRun]) -> None:
        self.runs = sorted(runs, key=lambda r: r.upstream_start)
        self._upstream = [r.upstream_start for r in self.runs]
        self._downstream = [r.downstream_start for r in self.runs]

    def upstream_run(self, offset: int) -> OffsetRun | None:
        """The run whose source offsets hold ``offset``: never an exact run with ``offset`` in one of its holes (the
        record there was not copied)."""
        index = bisect_right(self._upstream, offset) - 1
        run = self.runs[index] if index >= 0 and offset < self.runs[index].upstream_end else None
        return None if run is None or (run.exact and not run.copied(offset)) else run

    def downstream_run(self, offset: int) -> OffsetRun | None:
        """The run whose target offsets hold ``offset`` (up to its ``downstream_stop``)."""
        index = bisect_right(self._downstream, offset) - 1
        return self.runs[index] if index >= 0 and offset < self.runs[index].downstream_stop else None

    def to_target(self, offset: int) -> int | None:
        """The copy of source ``offset`` in an exact run (``None``: no run, or a folded one)."""
        run = self.upstream_run(offset)
        return None if run is None or not run.exact else run.downstream_at_most(offset)

    def to_source(self, offset: int) -> int | None:
        """The source offset of the copy at target ``offset`` in an exact run (``None``: no run, or a folded one)."""
        run = self.downstream_run(offset)
        return None if run is None or not run.exact else run.upstream_of_copy(offset - run.downstream_start)


@dataclass
class _Side:
    """One side's running state: its digest, and its absent records waiting for a later record of their key."""

    compacted: bool
    digest: hashlib._Hash = field(default_factory=hashlib.sha256)
    records: int = 0
    waiting: dict[bytes | None, list[tuple[int, int]]] = field(default_factory=dict)

    def seen(self, record: Record) -> list[tuple[int, int]]:
        """Count and digest ``record``; return the absences of its key it explains."""
        self.records += 1
        self.digest.update(canonical_bytes(record))
        return self.waiting.pop(record.key, []) if self.waiting else []


class _Differences:
    """Every difference with its place in target order; the first is the verdict."""

    def __init__(self, counts: Counter[str]) -> None:
        self.counts = counts
        self.first: tuple[int, Verdict, int] | None = None
        self.first_schema_id: tuple[int, str] | None = None

    def add(self, place: int, verdict: Verdict, offset: int) -> None:
        self.counts[verdict.value] += 1
        if self.first is None or place < self.first[0]:
            self.first = (place, verdict, offset)

    def schema_id(self, place: int, offset: int, described: str) -> None:
        """A copy whose schema id the id map does not explain, ``described``."""
        self.add(place, Verdict.SCHEMA_ID, offset)
        if self.first_schema_id is None or place < self.first_schema_id[0]:
            self.first_schema_id = (place, described)


class _Reader:
    """A side's records with the current one (``head``) and, on demand, the one after it."""

    def __init__(self, records: Iterable[Record]) -> None:
        self._records = iter(records)
        self.head = next(self._records, None)
        self._after: list[Record | None] = []

    def after(self) -> Record | None:
        if not self._after:
            self._after.append(next(self._records, None))
        return self._after[0]

    def advance(self) -> None:
        self.head = self._after.pop() if self._after else next(self._records, None)


class _Comparison:
    """The running state of one comparison: both sides, the differences, the absences that :class:`Lost` may
    excuse; one step per record (see the module contract)."""

    def __init__(self, runs: Sequence[OffsetRun], source: _Side, target: _Side, lost: Lost | None) -> None:
        self.mapping = RunMap(runs)
        self.counts: Counter[str] = Counter()
        self.differences = _Differences(self.counts)
        self.sources, self.targets = source, target
        self.lost = lost
        self.lost_absences: list[tuple[int, int]] = []

    @property
    def source_compacted(self) -> bool:
        return self.sources.compacted

    @property
    def target_compacted(self) -> bool:
        return self.targets.compacted

    def take_source(self, record: Record) -> None:
        self.counts["compacted_source"] += len(self.sources.seen(record))
        if self.lost is not None and self.lost.side == "source":
            self.lost.weigh(record)

    def take_target(self, record: Record) -> None:
        self.counts["compacted_target"] += len(self.targets.seen(record))
        if self.lost is not None and self.lost.side == "target":
            self.lost.weigh(record)

    def pair(self, source: Record, target: Record) -> None:
        if source.content() != target.content():
            wrong = schema_id_mismatch(source, target) if source.schema_ids else None
            if wrong is None:
                self.differences.add(target.offset, Verdict.DIFFERENT, source.offset)
            else:
                self.differences.schema_id(target.offset, source.offset, describe_schema_id(source, *wrong))
        elif source.schema_ids:
            unmapped = next((slot for slot in source.schema_ids if slot.mapped_id is None), None)
            if unmapped is not None:
                described = describe_schema_id(source, unmapped, unmapped.source_id)
                self.differences.schema_id(target.offset, source.offset, described)
        self.take_source(source)
        self.take_target(target)

    def not_in_target(self, record: Record, place: int, excusable: bool = True) -> None:
        """Source ``record`` has no copy in the target: lost there, compaction of the target, or missing (always,
        when not ``excusable``: the target holds a record at every place it may have)."""
        if not excusable:
            self.differences.add(place, Verdict.MISSING, record.offset)
        elif self.lost is not None and self.lost.side == "target" and record.offset in self.lost:
            self.lost_absences.append((place, record.offset))
        else:
            self._absent(self.targets, record, place, Verdict.MISSING, record.offset)
        self.take_source(record)

    def not_in_source(self, record: Record, original: int | None, excusable: bool = True) -> None:
        """Target ``record`` (a copy of source offset ``original``, or at or after it) has no source record:
        lost there, compaction of the source, or extra (always, when not ``excusable``: the source holds a record
        at every place its original may have)."""
        if not excusable:
            self.differences.add(record.offset, Verdict.EXTRA, record.offset)
        elif original is not None and self.lost is not None and self.lost.side == "source" and original in self.lost:
            self.lost_absences.append((record.offset, original))
        else:
            self._absent(self.sources, record, record.offset, Verdict.EXTRA, record.offset)
        self.take_target(record)

    def _absent(self, side: _Side, record: Record, place: int, verdict: Verdict, offset: int) -> None:
        """``record`` has no counterpart on ``side``: compaction of that side, or a difference."""
        if side.compacted and record.value is None:
            self.counts["compacted_target" if side is self.targets else "compacted_source"] += 1
        elif side.compacted:
            side.waiting.setdefault(record.key, []).append((place, offset))
        else:
            self.differences.add(place, verdict, offset)

    def walk(self, source: _Reader, target: _Reader) -> None:
        """Both sides in target order: exact runs offset by offset, a folded run as one block at its first
        target offset (:func:`~airmirror.migration.folded_alignment.compare_folded_run`)."""
        mapping = self.mapping
        while source.head is not None or target.head is not None:
            s, t = source.head, target.head
            s_run = mapping.upstream_run(s.offset) if s is not None else None
            t_run = mapping.downstream_run(t.offset) if t is not None else None
            if s is not None and s_run is None:
                self.differences.add(t.offset if t is not None else s.offset, Verdict.MISSING, s.offset)
                self.take_source(s)
                source.advance()
                continue
            if t is not None and t_run is None:
                self.differences.add(t.offset, Verdict.EXTRA, t.offset)
                self.take_target(t)
                target.advance()
                continue
            # here a side has a head exactly when it has a run (the heads without one were taken above)
            s_place = (
                None
                if s is None or s_run is None
                else (s_run.downstream_at_most(s.offset) if s_run.exact else s_run.downstream_start)
            )
            t_place = None if t is None or t_run is None else (t.offset if t_run.exact else t_run.downstream_start)
            if (
                s_run is not None
                and s_place is not None
                and not s_run.exact
                and (t_place is None or t_place >= s_place)
            ):
                compare_folded_run(s_run, source, target, self)
            elif (
                t_run is not None
                and t_place is not None
                and not t_run.exact
                and (s_place is None or s_place >= t_place)
            ):
                compare_folded_run(t_run, source, target, self)
            elif s is not None and t is not None and s_place is not None and s_place == t_place:
                self.pair(s, t)
                source.advance()
                target.advance()
            elif s is not None and s_place is not None and (t_place is None or s_place < t_place):
                self.not_in_target(s, s_place)
                source.advance()
            else:
                assert t is not None, "a target head without a source head placed before it"
                self.not_in_source(t, mapping.to_source(t.offset))
                target.advance()

    def difference(self, place: int, verdict: Verdict, offset: int) -> None:
        self.differences.add(place, verdict, offset)

    def difference_count(self) -> int:
        compared = (Verdict.MISSING, Verdict.EXTRA, Verdict.DIFFERENT, Verdict.SCHEMA_ID)
        return sum(self.counts[verdict.value] for verdict in compared) + sum(
            len(entries) for side in (self.sources, self.targets) for entries in side.waiting.values()
        )


def compare_partition(
    runs: Sequence[OffsetRun],
    source: Iterable[Record],
    target: Iterable[Record],
    *,
    source_compacted: bool,
    target_compacted: bool,
    source_later_keys: Callable[[], Iterator[bytes | None]] = lambda: iter(()),
    target_later_keys: Callable[[], Iterator[bytes | None]] = lambda: iter(()),
    lost: Lost | None = None,
    schema_ids: SchemaIdMap | None = None,
    transforms: RecordTransforms | None = None,
) -> ComparisonFigures:
    """Compare ``source`` with ``target`` (each in offset order) per the module contract; ``lost``, when given,
    is updated with how many of its records were read and whether retention by size excuses them; with
    ``transforms`` (the steps of the source partition's remote partition) and ``schema_ids``, source records (and, for
    ids, keys) are read through them."""
    filtered = [0]
    if transforms is not None:
        source = transformed_records(source, transforms, filtered, schema_ids)
    elif schema_ids is not None:
        source = map(schema_ids.expected, source)
    if schema_ids is not None:
        source_later_keys = schema_ids.later_keys(source_later_keys)
    sources, targets = _Side(source_compacted), _Side(target_compacted)
    comparison = _Comparison(runs, sources, targets, lost)
    comparison.walk(_Reader(source), _Reader(target))
    counts, differences = comparison.counts, comparison.differences
    if lost is not None:
        lost.records, lost.excused = len(comparison.lost_absences), lost.explained_by_size()
        for place, offset in comparison.lost_absences if not lost.excused else ():
            differences.add(place, Verdict.MISSING, offset)
    counts["compacted_source"] += _explained_later(sources, source_later_keys)
    counts["compacted_target"] += _explained_later(targets, target_later_keys)
    for verdict, side in ((Verdict.MISSING, targets), (Verdict.EXTRA, sources)):
        for place, offset in (entry for entries in side.waiting.values() for entry in entries):
            differences.add(place, verdict, offset)
    _, verdict, first_offset = differences.first if differences.first is not None else (0, Verdict.EQUAL, None)
    return ComparisonFigures(
        verdict=verdict,
        first_offset=first_offset,
        source_records=sources.records,
        target_records=targets.records,
        source_digest=sources.digest.hexdigest(),
        target_digest=targets.digest.hexdigest(),
        schema_id_difference="" if differences.first_schema_id is None else differences.first_schema_id[1],
        filtered=filtered[0],
        **counts,
    )


def transformed_records(
    records: Iterable[Record],
    transforms: RecordTransforms,
    filtered: list[int] | None = None,
    schema_ids: SchemaIdMap | None = None,
) -> Iterator[Record]:
    """The source records as a flow's transforms leave them (a record they cannot process counts as dropped, as
    a copy that skipped it), then, with ``schema_ids``, as the copy maps their ids (never on a side the transforms
    wrote in Avro with a target id); ``filtered[0]``, when given, counts those they drop."""
    for record in records:
        try:
            kept = transforms.apply(record.key, record.value, record.headers, record.timestamp)
        except TransformFailure:
            kept = None  # the copy skipped it (errors.tolerance = all), or failed there and never passed it
        if kept is None:
            if filtered is not None:
                filtered[0] += 1
            continue
        key, value, headers = kept
        copied = Record(record.offset, key, value, _headers(headers), record.timestamp)
        yield copied if schema_ids is None else schema_ids.expected(copied, transforms.settled)


def _explained_later(side: _Side, later_keys: Callable[[], Iterator[bytes | None]]) -> int:
    """How many of ``side``'s waiting absences a key beyond the compared range explains (read only if any wait)."""
    explained = 0
    if side.waiting:
        for key in later_keys():
            explained += len(side.waiting.pop(key, []))
            if not side.waiting:
                break
    return explained


_FIXED = struct.Struct(">qiii")


def canonical_bytes(record: Record) -> bytes:
    """The bytes a digest takes of a record: the timestamp, the key's and the value's lengths (-1 for null) and
    the header count, then the key, the value and each header (name and value, length-prefixed) in order."""
    key, value, headers, timestamp = record.content()
    fixed = _FIXED.pack(timestamp, -1 if key is None else len(key), -1 if value is None else len(value), len(headers))
    if not headers:
        return b"".join((fixed, key or b"", value or b""))
    return b"".join(
        [fixed, key or b"", value or b"", *(_field(name.encode("utf-8")) + _field(data) for name, data in headers)]
    )


def _field(data: bytes | None) -> bytes:
    return struct.pack(">i", -1) if data is None else struct.pack(">i", len(data)) + data


def verdict_reason(figures: ComparisonFigures, lost: Lost | None = None) -> str:
    """Why a compared partition is not equal, in words (empty when it is)."""
    offset = figures.first_offset
    if figures.verdict is Verdict.MISSING and lost is not None and offset in lost:
        other = "target" if lost.side == "source" else "source"
        return (
            f"source offset {offset} and {lost.records - 1} more were deleted from the {lost.side} while the "
            f"{other} holds them, "
            f"before the {lost.side}'s retention.ms or retention.bytes could have deleted them"
        )
    reasons = {
        Verdict.MISSING: f"source offset {offset} is not in the target",
        Verdict.EXTRA: f"target offset {offset} is no copy of a source record",
        Verdict.DIFFERENT: f"the copy of source offset {offset} differs from it",
        Verdict.SCHEMA_ID: (
            f"the copy of source offset {offset} differs from it only in a schema id the id map does not explain "
            f"({figures.schema_id_difference})"
        ),
    }
    return reasons.get(figures.verdict, "")
