"""Stopping a process group the dev tools, tests or benchmarks started (``start_new_session=True``)."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from typing import AnyStr

TERM_GRACE_S = 30.0
"""How long a leader has to exit after SIGTERM before it gets SIGKILL."""


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
