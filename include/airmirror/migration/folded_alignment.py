"""Which records of a folded offset-sync run pair up in ``airmirror verify``: alignment by order within a bounded
window.  Pure logic, one run at a time, inside a comparison (:mod:`airmirror.migration.partition_compare`) that
decides what an unpaired record means.

Contract:
- A folded run (:class:`~airmirror.model.OffsetRun`) only says that its ``records`` copies lie in order in its
  target range, so its records are paired by **order**: the k-th record read on the source within its source
  range with the k-th read on the target within its target range (both sides read read_committed, so neither
  sees markers or aborted records).  :func:`compare_folded_run` takes the run as one block, from both sides'
  first records in it to their last, and leaves both readers at their first record past it.
- Order pairing must skip what one side no longer holds (compaction, retention) or never got.  Each record's
  place among the run's copies is bounded by its offset: at most ``offset - start``, at least that less the
  side's offsets in the run that hold no copy, and after the last pair.  Where the offsets pin a place (a side
  contiguous in the run), it is exact.  Otherwise two records whose places may coincide pair when identical;
  when they differ, one is left unpaired only if the next record of the other side is identical to it, or the
  other side has not paired any record of the run yet (it lost the run's start: its first record is searched for
  by content among the places its offset allows), or only one side is compacted (the record of the other side is
  the one compaction removed), or both are and the keys differ (the one with the lower place); otherwise they
  are a copy that is **different**.
- An unpaired record goes to the comparison (:meth:`RunComparison.not_in_target`, ``not_in_source``), marked
  excusable only where its side may lack it: a side contiguous in the run (every offset a copy) lacks only the
  offsets it skipped, so against it an unpaired record elsewhere is always a difference.  An unpaired source
  record is placed at the target's next record in the run (the run's ``downstream_stop`` past it); an unpaired
  copy at the run's at-or-before source offset for it (:meth:`~airmirror.model.OffsetRun.upstream_at_most`).
  So a wrong alignment only ever turns one difference into others: a pair counts as equal only when identical,
  and a record is skipped only where a rule excuses its absence.  What it cannot see (both sides compacted,
  neither contiguous in the run): a copy altered to another key, when the original's key comes again later on
  the target and the altered key later on the source, passes as two compacted records, both superseded on the
  side that holds them.
- A run whose records all paired, but whose uncompacted target (source) read fewer records from the run's start
  than the run copied, is **missing** at the run's first source offset (**extra** at its first target offset):
  a count that falls short is never equal.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple, Protocol

from airmirror.migration.compared_record import Record
from airmirror.model import OffsetRun, Verdict


class RunReader(Protocol):
    """One side's records in offset order: the current one (``head``, ``None`` past the last) and the next."""

    head: Record | None

    def after(self) -> Record | None: ...

    def advance(self) -> None: ...


class RunComparison(Protocol):
    """What alignment asks of the comparison it runs inside."""

    @property
    def source_compacted(self) -> bool: ...

    @property
    def target_compacted(self) -> bool: ...

    def pair(self, source: Record, target: Record) -> None:
        """``target`` is the copy of ``source`` (different unless identical)."""

    def not_in_target(self, record: Record, place: int, excusable: bool) -> None:
        """Source ``record`` has no copy; ``place``: where in target order."""

    def not_in_source(self, record: Record, original: int | None, excusable: bool) -> None:
        """Target ``record`` has no source record; ``original``: the source offset it copies, or one before."""

    def difference(self, place: int, verdict: Verdict, offset: int) -> None:
        """A difference at ``place`` in target order."""

    def difference_count(self) -> int:
        """The differences so far, absences still waiting for compaction to explain them included."""


def compare_folded_run(run: OffsetRun, source: RunReader, target: RunReader, comparison: RunComparison) -> None:
    """Pair the records of folded ``run`` on both sides, from each reader's ``head`` on, per the module contract."""
    _FoldedRun(run, source, target, comparison).compare()


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


