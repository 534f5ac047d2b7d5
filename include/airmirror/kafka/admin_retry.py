"""Kafka requests retried while the cluster answers with transient errors.

A coordinator that is still loading, a first group lookup answered ``NOT_COORDINATOR``, a leader moving:
such answers (see :func:`airmirror.kafka.retry.is_transient`) are retried every half second until the
deadline.  Any other error, or a transient one past the deadline, becomes a
:class:`~airmirror.errors.ReplicationFailure` naming what was attempted.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

from confluent_kafka import KafkaException

from airmirror.errors import ReplicationFailure
from airmirror.kafka.retry import is_transient

T = TypeVar("T")
RETRY_PAUSE_S = 0.5


def retry_transient(call: Callable[[], T], what: str, timeout: float = 60.0) -> T:
    """Return ``call()``, retrying transient Kafka errors for up to ``timeout`` seconds; ``what`` names the
    request in the error message ("list the consumer groups of cluster a")."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            return call()
        except KafkaException as error:
            if not is_transient(error) or time.monotonic() > deadline:
                raise ReplicationFailure(f"cannot {what}: {error}") from error
            time.sleep(RETRY_PAUSE_S)
