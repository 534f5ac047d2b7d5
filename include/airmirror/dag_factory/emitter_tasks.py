"""When a run emits heartbeats and checkpoints: at most once per ``emit.*.interval.seconds``.

A run emits when its data interval ``(start, end]`` contains a multiple of the interval (counted from the
epoch), or when the run has no data interval.  With the default one-minute schedule, heartbeats (1 s) and
checkpoints (60 s) are emitted by every run; an interval longer than the schedule skips runs
deterministically, the same way in scheduled runs and in backfills.
"""

from __future__ import annotations

from datetime import datetime


def is_due(interval_seconds: int, start: datetime | None, end: datetime | None) -> bool:
    if start is None or end is None:
        return True
    return int(end.timestamp()) // interval_seconds > int(start.timestamp()) // interval_seconds
