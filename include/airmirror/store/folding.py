"""The arithmetic of folding one partition's old offset-sync runs (when and why: :mod:`airmirror.store.retention`):
which runs merge, and what a merged or a cut run holds.  Pure: no database.

A partition's runs, ordered by upstream offset, are a *folded head* (up to and including its last folded run)
followed by an *exact tail*.  One fold (:func:`fold`):

1. when the exact tail holds more than ``EXACT_RUNS + FOLD_SIZE`` runs, its oldest runs beyond the newest
   :data:`EXACT_RUNS` are folded :data:`FOLD_SIZE` consecutive runs at a time (a remainder of fewer than
   ``FOLD_SIZE`` stays exact) and join the head;
2. when the head then holds more than :data:`FOLDED_RUNS` runs, its oldest two adjacent runs merge, repeatedly,
   until it holds ``FOLDED_RUNS`` (the same as merging its oldest ``len(head) - FOLDED_RUNS + 1`` runs at once).

So one fold leaves at most ``FOLDED_RUNS + EXACT_RUNS + FOLD_SIZE - 1`` runs, and a second fold right after it
changes nothing.
"""

from __future__ import annotations

from collections.abc import Sequence

from airmirror.model import OffsetRun

EXACT_RUNS = 16
"""The newest runs of a partition that always stay exact: roughly the last 16 batches that copied into it, which
is where consumer groups commit (and checkpoints translate) in a healthy flow."""
FOLD_SIZE = 16
"""How many consecutive exact runs fold into one run.  Also the slack before the first fold, so that a fold
happens at most once per ``FOLD_SIZE`` batches of a partition and folds a whole group."""
FOLDED_RUNS = 16
"""The most folded runs a partition keeps; beyond, its oldest ones merge (the oldest offsets lose precision
first: they are the least likely to be translated)."""


def merged(runs: Sequence[OffsetRun]) -> OffsetRun:
    """One folded run holding the consecutive, non-overlapping ``runs`` (ordered by upstream offset, at least
    one): from the first's starts to the last's ends, holding the copies of them all (their holes are among the
    ``length - records`` offsets without a copy)."""
    first, last = runs[0], runs[-1]
    return OffsetRun(
        first.upstream_start,
        last.upstream_end,
        first.downstream_start,
        last.downstream_stop,
        sum(r.copies for r in runs),
    )


def fold(runs: Sequence[OffsetRun]) -> list[OffsetRun]:
    """The runs of one partition (ordered by upstream offset) after one fold, as the module docstring says;
    ``runs`` itself (as a list) when nothing needs folding."""
    folded_end = max((i + 1 for i, run in enumerate(runs) if not run.exact), default=0)
    head, tail = list(runs[:folded_end]), list(runs[folded_end:])
    groups = (len(tail) - EXACT_RUNS) // FOLD_SIZE if len(tail) > EXACT_RUNS + FOLD_SIZE else 0
    head += [merged(tail[g * FOLD_SIZE : (g + 1) * FOLD_SIZE]) for g in range(groups)]
    tail = tail[groups * FOLD_SIZE :]
    if len(head) > FOLDED_RUNS:
        excess = len(head) - FOLDED_RUNS + 1
        head = [merged(head[:excess]), *head[excess:]]
    return head + tail


def cut(run: OffsetRun, offset: int) -> OffsetRun:
    """``run`` (with ``upstream_start < offset < upstream_end``) without its upstream offsets from ``offset`` on.

    An exact run simply ends at ``offset``, its holes with it (a hole around ``offset`` ends there).  A folded run
    keeps ``downstream_end`` (now an upper bound: copies of the records cut off may lie below it) and lowers
    ``records`` to the copies it must hold below ``offset``: ``max(1, (offset - upstream_start) - (length -
    records))`` (its record at ``upstream_start`` is a copy, and at most ``length - records`` of its offsets hold
    none).  The translation rules of :class:`OffsetRun` then stay at or before the exact positions: forward, an
    offset below ``offset`` translates as before the cut or to ``downstream_start + 1``; failback, the cut-off copies
    count as offsets holding no copy, and a position past the last kept copy translates below ``offset``."""
    if run.exact:
        pairs = zip(run.holes[0::2], run.holes[1::2], strict=True)
        below = tuple(bound for start, end in pairs if start < offset for bound in (start, min(end, offset)))
        return OffsetRun(run.upstream_start, offset, run.downstream_start, holes=below)
    kept = max(1, (offset - run.upstream_start) - (run.length - run.copies))
    return OffsetRun(run.upstream_start, offset, run.downstream_start, run.downstream_end, kept)
