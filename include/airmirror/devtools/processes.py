"""Stopping a process group the dev tools, tests or benchmarks started (``start_new_session=True``), and freezing a
process the way a stopped VM freezes it."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import time
from pathlib import Path
from typing import AnyStr

TERM_GRACE_S = 30.0
"""How long a leader has to exit after SIGTERM before it gets SIGKILL."""
FREEZE_TRIES = 100
"""How many times :func:`freeze_outside_sqlite_writes` stops a process before giving up."""


def stop_process_group(process: subprocess.Popen[AnyStr], linger_s: float = 0.0) -> None:
    """Stop the process group led by ``process``.

    A leader still running gets SIGTERM (SIGKILL after :data:`TERM_GRACE_S`).  Processes left in the group after
    the leader exited (a Spark JVM finishing its own shutdown) get ``linger_s`` to exit by themselves, then SIGKILL.
    """
    if process.poll() is None:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(TERM_GRACE_S)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
    deadline = time.monotonic() + linger_s
    try:
        while time.monotonic() < deadline:
            os.killpg(process.pid, 0)
            time.sleep(0.1)
        os.killpg(process.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def freeze_outside_sqlite_writes(pid: int, database: Path, *, group: bool = False) -> None:
    """Stop ``pid`` (SIGSTOP; with ``group``, its whole process group) at a moment it holds no write transaction of
    the SQLite ``database``; SIGCONT thaws it.

    A process frozen inside a SQLite write transaction holds the database's write lock until it thaws, and SQLite
    cannot break that lock (``airmirror.store.engine`` says so, and why such a store belongs on PostgreSQL); a fault
    about what a frozen driver does, not about SQLite, freezes it between its writes, where its transactions leave it
    most of the time.  The check takes the write lock itself for a moment.  Raises ``TimeoutError`` after
    :data:`FREEZE_TRIES` stops that each found the lock held."""
    send = os.killpg if group else os.kill
    for _ in range(FREEZE_TRIES):
        send(pid, signal.SIGSTOP)
        connection = sqlite3.connect(database, timeout=0, isolation_level=None)
        try:
            connection.execute("BEGIN IMMEDIATE")
            connection.execute("ROLLBACK")
            return
        except sqlite3.OperationalError:
            send(pid, signal.SIGCONT)
            time.sleep(0.05)
        finally:
            connection.close()
    raise TimeoutError(f"process {pid} held the write lock of {database} at each of {FREEZE_TRIES} stops")
