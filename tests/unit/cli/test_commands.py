"""The CLI commands' argument checks, which need no cluster: a bad flag exits 2 naming it."""

from __future__ import annotations

import pytest

from airmirror.cli import main
from airmirror.cli.commands import flag
from airmirror.errors import InputError
from airmirror.replication.options import parse_batch_options


def parse_until(value: str) -> int | None:
    return parse_batch_options(named=flag, until=value, allow_now=True).until_ms


def test_until_accepts_iso_and_now():
    assert parse_until("2024-01-01T00:00:00Z") == 1704067200000
    assert parse_until("2024-01-01T00:00:00") == 1704067200000
    assert parse_until("now") > 1704067200000


def test_until_rejects_garbage_naming_the_flag():
    with pytest.raises(InputError, match="--until"):
        parse_until("yesterday")


def test_bad_max_records_exits_2():
    with pytest.raises(SystemExit) as exit_info:
        main(["replicate", "x.properties", "--flow", "a->b", "--max-records", "ten"])
    assert exit_info.value.code == 2


@pytest.mark.parametrize(
    ("flags", "named"),
    [
        (["--topics", "(bad"], "--topics"),
        (["--until", "soon"], "--until"),
        (["--start-from", "2024-13-45"], "--start-from"),
    ],
)
def test_bad_replicate_flags_exit_2_naming_the_flag(flags, named, capsys):
    assert main(["replicate", "x.properties", "--flow", "a->b", *flags]) == 2
    assert named in capsys.readouterr().err


@pytest.mark.parametrize(
    ("flags", "named"),
    [
        (["--for", "5m"], "--for"),
        (["--continuous", "--for", "soon"], "--for"),
        (["--continuous", "--dry-run"], "--dry-run"),
    ],
)
def test_continuous_flags_are_checked_before_anything_runs(flags, named, capsys):
    try:
        code = main(["replicate", "x.properties", "--flow", "a->b", *flags])
    except SystemExit as exit_info:
        code = exit_info.code
    assert code == 2
    assert named in capsys.readouterr().err
