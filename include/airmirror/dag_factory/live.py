"""Live DAG runs (``airmirror.live = true``): each run replicates continuously for the length of its data
interval, and emits heartbeats and checkpoints beside it at their intervals.

Rules:
1. A run is live when the flow sets ``airmirror.live = true``, the run is not bounded by time (a backfill run
   or an explicit ``until`` param, :func:`airmirror.dag_factory.params.bounds_by_time`), it is not a dry run,
   and it has a data interval longer than zero.  Any other run copies one batch, as without live mode, so
   backfills stay bounded by their data intervals.
2. A live run's window is the length of its data interval, counted from when each task starts: ``replicate``
   runs :func:`airmirror.replication.continuous.replicate_continuously` for that long (every batch committed
   exactly once, the batch in flight finished before it ends), then the run ends and the next run follows
   (``max_active_runs=1``).
3. ``emit_heartbeats`` and ``emit_checkpoints`` do not wait for ``replicate``: in a live run each emits at
   once and then every ``emit.*.interval.seconds`` for the window (:func:`emit_repeatedly`), whatever
   ``replicate`` does, failures included.  An emission that fails is logged and tried again at the next tick;
   the task fails only if the last emission of its window failed.  Emission the flow turns off (the ``enabled``
   key false, or a negative interval as in MM2) skips the task at once, naming the key.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

from airmirror.dag_factory.params import bounds_by_time, run_type_name

log = logging.getLogger(__name__)


def live_seconds(live: bool, context: Mapping[str, Any]) -> float | None:
    """The window of a live run in seconds (rule 1), or ``None`` when the run copies one batch."""
    params = context.get("params") or {}
    if not live or params.get("dry_run") or bounds_by_time(run_type_name(context.get("dag_run")), params.get("until")):
        return None
    start, end = context.get("data_interval_start"), context.get("data_interval_end")
    if start is None or end is None:
        return None
    seconds = (end - start).total_seconds()
    return seconds if seconds > 0 else None


def emit_repeatedly(
    emit: Callable[[], Any],
    interval_seconds: float,
    window_seconds: float,
    *,
    stop: threading.Event | None = None,
) -> int:
    """Call ``emit`` now and then every ``interval_seconds`` (positive, else ValueError) until ``window_seconds``
    have passed (rule 3); returns how many emissions succeeded.  Ticks are kept on a fixed grid from the start, so
    a slow emission does not drift the ones after it; ticks missed while an emission ran are skipped, not bunched."""
    if interval_seconds <= 0:
        raise ValueError(f"an emission interval must be positive, not {interval_seconds}")
    stop = stop or threading.Event()
    started = time.monotonic()
    deadline = started + window_seconds
    succeeded = 0
    failures = 0
    last_error: Exception | None = None
    tick = 0
    while not stop.is_set():
        try:
            emit()
            succeeded += 1
            last_error = None
        except Exception as error:
            failures += 1
            last_error = error
            log.warning("emission failed (%s); trying again in %.0f s", error, interval_seconds)
        elapsed_ticks = int((time.monotonic() - started) // interval_seconds)
        tick = max(tick + 1, elapsed_ticks + 1)
        next_at = started + tick * interval_seconds
        if next_at >= deadline:
            break
        stop.wait(max(0.0, next_at - time.monotonic()))
    if failures:
        log.warning("%d of %d emissions failed in this live window", failures, failures + succeeded)
    if last_error is not None:
        raise last_error
    return succeeded
