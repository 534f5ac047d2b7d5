"""Building offset-sync runs from copied records, in memory that grows with runs, never with records.

A run ``(upstream_start, upstream_end, downstream_start)`` says upstream offsets
``upstream_start .. upstream_end - 1`` were copied, one for one, to consecutive downstream offsets starting
at ``downstream_start``.  Storing every run (instead of MM2's sparse, lossy offset-syncs) makes translation
of any replicated upstream offset exact (see :mod:`airmirror.checkpoints.translation`).
"""

from __future__ import annotations

from array import array
from collections.abc import Iterable, Sequence

from airmirror.model import OffsetRun


class RunBuilder:
    """Runs of the pairs fed with :meth:`add`, in copy order; holds three integers per run.

    Pairs must be strictly increasing on both sides (records are copied in order); a new run starts
    wherever either side skips an offset.
    """

    def __init__(self) -> None:
        self._closed = array("q")
        self._up = self._down = -1
        self._length = 0

    def add(self, up: int, down: int) -> None:
        """Record that upstream offset ``up`` was copied to downstream offset ``down``."""
        length = self._length
        if length and up == self._up + length and down == self._down + length:
            self._length = length + 1
            return
        if length and (up < self._up + length or down < self._down + length):
            raise ValueError(f"offsets must increase: {self._up + length - 1}->{up}, {self._down + length - 1}->{down}")
        self._close()
        self._up, self._down, self._length = up, down, 1

    def __len__(self) -> int:
        return len(self._closed) // 3 + (1 if self._length else 0)

    def take(self) -> list[OffsetRun]:
        """The runs so far, in order; the builder starts afresh."""
        self._close()
        flat = self._closed
        runs = [OffsetRun(flat[i], flat[i + 1], flat[i + 2]) for i in range(0, len(flat), 3)]
        self._closed = array("q")
        self._up = self._down = -1
        return runs

    def _close(self) -> None:
        if self._length:
            self._closed.extend((self._up, self._up + self._length, self._down))
            self._length = 0


def build_runs(upstream: Sequence[int], downstream: Sequence[int]) -> list[OffsetRun]:
    """Compress paired offsets (the i-th copied record: ``upstream[i]`` -> ``downstream[i]``) into runs."""
    if len(upstream) != len(downstream):
        raise ValueError("upstream and downstream offsets must pair up")
    builder = RunBuilder()
    for up, down in zip(upstream, downstream, strict=True):
        builder.add(up, down)
    return builder.take()


def merge_runs(runs: Iterable[OffsetRun]) -> list[OffsetRun]:
    """Join consecutive runs that continue each other on both sides (a chunk boundary inside a run)."""
    merged: list[OffsetRun] = []
    for run in runs:
        last = merged[-1] if merged else None
        if (
            last is not None
            and run.upstream_start == last.upstream_end
            and run.downstream_start == last.downstream_start + last.length
        ):
            merged[-1] = OffsetRun(last.upstream_start, run.upstream_end, last.downstream_start)
        else:
            merged.append(run)
    return merged
