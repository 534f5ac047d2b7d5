"""A hard deadline on a copy task's transactional calls, kept by one watchdog thread per Python worker.

After a transaction or group coordinator restarts, librdkafka's transactional calls have been seen to block far past
their own timeout (``send_offsets_to_transaction`` waits for a coordinator it never looks up again), and Spark never
times a task out, so one stuck call would hold the batch forever.  Contract:

* :func:`hard_deadline` ends this process (exit code 70, a line on stderr naming the call) when its block is still
  running :data:`HARD_DEADLINE_GRACE_S` past ``seconds``.  Exiting the Python worker fails the Spark task; its retry's
  ``init_transactions()`` fences the stuck producer and continues after the last committed chunk (the rules of
  :mod:`airmirror.replication.spark.task_writer`), as after any killed worker.
* Entering and leaving a block costs a lock and a dict entry: the watchdog thread is started once per process (again
  in a forked child, where it does not survive), and it looks at the deadlines every :data:`WATCHDOG_TICK_S`, so a
  chunk of a live stream never waits for a thread to start.
* Used only inside copy tasks.
"""

from __future__ import annotations

import itertools
import os
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

HARD_DEADLINE_GRACE_S = 10.0
WATCHDOG_TICK_S = 1.0


class _Watchdog:
    """The deadlines of the blocks running now, and the thread that checks them."""

    def __init__(self) -> None:
        self._deadlines: dict[int, tuple[float, str]] = {}
        self._tokens = itertools.count()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None

    def watch(self, seconds: float, what: str) -> int:
        """Note a block that must end within ``seconds`` past now plus the grace; returns its token."""
        token = next(self._tokens)
        with self._lock:
            self._deadlines[token] = (time.monotonic() + seconds + HARD_DEADLINE_GRACE_S, what)
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._run, name="airmirror-watchdog", daemon=True)
                self._thread.start()
        return token

    def release(self, token: int) -> None:
        with self._lock:
            self._deadlines.pop(token, None)

    def _run(self) -> None:
        while True:
            time.sleep(WATCHDOG_TICK_S)
            now = time.monotonic()
            with self._lock:
                stuck = [(deadline, what) for deadline, what in self._deadlines.values() if deadline <= now]
            if stuck:
                what = stuck[0][1]
                print(f"airmirror: {what} is stuck past its deadline; ending the worker", file=sys.stderr, flush=True)
                os._exit(70)


_WATCHDOG = _Watchdog()


@contextmanager
def hard_deadline(seconds: float, what: str) -> Iterator[None]:
    """End this process if the block is still running :data:`HARD_DEADLINE_GRACE_S` after ``seconds`` (see the
    module docstring)."""
    token = _WATCHDOG.watch(seconds, what)
    try:
        yield
    finally:
        _WATCHDOG.release(token)
