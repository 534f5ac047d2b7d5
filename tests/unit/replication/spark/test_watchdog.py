"""The copy task's hard deadline: a block that outlives it ends the worker; one that ends in time costs no thread."""

from __future__ import annotations

import subprocess
import sys
import threading

from airmirror.replication.spark import watchdog
from airmirror.replication.spark.watchdog import hard_deadline

STUCK = """
import time
from airmirror.replication.spark import watchdog
watchdog.HARD_DEADLINE_GRACE_S, watchdog.WATCHDOG_TICK_S = 0.2, 0.05
with watchdog.hard_deadline(0.1, "a commit of task-0"):
    time.sleep(30)
print("not reached")
"""


def test_a_block_stuck_past_its_deadline_ends_the_worker_naming_the_call() -> None:
    ended = subprocess.run([sys.executable, "-c", STUCK], capture_output=True, text=True, timeout=60)
    assert ended.returncode == 70
    assert "a commit of task-0 is stuck" in ended.stderr and "not reached" not in ended.stdout


def test_blocks_that_end_in_time_share_one_watchdog_thread_and_leave_no_deadline() -> None:
    for _ in range(100):
        with hard_deadline(60, "a commit"):
            pass
    watchers = [t for t in threading.enumerate() if t.name == "airmirror-watchdog"]
    assert len(watchers) == 1
    assert watchdog._WATCHDOG._deadlines == {}
