"""One parse of a batch's options for the CLI flags and the DAG params: the error names the caller's spelling."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from airmirror.errors import InputError
from airmirror.replication.options import BatchOptions, parse_batch_options

MARCH = int(datetime(2024, 3, 1, tzinfo=UTC).timestamp() * 1000)


def flag(option: str) -> str:
    return "--" + option


def test_defaults_copy_from_the_cursors_to_the_last_stable_offset():
    assert parse_batch_options(named=flag) == BatchOptions()


def test_a_time_start_from_and_until_become_epoch_milliseconds():
    options = parse_batch_options(named=flag, start_from="2024-03-01", until="2024-03-01T00:00:00Z")
    assert (options.start_from, options.start_ms, options.until_ms) == ("timestamp", MARCH, MARCH)


def test_default_until_applies_only_without_an_explicit_until():
    assert parse_batch_options(named=flag, default_until_ms=5).until_ms == 5
    assert parse_batch_options(named=flag, until="2024-03-01", default_until_ms=5).until_ms == MARCH


def test_now_is_accepted_only_where_the_caller_allows_it():
    assert parse_batch_options(named=flag, until="now", allow_now=True).until_ms > MARCH
    with pytest.raises(InputError, match="--until: 'now' is not an ISO-8601 time"):
        parse_batch_options(named=flag, until="now")


@pytest.mark.parametrize(
    ("given", "named"),
    [
        ({"topics": "(bad"}, "--topics"),
        ({"start_from": "yesterday"}, "--start_from"),
        ({"until": "soon"}, "--until"),
        ({"max_records": 0}, "--max_records"),
        ({"max_records": True}, "--max_records"),
        ({"max_records": "10"}, "--max_records"),
    ],
)
def test_bad_options_name_the_option(given, named):
    with pytest.raises(InputError, match=named):
        parse_batch_options(named=flag, **given)
