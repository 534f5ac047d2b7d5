"""User-supplied points in time (CLI flags, DAG params) as Kafka timestamps (epoch milliseconds)."""

from __future__ import annotations

from datetime import datetime, timezone

from airmirror.errors import InputError


def parse_timestamp(value: str, what: str, *, allow_now: bool = False) -> int:
    """ISO-8601 (a naive time means UTC), or ``now`` when allowed -> epoch ms; InputError naming ``what``."""
    if allow_now and value == "now":
        return int(datetime.now(timezone.utc).timestamp() * 1000)
    try:
        moment = datetime.fromisoformat(value)
    except ValueError as error:
        expected = "an ISO-8601 time or 'now'" if allow_now else "an ISO-8601 time"
        raise InputError(f"{what}: '{value}' is not {expected}") from error
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=timezone.utc)
    return int(moment.timestamp() * 1000)
