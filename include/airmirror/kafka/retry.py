"""Kafka requests retried while the cluster answers with transient errors: the one retry policy of airmirror.

Brokers answer "coordinator loading / not coordinator" for a while after they start or restart, and "not
leader" while a leader moves; those errors are not always flagged retriable by the client library, so they
are listed explicitly (:func:`is_transient`).  :func:`retry_transient` sends such a request again every half
second until its deadline.  Any other error, or a transient one past the deadline, becomes a
:class:`~airmirror.errors.ReplicationFailure` naming what was attempted.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

from confluent_kafka import KafkaError, KafkaException

from airmirror.errors import ReplicationFailure

T = TypeVar("T")
RETRY_PAUSE_S = 0.5

TRANSIENT_CODES = frozenset(
    {
        KafkaError.NOT_COORDINATOR,
        KafkaError.COORDINATOR_LOAD_IN_PROGRESS,
        KafkaError.COORDINATOR_NOT_AVAILABLE,
        KafkaError.UNSTABLE_OFFSET_COMMIT,
        KafkaError.REQUEST_TIMED_OUT,
        KafkaError.NOT_LEADER_FOR_PARTITION,
        KafkaError.LEADER_NOT_AVAILABLE,
        KafkaError._TIMED_OUT,
        KafkaError._TRANSPORT,
        KafkaError._ALL_BROKERS_DOWN,
        KafkaError._WAIT_COORD,
    }
)


def is_transient(error: KafkaException) -> bool:
    """True when the same request may succeed if simply sent again."""
    cause = error.args[0] if error.args else None
    return isinstance(cause, KafkaError) and (cause.retriable() or cause.code() in TRANSIENT_CODES)


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
