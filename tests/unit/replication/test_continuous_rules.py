"""The pure parts of continuous replication: options of later batches, the retry budget, a stream's topic sync
meeting a lost lease, and signal handling
(real signals sent to this process; the second-signal exit is driven end to end in
tests/integration/test_continuous.py)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import pytest

from airmirror.errors import ReplicationFailure
from airmirror.kafka.retry import RETRY_PAUSE_S
from airmirror.replication import continuous
from airmirror.replication.continuous import (
    RETRY_PAUSE_MAX_S,
    RETRY_ROUNDS,
    RETRY_WINDOW_S,
    Retries,
    StopOnSignals,
    TopicSync,
    from_the_cursors,
)
from airmirror.replication.options import BatchOptions
from airmirror.store import FlowLeaseLostError


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


class Clock:
    """Seconds that pass only when the test says so."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_the_retry_budget_counts_failures_in_a_row_not_the_runs_age():
    clock, error = Clock(), ReplicationFailure("broker down")
    retries = Retries(clock)
    retries.failed(error)
    clock.now += 400  # a stream round that recorded copies for 400 s, then failed
    assert retries.failed(error, progressed=True) == RETRY_PAUSE_S, "a round that made progress starts a new row"
    assert retries.row == 1
    clock.now += 400  # one that failed without progress: two in a row are not enough to end the run
    retries.failed(error)
    assert retries.row == 2


def test_a_row_ends_the_run_after_enough_failures_over_the_window():
    clock, error = Clock(), ReplicationFailure("broker down")
    retries = Retries(clock)
    pauses = []
    for _ in range(RETRY_ROUNDS - 1):
        pauses.append(retries.failed(error))
        clock.now += RETRY_WINDOW_S  # long failures: the window alone does not end the run
    assert pauses == [min(RETRY_PAUSE_S * 2**n, RETRY_PAUSE_MAX_S) for n in range(RETRY_ROUNDS - 1)]
    with pytest.raises(ReplicationFailure):
        retries.failed(error)


def test_quick_failures_end_the_run_only_once_the_window_has_passed():
    clock, error = Clock(), ReplicationFailure("connection refused")
    retries = Retries(clock)
    for _ in range(3 * RETRY_ROUNDS):
        clock.now += 1
        retries.failed(error)
    retries.succeeded()
    assert (retries.row, retries.pause) == (0, RETRY_PAUSE_S)
    clock.now += RETRY_WINDOW_S
    retries.failed(error)


def test_a_streams_topic_sync_raises_a_lost_lease_and_logs_any_other_failure(monkeypatch: pytest.MonkeyPatch):
    """Rule 2: the loss of the lease ends the stream; any other failure of its topic sync leaves it streaming."""
    failures: list[Exception] = [ReplicationFailure("broker down"), FlowLeaseLostError("a->b", "run 1", None)]

    def failing_sync(*_: object) -> object:
        raise failures.pop(0)

    monkeypatch.setattr(continuous, "sync_flow_topics", failing_sync)
    topics = TopicSync(None, None, BatchOptions())  # type: ignore[arg-type]  # the sync stand-in needs neither

    assert topics.changed() is False
    topics._synced_at = float("-inf")  # due again
    with pytest.raises(FlowLeaseLostError, match="lost its lease"):
        topics.changed()
