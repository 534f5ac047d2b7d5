"""Building offset-sync runs from copied records, and exact translation over runs.

A run ``(upstream_start, upstream_end, downstream_start)`` says upstream offsets
``upstream_start .. upstream_end - 1`` were copied, one for one, to consecutive downstream offsets starting
at ``downstream_start``.  Storing every run (instead of MM2's sparse, lossy offset-syncs) makes translation
of any replicated upstream offset exact.
"""

from __future__ import annotations

from collections.abc import Sequence

from airmirror.model import OffsetRun


def build_runs(upstream: Sequence[int], downstream: Sequence[int]) -> list[OffsetRun]:
    """Compress paired offsets (the i-th copied record: ``upstream[i]`` -> ``downstream[i]``) into runs.

    Both sequences must have the same length and be strictly increasing (records are copied in order).
    A new run starts wherever either side skips an offset.
    """
    if len(upstream) != len(downstream):
        raise ValueError("upstream and downstream offsets must pair up")
    runs: list[OffsetRun] = []
    if not upstream:
        return runs
    run_up, run_down, previous_up, previous_down = upstream[0], downstream[0], upstream[0], downstream[0]
    for up, down in zip(upstream[1:], downstream[1:]):
        if up <= previous_up or down <= previous_down:
            raise ValueError(f"offsets must increase: {previous_up}->{up}, {previous_down}->{down}")
        if up != previous_up + 1 or down != previous_down + 1:
            runs.append(OffsetRun(run_up, previous_up + 1, run_down))
            run_up, run_down = up, down
        previous_up, previous_down = up, down
    runs.append(OffsetRun(run_up, previous_up + 1, run_down))
    return runs
