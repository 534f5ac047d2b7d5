"""Building offset-sync runs from copied records, in memory that grows with runs and holes, never with records.

A run (:class:`~airmirror.model.OffsetRun`) says the upstream offsets ``upstream_start .. upstream_end - 1``, less
its holes, were copied one for one to consecutive downstream offsets starting at ``downstream_start``.  Storing
every run (instead of MM2's sparse, lossy offset-syncs) makes translation of any replicated upstream offset exact
(see :mod:`airmirror.checkpoints.translation`).  A source offset without a copy (dropped by a transform, taken by
the dead-letter queue, a compaction hole or a marker) is a hole of the run, so a chunk of a partition (consecutive
on the target) is one run however much it dropped; only a downstream gap starts a new run.
"""

from __future__ import annotations

from array import array
from collections.abc import Iterable, Sequence

from airmirror.model import OffsetRun


class RunBuilder:
    """Runs of the pairs fed with :meth:`add`, in copy order; holds four integers per run and two per hole.

    Pairs must be strictly increasing on both sides (records are copied in order); a new run starts wherever the
    downstream side skips an offset, and an upstream skip inside a run is a hole.
    """

    def __init__(self) -> None:
        self._runs: list[OffsetRun] = []
        self._holes = array("q")
        self._start_up = self._start_down = self._up = self._down = -1

    def add(self, up: int, down: int) -> None:
        """Record that upstream offset ``up`` was copied to downstream offset ``down``."""
        if down == self._down + 1 and self._start_up >= 0:
            if up == self._up + 1:
                self._up = up
                self._down = down
                return
            if up > self._up:
                self._holes.extend((self._up + 1, up))
                self._up = up
                self._down = down
                return
        if self._start_up >= 0 and (up <= self._up or down <= self._down):
            raise ValueError(f"offsets must increase: {self._up}->{up}, {self._down}->{down}")
        self._close()
        self._start_up = self._up = up
        self._start_down = self._down = down

    def add_run(self, up: int, down: int, count: int) -> None:
        """Record that the ``count`` (at least 1) upstream offsets from ``up`` were copied to the consecutive
        downstream offsets from ``down``: the same as :meth:`add` of each pair, in one step."""
        self.add(up, down)
        self._up, self._down = up + count - 1, down + count - 1

    def __len__(self) -> int:
        return len(self._runs) + (1 if self._start_up >= 0 else 0)

    def take(self) -> list[OffsetRun]:
        """The runs so far, in order; the builder starts afresh."""
        self._close()
        runs, self._runs = self._runs, []
        self._start_up = self._start_down = self._up = self._down = -1
        return runs

    def _close(self) -> None:
        if self._start_up >= 0:
            self._runs.append(OffsetRun(self._start_up, self._up + 1, self._start_down, holes=tuple(self._holes)))
            self._holes = array("q")


def build_runs(upstream: Sequence[int], downstream: Sequence[int]) -> list[OffsetRun]:
    """Compress paired offsets (the i-th copied record: ``upstream[i]`` -> ``downstream[i]``) into runs."""
    if len(upstream) != len(downstream):
        raise ValueError("upstream and downstream offsets must pair up")
    builder = RunBuilder()
    for up, down in zip(upstream, downstream, strict=True):
        builder.add(up, down)
    return builder.take()


def merge_runs(runs: Iterable[OffsetRun]) -> list[OffsetRun]:
    """Join consecutive exact runs that continue each other on the target (a chunk boundary inside a run): the
    source offsets between them become a hole."""
    merged: list[OffsetRun] = []
    for run in runs:
        last = merged[-1] if merged else None
        if (
            last is not None
            and last.exact
            and run.exact
            and run.upstream_start >= last.upstream_end
            and run.downstream_start == last.downstream_stop
        ):
            between = (last.upstream_end, run.upstream_start) if run.upstream_start > last.upstream_end else ()
            merged[-1] = OffsetRun(
                last.upstream_start, run.upstream_end, last.downstream_start, holes=last.holes + between + run.holes
            )
        else:
            merged.append(run)
    return merged


def split_run(run: OffsetRun, room: int) -> tuple[OffsetRun, OffsetRun | None]:
    """An exact ``run`` with more than ``room`` holes cut at its hole number ``room`` (from 0) into the run below
    that hole and the run above it (``None``: the run has at most ``room`` holes and stays whole).  Together the two
    map every offset as ``run`` did, and :func:`merge_runs` joins them back."""
    if len(run.holes) <= 2 * room:
        return run, None
    hole_start, hole_end = run.holes[2 * room], run.holes[2 * room + 1]
    head = OffsetRun(run.upstream_start, hole_start, run.downstream_start, holes=run.holes[: 2 * room])
    rest = OffsetRun(hole_end, run.upstream_end, head.downstream_stop, holes=run.holes[2 * room + 2 :])
    return head, rest
