"""Fencing on every write (issue: never twice, never stuck), on real clusters, Spark and the metadata DB.

A run frozen whole (driver, Spark JVM and Python workers: a stopped VM) right after it stored a batch, past its
lease; a second run with more slots takes the flow over, resumes that batch with more copy tasks and commits it; then
the first run is thawed.  Whatever the first run was doing when it froze (superseding the job before the copy,
waiting for its Spark session, copying), it writes no row to the metadata DB after the takeover, commits nothing to
the target, and stops saying it lost its lease; the next run goes on by itself, and the target holds every source
record once.
"""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from airmirror.devtools.processes import freeze_outside_sqlite_writes
from airmirror.store.flow_lease import DEFAULT_LEASE_TTL_SECONDS
from tests.cli_helpers import airmirror_process
from tests.conftest import write_config
from tests.kafka_helpers import create_topic, produce, records_of, sample_records
from tests.polling import wait_until

pytestmark = [pytest.mark.integration, pytest.mark.slow]

PARTITIONS = 8
RECORDS = 3_000
"""Records per partition: enough that each run's copy job takes a while."""
BOUNDED_BATCHES = ("--continuous", "--max-records", str(RECORDS // 3))
"""The first run's batches: bounded, back to back."""


def db_rows(database: Path) -> dict[str, list[tuple[object, ...]]]:
    """Every row of every table of the metadata DB, in a stable order."""
    with sqlite3.connect(f"file:{database}?mode=ro", uri=True) as connection:
        tables = [name for (name,) in connection.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
        return {table: sorted(connection.execute(f"SELECT * FROM {table}").fetchall(), key=repr) for table in tables}


def batch_row(database: Path, where: str) -> tuple[int, str, int | None] | None:
    """The id, state and copy task count of the newest batch ``where`` says, ``None`` when there is none (or no
    DB yet)."""
    if not database.exists():
        return None
    try:
        with sqlite3.connect(f"file:{database}?mode=ro", uri=True) as connection:
            row = connection.execute(
                f"SELECT id, state, copy_tasks FROM airmirror_batches WHERE {where} ORDER BY id DESC LIMIT 1"
            ).fetchone()
    except sqlite3.OperationalError:  # not migrated yet, or locked for a moment
        return None
    return None if row is None else (row[0], row[1], row[2])


@pytest.mark.proves("task_writer rule 3", "job_driver rule 1")
def test_a_frozen_run_thawed_after_a_wider_run_took_its_batch_over_writes_nothing_and_nothing_twice(
    clusters, prefix, tmp_path
):
    a, b = clusters["a"].bootstrap, clusters["b"].bootstrap
    topic = f"{prefix}.fenced"
    create_topic(a, topic, PARTITIONS)
    for partition in range(PARTITIONS):
        produce(a, topic, partition, sample_records(RECORDS, prefix=f"p{partition}"))
    body = f"a->b.enabled = true\ntopics = {prefix}.*\n"
    narrow = write_config(tmp_path / "narrow.properties", clusters, body + "airmirror.spark.master = local[2]")
    wide = write_config(tmp_path / "wide.properties", clusters, body + "airmirror.spark.master = local[8]")
    database = tmp_path / "metadata.db"
    with (tmp_path / "first.log").open("w") as output:
        first = subprocess.Popen(
            [sys.executable, "-m", "airmirror.cli", "replicate", str(narrow), "--flow", "a->b", *BOUNDED_BATCHES],
            stdout=output,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        wait_until(lambda: batch_row(database, "state = 'RUNNING'") is not None, 300, "the first run's batch")
        freeze_outside_sqlite_writes(first.pid, database, group=True)  # the whole run: driver, Spark, workers
        frozen = batch_row(database, "state = 'RUNNING'")
        assert frozen is not None
        time.sleep(DEFAULT_LEASE_TTL_SECONDS + 5)

        second = airmirror_process("replicate", str(wide), "--flow", "a->b")

        assert second.returncode == 0, second.stderr[-4000:]
        assert batch_row(database, f"id = {frozen[0]}") == (frozen[0], "COMMITTED", PARTITIONS)  # resumed, wider
        after_takeover = db_rows(database)
    finally:
        os.killpg(first.pid, signal.SIGCONT)
        try:
            first.wait(timeout=300)
        finally:
            if first.poll() is None:
                os.killpg(first.pid, signal.SIGKILL)
                first.wait()

    log = (tmp_path / "first.log").read_text()
    assert first.returncode == 1 and "lost its lease" in log, log[-4000:]
    assert db_rows(database) == after_takeover  # the thawed run wrote no row
    last = airmirror_process("replicate", str(wide), "--flow", "a->b")
    assert last.returncode == 0, last.stderr[-4000:]
    for partition in range(PARTITIONS):
        assert records_of(b, f"a.{topic}", partition) == records_of(a, topic, partition)
