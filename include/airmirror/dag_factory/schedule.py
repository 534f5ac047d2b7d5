"""``airmirror.schedule``: a flow's schedule, always with real data intervals.

Accepted values: a duration (``30s``, ``1m``, ``15m``, ``2h``, ``1d``) -> a fixed-delta data-interval
timetable; or a five-field cron expression / cron preset (``@hourly``) -> a cron data-interval timetable in
UTC.  A cron *string* passed straight to Airflow would give zero-width intervals, which cannot bound a
batch, so it is always wrapped.
"""

from __future__ import annotations

from datetime import timedelta

from airflow.sdk import CronDataIntervalTimetable, DeltaDataIntervalTimetable
from croniter import croniter

from airmirror.config.durations import parse_duration
from airmirror.errors import ConfigError

PRESETS = {"@hourly": "0 * * * *", "@daily": "0 0 * * *", "@weekly": "0 0 * * 0", "@monthly": "0 0 1 * *"}


def parse_schedule(value: str, *, line: int | None = None) -> CronDataIntervalTimetable | DeltaDataIntervalTimetable:
    """Turn an ``airmirror.schedule`` value into a data-interval timetable; ConfigError when invalid."""
    text = value.strip()
    delta = parse_duration(text)
    if delta is not None:
        if delta <= timedelta(0):
            raise ConfigError(f"schedule '{value}' must be longer than zero", key="airmirror.schedule", line=line)
        return DeltaDataIntervalTimetable(delta)
    cron = PRESETS.get(text, text)
    if len(cron.split()) == 5 and croniter.is_valid(cron):
        return CronDataIntervalTimetable(cron, timezone="UTC")
    raise ConfigError(
        f"schedule '{value}' is neither a duration (30s, 1m, 2h, 1d) nor a cron expression",
        key="airmirror.schedule",
        line=line,
    )
