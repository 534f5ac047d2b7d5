"""Compare one source partition with its remote partition through the exact offset-sync runs (``airmirror
verify``).  Pure logic: the records come in as iterators, so memory does not grow with the partition.

Contract:
- The runs say where every copied source offset landed: source ``o`` in run ``r`` is target
  ``o - r.upstream_start + r.downstream_start``.  The records of both sides are walked in target order.
- A source record at an offset no run covers was never copied: **missing** at that source offset.  A target
  record at an offset no run covers is no copy: **extra** at that target offset.
- A source record whose copy is not in the target, or a copy whose source record is gone, is a difference
  unless compaction of that side explains it: the side's topic is compacted and the absent record is a
  tombstone, or a record with the same key comes later on that side (the cleaner keeps only the newest record
  of a key).  Later records are looked for up to the end of what is compared, then in ``*_later_keys``
  (the keys each side holds beyond the compared range).  Explained absences are counted as compaction.
- A source record and its copy that differ in key, value, headers (in order; no headers equals an empty list)
  or timestamp are **different** at the source offset.
- Records deleted from the start of one side only (a :class:`Lost` range of source offsets, which the caller
  could not explain by that side's ``retention.ms``) are **missing** at their source offset, unless the side's
  ``retention.bytes`` explains them once the side has been read: :attr:`Lost.excused` is asked at the end, after
  every record has passed :meth:`Lost.weigh`.
- The verdict is the first difference in target order; every difference is counted.
"""

from __future__ import annotations

import hashlib
import struct
from bisect import bisect_right
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import NamedTuple

from airmirror.model import ComparisonFigures, OffsetRun, Verdict

Headers = tuple[tuple[str, bytes | None], ...]


class Record(NamedTuple):
    """What a comparison looks at of one record; ``headers`` is empty for a record without headers."""

    offset: int
    key: bytes | None
    value: bytes | None
    headers: Headers
    timestamp: int

    def content(self) -> tuple[bytes | None, bytes | None, Headers, int]:
        return self.key, self.value, self.headers, self.timestamp


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
    """Source offset <-> target offset through a partition's runs (sorted, never overlapping)."""

    def __init__(self, runs: Sequence[OffsetRun]) -> None:
        self.runs = sorted(runs, key=lambda r: r.upstream_start)
        self._upstream = [r.upstream_start for r in self.runs]
        self._downstream = [r.downstream_start for r in self.runs]

    def to_target(self, offset: int) -> int | None:
        index = bisect_right(self._upstream, offset) - 1
        if index < 0 or offset >= self.runs[index].upstream_end:
            return None
        run = self.runs[index]
        return offset - run.upstream_start + run.downstream_start

    def to_source(self, offset: int) -> int | None:
        index = bisect_right(self._downstream, offset) - 1
        if index < 0 or offset >= self.runs[index].downstream_start + self.runs[index].length:
            return None
        run = self.runs[index]
        return offset - run.downstream_start + run.upstream_start


@dataclass
class _Side:
    """One side's running state: its digest, and its absent records waiting for a later record of their key."""

    compacted: bool
    digest: "hashlib._Hash" = field(default_factory=hashlib.sha256)
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

    def add(self, place: int, verdict: Verdict, offset: int) -> None:
        self.counts[verdict.value] += 1
        if self.first is None or place < self.first[0]:
            self.first = (place, verdict, offset)


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
) -> ComparisonFigures:
    """Compare ``source`` with ``target`` (each in offset order) per the module contract; ``lost``, when given,
    is updated with how many of its records were read and whether retention by size excuses them."""
    mapping = RunMap(runs)
    counts: Counter[str] = Counter()
    differences = _Differences(counts)
    sources, targets = _Side(source_compacted), _Side(target_compacted)
    source_records, target_records = iter(source), iter(target)
    s, t = next(source_records, None), next(target_records, None)
    absences: list[tuple[int, int]] = []
    lost_on_source = lost is not None and lost.side == "source"
    lost_on_target = lost is not None and lost.side == "target"

    def take_source(record: Record) -> None:
        counts["compacted_source"] += len(sources.seen(record))
        if lost_on_source:
            lost.weigh(record)

    def take_target(record: Record) -> None:
        counts["compacted_target"] += len(targets.seen(record))
        if lost_on_target:
            lost.weigh(record)

    def absent(side: _Side, record: Record, place: int, verdict: Verdict, offset: int) -> None:
        """``record`` has no counterpart on ``side``: compaction of that side, or a difference."""
        if side.compacted and record.value is None:
            counts["compacted_target" if side is targets else "compacted_source"] += 1
        elif side.compacted:
            side.waiting.setdefault(record.key, []).append((place, offset))
        else:
            differences.add(place, verdict, offset)

    while s is not None or t is not None:
        mapped = mapping.to_target(s.offset) if s is not None else None
        if s is not None and mapped is None:
            differences.add(t.offset if t is not None else s.offset, Verdict.MISSING, s.offset)
            take_source(s)
            s = next(source_records, None)
        elif t is not None and mapping.to_source(t.offset) is None:
            differences.add(t.offset, Verdict.EXTRA, t.offset)
            take_target(t)
            t = next(target_records, None)
        elif s is not None and t is not None and mapped == t.offset:
            if s.content() != t.content():
                differences.add(t.offset, Verdict.DIFFERENT, s.offset)
            take_source(s)
            take_target(t)
            s, t = next(source_records, None), next(target_records, None)
        elif s is not None and (t is None or mapped < t.offset):
            if lost_on_target and s.offset in lost:
                absences.append((mapped, s.offset))
            else:
                absent(targets, s, mapped, Verdict.MISSING, s.offset)
            take_source(s)
            s = next(source_records, None)
        else:
            original = mapping.to_source(t.offset)
            if lost_on_source and original in lost:
                absences.append((t.offset, original))
            else:
                absent(sources, t, t.offset, Verdict.EXTRA, t.offset)
            take_target(t)
            t = next(target_records, None)

    if lost is not None:
        lost.records, lost.excused = len(absences), lost.explained_by_size()
        for place, offset in absences if not lost.excused else ():
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
        **counts,
    )


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
    _, key, value, headers, timestamp = record
    fixed = _FIXED.pack(timestamp, -1 if key is None else len(key), -1 if value is None else len(value), len(headers))
    if not headers:
        return b"".join((fixed, key or b"", value or b""))
    return b"".join([fixed, key or b"", value or b"", *(_field(name.encode("utf-8")) + _field(data) for name, data in headers)])


def _field(data: bytes | None) -> bytes:
    return struct.pack(">i", -1) if data is None else struct.pack(">i", len(data)) + data


def verdict_reason(figures: ComparisonFigures, lost: Lost | None = None) -> str:
    """Why a compared partition is not equal, in words (empty when it is)."""
    offset = figures.first_offset
    if figures.verdict is Verdict.MISSING and lost is not None and offset in lost:
        other = "target" if lost.side == "source" else "source"
        return (
            f"source offset {offset} and {lost.records - 1} more were deleted from the {lost.side} while the {other} holds them, "
            f"before the {lost.side}'s retention.ms or retention.bytes could have deleted them"
        )
    reasons = {
        Verdict.MISSING: f"source offset {offset} is not in the target",
        Verdict.EXTRA: f"target offset {offset} is no copy of a source record",
        Verdict.DIFFERENT: f"the copy of source offset {offset} differs from it",
    }
    return reasons.get(figures.verdict, "")
