"""What the caller asks of one batch, parsed once for the CLI flags and the DAG params alike.

Rules:
- ``start_from`` is ``stored`` (the cursor), ``earliest``, ``latest`` or an ISO-8601 time; moving an existing
  cursor also needs ``reset_cursor`` (checked against the store before any work starts).
- ``until`` is an ISO-8601 time (a naive time means UTC), or ``now`` where the caller allows it: the batch
  copies the records stamped before it.  Without ``until`` the batch copies to the last stable offset.
- Bad input raises :class:`~airmirror.errors.InputError` naming the flag or param (exit code 2).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from airmirror.errors import InputError
from airmirror.model import JsonObject

START_KEYWORDS = ("stored", "earliest", "latest")


@dataclass(frozen=True)
class BatchOptions:
    """What the caller asks of one batch (CLI flags or DAG params), validated."""

    max_records: int | None = None
    until_ms: int | None = None
    topics_regex: str | None = None
    dry_run: bool = False
    start_from: str = "stored"
    start_ms: int | None = None
    reset_cursor: bool = False

    def params(self) -> JsonObject:
        """The options a stored batch records as JSON (everything but ``dry_run``, which stores nothing)."""
        return {
            "max_records": self.max_records,
            "until_ms": self.until_ms,
            "topics_regex": self.topics_regex,
            "start_from": self.start_from,
            "start_ms": self.start_ms,
            "reset_cursor": self.reset_cursor,
        }


def parse_timestamp(value: str, what: str, *, allow_now: bool = False) -> int:
    """ISO-8601 (a naive time means UTC), or ``now`` when allowed -> epoch ms; InputError naming ``what``."""
    if allow_now and value == "now":
        return int(datetime.now(UTC).timestamp() * 1000)
    try:
        moment = datetime.fromisoformat(value)
    except ValueError as error:
        expected = "an ISO-8601 time or 'now'" if allow_now else "an ISO-8601 time"
        raise InputError(f"{what}: '{value}' is not {expected}") from error
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return int(moment.timestamp() * 1000)


def parse_batch_options(
    *,
    named: Callable[[str], str],
    topics: str | None = None,
    start_from: str | None = None,
    until: str | None = None,
    max_records: Any = None,
    dry_run: bool = False,
    reset_cursor: bool = False,
    allow_now: bool = False,
    default_until_ms: int | None = None,
) -> BatchOptions:
    """Validate one batch's options and resolve them into :class:`BatchOptions`.

    ``named(option)`` is how an error names an option (``--start-from`` on the command line, ``param
    'start_from'`` in a DAG run).  ``default_until_ms`` bounds the batch when ``until`` is not given (a
    backfill run's data interval end)."""
    if topics:
        try:
            re.compile(topics)
        except re.error as error:
            raise InputError(f"{named('topics')}: invalid regex '{topics}': {error}") from error
    start_from = start_from or "stored"
    start_ms = None if start_from in START_KEYWORDS else parse_timestamp(start_from, named("start_from"))
    until_ms = parse_timestamp(until, named("until"), allow_now=allow_now) if until else default_until_ms
    if max_records is not None and (
        isinstance(max_records, bool) or not isinstance(max_records, int) or max_records < 1
    ):
        raise InputError(f"{named('max_records')}: {max_records!r} is not a positive integer")
    return BatchOptions(
        max_records=max_records,
        until_ms=until_ms,
        topics_regex=topics or None,
        dry_run=bool(dry_run),
        start_from=start_from if start_ms is None else "timestamp",
        start_ms=start_ms,
        reset_cursor=bool(reset_cursor),
    )
