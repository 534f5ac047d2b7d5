"""Which Kafka errors are worth retrying: transient coordinator and transport states.

Brokers answer "coordinator loading / not coordinator" for a while after they start or restart; those
errors are not always flagged retriable by the client library, so they are listed explicitly.
"""

from __future__ import annotations

from confluent_kafka import KafkaError, KafkaException

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
