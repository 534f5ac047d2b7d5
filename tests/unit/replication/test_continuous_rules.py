"""The pure parts of continuous replication: options of later batches, and signal handling (real signals sent to
this process; the second-signal exit is driven end to end in tests/integration/test_continuous.py)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

from airmirror.replication.continuous import StopOnSignals, from_the_cursors
from airmirror.replication.options import BatchOptions


def test_start_from_applies_to_the_first_batch_only():
    first = BatchOptions(
        max_records=10, until_ms=5, topics_regex="o.*", start_from="timestamp", start_ms=7, reset_cursor=True
    )
    later = from_the_cursors(first)
    assert (later.start_from, later.start_ms, later.reset_cursor) == ("stored", None, False)
    assert (later.max_records, later.until_ms, later.topics_regex) == (10, 5, "o.*")


def test_the_first_signal_asks_to_stop_and_the_handlers_are_restored_after():
    before = signal.getsignal(signal.SIGTERM)
    with StopOnSignals() as signals:
        assert not signals.event.is_set()
        os.kill(os.getpid(), signal.SIGTERM)
        assert signals.event.wait(5)
    assert signal.getsignal(signal.SIGTERM) is before


def test_a_second_signal_ends_the_process_at_once():
    script = (
        "import os, signal, time\n"
        "from airmirror.replication.continuous import StopOnSignals\n"
        "with StopOnSignals() as s:\n"
        "    os.kill(os.getpid(), signal.SIGINT)\n"
        "    s.event.wait(5)\n"
        "    os.kill(os.getpid(), signal.SIGINT)\n"
        "    time.sleep(30)\n"
    )
    run = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert run.returncode == 128 + signal.SIGINT, run.stderr