class _FoldedRun:
    """The alignment of one folded run: both sides' :class:`_Alignment` and the readers they advance."""

    def __init__(self, run: OffsetRun, source: RunReader, target: RunReader, comparison: RunComparison) -> None:
        self.run, self.source, self.target, self.comparison = run, source, target, comparison
        self.upstream = _Alignment(run.upstream_start, run.length - run.copies)
        self.downstream = _Alignment(run.downstream_start, run.downstream_length - run.copies)

    def compare(self) -> None:
        run, source, target, upstream, downstream = self.run, self.source, self.target, self.upstream, self.downstream
        before = self.comparison.difference_count()
        while True:
            s, t = _inside(source.head, run.upstream_end), _inside(target.head, run.downstream_stop)
            if s is None:
                if t is None:
                    break
                self._pass_target(t, s)
                target.advance()
                continue
            if t is None or upstream.window(s.offset)[1] < downstream.window(t.offset)[0]:
                self._pass_source(s, t)
                source.advance()
                continue
            if downstream.window(t.offset)[1] < upstream.window(s.offset)[0]:
                self._pass_target(t, s)
                target.advance()
                continue
            s_low, s_high = upstream.window(s.offset)
            t_low, t_high = downstream.window(t.offset)
            choice = (
                "pair"
                if s.content() == t.content()
                else self._absent_one(
                    s,
                    t,
                    (_inside(source.after(), run.upstream_end), _inside(target.after(), run.downstream_stop)),
                    (
                        _Place(s_low, upstream.anchored or s_low == s_high),
                        _Place(t_low, downstream.anchored or t_low == t_high),
                    ),
                )
            )
            if choice == "source":
                self._pass_source(s, t)
                source.advance()
            elif choice == "target":
                self._pass_target(t, s)
                target.advance()
            else:
                upstream.placed(s.offset)
                downstream.placed(t.offset)
                self.comparison.pair(s, t)
                upstream.floor = downstream.floor = max(s_low, t_low) + 1
                upstream.anchored = downstream.anchored = True
                source.advance()
                target.advance()
        if self.comparison.difference_count() == before:
            self._short_sides()

    def _absent_one(
        self, s: Record, t: Record, after: tuple[Record | None, Record | None], places: tuple[_Place, _Place]
    ) -> str:
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
        source_compacted, target_compacted = self.comparison.source_compacted, self.comparison.target_compacted
        if source_compacted != target_compacted:
            return "source" if target_compacted else "target"
        if target_compacted and s.key != t.key:
            return "source" if s_at.low <= t_at.low else "target"
        return "pair"

    def _pass_source(self, record: Record, t: Record | None) -> None:
        """Source ``record`` has no counterpart in the run's target records (``t``: the target's next one there)."""
        excusable = self.downstream.may_lack(None if t is None else t.offset, self.upstream.window(record.offset))
        self.upstream.placed(record.offset)
        self.comparison.not_in_target(record, self.run.downstream_stop if t is None else t.offset, excusable)

    def _pass_target(self, record: Record, s: Record | None) -> None:
        """Target ``record`` has no counterpart in the run's source records (``s``: the source's next one there)."""
        excusable = self.upstream.may_lack(None if s is None else s.offset, self.downstream.window(record.offset))
        self.downstream.placed(record.offset)
        self.comparison.not_in_source(record, self.run.upstream_at_most(record.offset), excusable)

    def _short_sides(self) -> None:
        """A folded run whose records all paired, but an uncompacted side holding it from its start read fewer
        records than the run copied: the target is missing some (or the source lost some)."""
        run, comparison = self.run, self.comparison
        if not comparison.target_compacted and self.downstream.whole and self.downstream.read < run.copies:
            comparison.difference(run.downstream_start, Verdict.MISSING, run.upstream_start)
        elif not comparison.source_compacted and self.upstream.whole and self.upstream.read < run.copies:
            comparison.difference(run.downstream_start, Verdict.EXTRA, run.downstream_start)


def _inside(record: Record | None, end: int) -> Record | None:
    """``record`` when it lies before offset ``end``."""
    return record if record is not None and record.offset < end else None
