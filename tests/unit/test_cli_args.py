"""CLI argument parsing that needs no cluster."""

from __future__ import annotations

import pytest

from airmirror.cli import main, parse_until
from airmirror.errors import InputError
from airmirror.replication.spark.session import with_task_retries


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


def test_local_masters_get_task_retries():
    assert with_task_retries("local[*]") == "local[*,4]"
    assert with_task_retries("local[2]") == "local[2,4]"
    assert with_task_retries("local") == "local[1,4]"
    assert with_task_retries("spark://host:7077") == "spark://host:7077"
