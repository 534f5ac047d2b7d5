"""Compare one source partition with its remote partition through its offset-sync runs (``airmirror verify``).
Pure logic: the records come in as iterators, so memory does not grow with the partition (or with a run).

Contract:
- An exact run says where every copied source offset landed: source ``o`` in run ``r`` is target
  ``o - r.upstream_start + r.downstream_start``.  A folded run (:class:`~airmirror.model.OffsetRun`) only says
  that its ``records`` copies lie in order in its target range: its records are paired by **order**, the k-th
  record read on the source within its source range with the k-th read on the target within its target range
  (both sides read read_committed, so neither sees markers or aborted records).  The records of both sides are
  walked in target order; a folded run is compared as one block at its first target offset.
- A source record at an offset no run covers was never copied: **missing** at that source offset.  A target
  record at an offset no run covers is no copy: **extra** at that target offset.
- A source record whose copy is not in the target, or a copy whose source record is gone, is a difference
  unless compaction of that side explains it: the side's topic is compacted and the absent record is a
  tombstone, or a record with the same key comes later on that side (the cleaner keeps only the newest record
  of a key).  Later records are looked for up to the end of what is compared, then in ``*_later_keys``
  (the keys each side holds beyond the compared range).  Explained absences are counted as compaction.
- A source record and its copy that differ in key, value, headers (in order; no headers equals an empty list)
  or timestamp are **different** at the source offset.
- Inside a folded run, order pairing must skip what one side no longer holds (compaction, retention) or never
  got.  Each record's place among the run's copies is bounded by its offset: at most ``offset - start``, at
  least that less the side's offsets in the run that hold no copy, and after the last pair.  Where the
  offsets pin a place (a side contiguous in the run), it is exact.  Otherwise two records whose places may coincide pair when identical; when they
  differ, one is left unpaired only if the next record of the other side is identical to it, or the other
  side has not paired any record of the run yet (it lost the run's start: its first record is searched for by
  content among the places its offset allows), or only one side is compacted (the record of the other side is
  the one compaction removed), or both are and the keys differ (the one with the lower place); otherwise they
  are a copy that is **different**.  An unpaired record goes through the same rules as above: **missing**
  (source record, at its source offset) or **extra** (target record, at its target offset) unless compaction or
  :class:`Lost` explains it, and only where its side may lack it: a side contiguous in the run (every offset a
  copy) lacks only the offsets it skipped, so against it an unpaired record elsewhere is always a difference.
  So a wrong alignment only ever turns one difference into others: a pair counts as equal only when identical,
  and a record is skipped only where a rule excuses its absence.  What it cannot see (both sides compacted,
  neither contiguous in the run): a copy altered to another key, when the original's key comes again later on
  the target and the altered key later on the source, passes as two compacted records, both superseded on the
  side that holds them.
- A folded run whose records all paired, but whose uncompacted target (source) read fewer records from the
  run's start than the run copied, is **missing** at the run's first source offset (**extra** at its first
  target offset): a count that falls short is never equal.
- Records deleted from the start of one side only (a :class:`Lost` range of source offsets, which the caller
  could not explain by that side's ``retention.ms``) are **missing** at their source offset, unless the side's
  ``retention.bytes`` explains them once the side has been read: :attr:`Lost.excused` is asked at the end, after
  every record has passed :meth:`Lost.weigh`.  A copy without its source record in a folded run is placed at
  the run's at-or-before source offset for that (:meth:`~airmirror.model.OffsetRun.upstream_at_most`).
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
    """Source offset <-> target offset through a partition's runs (sorted, never overlapping): the run holding an
    offset on either side, and the exact mapping inside an exact run."""

    def __init__(self, runs: Sequence[OffsetRun]) -> None:
        self.runs = sorted(runs, key=lambda r: r.upstream_start)
        self._upstream = [r.upstream_start for r in self.runs]
        self._downstream = [r.downstream_start for r in self.runs]

    def upstream_run(self, offset: int) -> OffsetRun | None:
        """The run whose source offsets hold ``offset``."""
        index = bisect_right(self._upstream, offset) - 1
        return self.runs[index] if index >= 0 and offset < self.runs[index].upstream_end else None

    def downstream_run(self, offset: int) -> OffsetRun | None:
        """The run whose target offsets hold ``offset`` (up to its ``downstream_stop``)."""
        index = bisect_right(self._downstream, offset) - 1
        return self.runs[index] if index >= 0 and offset < self.runs[index].downstream_stop else None

    def to_target(self, offset: int) -> int | None:
        """The copy of source ``offset`` in an exact run (``None``: no run, or a folded one)."""
        run = self.upstream_run(offset)
        return None if run is None or not run.exact else offset - run.upstream_start + run.downstream_start

    def to_source(self, offset: int) -> int | None:
        """The source offset of the copy at target ``offset`` in an exact run (``None``: no run, or a folded one)."""
        run = self.downstream_run(offset)
        return None if run is None or not run.exact else offset - run.downstream_start + run.upstream_start


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


@dataclass
class _Alignment:
    """One side of a folded run being compared: where each record may sit in the run's order of copies.

    A record at ``offset`` is at most the ``offset - start``-th copy, and at least that less ``slack`` (the run's
    offsets on this side that hold no copy), and after the last pair (``floor``; a record left unpaired moves no
    floor: it may be no copy at all).  A side is
    ``anchored`` once a record of it is paired, or placed exactly."""

    start: int
    slack: int
    floor: int = 0
    anchored: bool = False
    read: int = 0
    whole: bool = False
    last: int = -1

    def window(self, offset: int) -> tuple[int, int]:
        high = offset - self.start
        low = max(high - self.slack, self.floor)
        return low, high

    def placed(self, offset: int) -> None:
        """A record of this side at ``offset`` was read."""
        if self.read == 0:
            self.whole = offset == self.start
        self.read += 1
        self.last = offset - self.start

    def may_lack(self, offset: int | None, window: tuple[int, int]) -> bool:
        """Whether this side may lack a record placed in ``window``, below its record at ``offset`` (``None``: it
        has no more in the run): always, unless the side is contiguous in the run (``slack`` 0), where only the
        offsets it skipped since its last record lack one."""
        if self.slack or offset is None:
            return True
        return max(self.last + 1, window[0]) <= min(offset - self.start - 1, window[1])


class _Place(NamedTuple):
    """One of two differing records that may sit at the same place in a folded run: its lowest place, and
    whether its side is anchored."""

    low: int
    anchored: bool


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
            self.differences.add(target.offset, Verdict.DIFFERENT, source.offset)
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
        elif self.lost is not None and self.lost.side == "source" and original in self.lost:
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
        target offset (:meth:`folded`)."""
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
            s_place = None if s_run is None else s_run.downstream_start + (s.offset - s_run.upstream_start if s_run.exact else 0)
            t_place = None if t_run is None else (t.offset if t_run.exact else t_run.downstream_start)
            if s_run is not None and not s_run.exact and (t_place is None or t_place >= s_place):
                self.folded(s_run, source, target)
            elif t_run is not None and not t_run.exact and (s_place is None or s_place >= t_place):
                self.folded(t_run, source, target)
            elif s_place is not None and s_place == t_place:
                self.pair(s, t)
                source.advance()
                target.advance()
            elif s_place is not None and (t_place is None or s_place < t_place):
                self.not_in_target(s, s_place)
                source.advance()
            else:
                self.not_in_source(t, mapping.to_source(t.offset))
                target.advance()

    def folded(self, run: OffsetRun, source: _Reader, target: _Reader) -> None:
        """Compare the records of folded ``run`` on both sides, paired by order (see the module contract)."""
        upstream = _Alignment(run.upstream_start, run.length - run.copies)
        downstream = _Alignment(run.downstream_start, run.downstream_length - run.copies)
        sides = (upstream, downstream)
        before = self._difference_count()

        def inside(record: Record | None, end: int) -> Record | None:
            return record if record is not None and record.offset < end else None

        while True:
            s, t = inside(source.head, run.upstream_end), inside(target.head, run.downstream_stop)
            if s is None and t is None:
                break
            if t is None or s is not None and upstream.window(s.offset)[1] < downstream.window(t.offset)[0]:
                self._pass_source(s, t, run, sides)
                source.advance()
                continue
            if s is None or downstream.window(t.offset)[1] < upstream.window(s.offset)[0]:
                self._pass_target(t, s, run, sides)
                target.advance()
                continue
            s_low, s_high = upstream.window(s.offset)
            t_low, t_high = downstream.window(t.offset)
            choice = "pair" if s.content() == t.content() else self._absent_one(
                s, t, (inside(source.after(), run.upstream_end), inside(target.after(), run.downstream_stop)),
                (_Place(s_low, upstream.anchored or s_low == s_high), _Place(t_low, downstream.anchored or t_low == t_high)),
            )
            if choice == "source":
                self._pass_source(s, t, run, sides)
                source.advance()
            elif choice == "target":
                self._pass_target(t, s, run, sides)
                target.advance()
            else:
                upstream.placed(s.offset)
                downstream.placed(t.offset)
                self.pair(s, t)
                upstream.floor = downstream.floor = max(s_low, t_low) + 1
                upstream.anchored = downstream.anchored = True
                source.advance()
                target.advance()
        if self._difference_count() == before:
            self._short_sides(run, upstream, downstream)

    def _absent_one(self, s: Record, t: Record, after: tuple[Record | None, Record | None], places: tuple[_Place, _Place]) -> str:
        """Which of two differing records that may sit at the same place in a folded run has no counterpart:
        ``"source"`` (``s`` is not in the target), ``"target"`` (``t`` is not in the source), or ``"pair"``
        (they are a copy that differs).  ``after`` holds the next record of each side in the run."""
        (after_s, after_t), (s_at, t_at) = after, places
        if after_s is not None and after_s.content() == t.content():
            return "source"
        if after_t is not None and after_t.content() == s.content():
            return "target"
        if s_at.anchored != t_at.anchored:
            return "source" if s_at.anchored else "target"
        if self.sources.compacted != self.targets.compacted:
            return "source" if self.targets.compacted else "target"
        if self.targets.compacted and s.key != t.key:
            return "source" if s_at.low <= t_at.low else "target"
        return "pair"

    def _pass_source(self, record: Record, t: Record | None, run: OffsetRun, sides: tuple[_Alignment, _Alignment]) -> None:
        """Source ``record`` has no counterpart in the run's target records (``t``: the target's next one there)."""
        upstream, downstream = sides
        excusable = downstream.may_lack(None if t is None else t.offset, upstream.window(record.offset))
        upstream.placed(record.offset)
        self.not_in_target(record, run.downstream_stop if t is None else t.offset, excusable)

    def _pass_target(self, record: Record, s: Record | None, run: OffsetRun, sides: tuple[_Alignment, _Alignment]) -> None:
        """Target ``record`` has no counterpart in the run's source records (``s``: the source's next one there)."""
        upstream, downstream = sides
        excusable = upstream.may_lack(None if s is None else s.offset, downstream.window(record.offset))
        downstream.placed(record.offset)
        self.not_in_source(record, run.upstream_at_most(record.offset), excusable)

    def _short_sides(self, run: OffsetRun, upstream: _Alignment, downstream: _Alignment) -> None:
        """A folded run whose records all paired, but an uncompacted side holding it from its start read fewer
        records than the run copied: the target is missing some (or the source lost some)."""
        if not self.targets.compacted and downstream.whole and downstream.read < run.copies:
            self.differences.add(run.downstream_start, Verdict.MISSING, run.upstream_start)
        elif not self.sources.compacted and upstream.whole and upstream.read < run.copies:
            self.differences.add(run.downstream_start, Verdict.EXTRA, run.downstream_start)

    def _difference_count(self) -> int:
        return sum(self.counts[verdict.value] for verdict in (Verdict.MISSING, Verdict.EXTRA, Verdict.DIFFERENT)) + sum(
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
) -> ComparisonFigures:
    """Compare ``source`` with ``target`` (each in offset order) per the module contract; ``lost``, when given,
    is updated with how many of its records were read and whether retention by size excuses them."""
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
