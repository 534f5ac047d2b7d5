"""Durations as users write them in airmirror: ``30s``, ``5m``, ``2h``, ``1d`` (``airmirror.schedule``,
``replicate --for``)."""

from __future__ import annotations

import re
from datetime import timedelta

from airmirror.errors import InputError

DURATION = re.compile(r"(?P<amount>\d+)\s*(?P<unit>s|m|h|d)")
UNITS = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days"}


def parse_duration(value: str) -> timedelta | None:
    """The duration ``value`` names, or ``None`` when it is not one (the caller words the error)."""
    match = DURATION.fullmatch(value.strip())
    if match is None:
        return None
    return timedelta(**{UNITS[match.group("unit")]: int(match.group("amount"))})


def positive_duration(value: str, what: str) -> timedelta:
    """The positive duration ``value`` names; InputError naming ``what`` (a flag) otherwise."""
    duration = parse_duration(value)
    if duration is None or duration <= timedelta(0):
        raise InputError(f"{what}: '{value}' is not a positive duration (30s, 5m, 2h, 1d)")
    return duration
