"""A copy task's remote topics, checked while its producer cannot deliver to them.

librdkafka keeps the records of a partition whose topic was deleted queued until ``message.timeout.ms`` (five
minutes by default) before it reports them failed, and a producer never creates a topic by writing to it
(:data:`~airmirror.kafka.clients.NO_TOPIC_CREATION`): a chunk writing to a deleted remote topic would hold the whole
task, every other partition of it included, for that long.  So while a task waits on its producer (a chunk's flush,
a full queue), :class:`RemoteTopicCheck` asks the target cluster's metadata, through the producer's own connections,
once the wait has lasted :data:`REMOTE_CHECK_S` and then every :data:`REMOTE_CHECK_S`.  A remote topic the cluster
no longer lists fails the task at once with a :class:`~airmirror.errors.ReplicationFailure` naming it: the open
chunk is aborted, so nothing of it is committed, and the run's next round stops the topic
(:mod:`airmirror.replication.incarnations`) and copies the other topics on.
"""

from __future__ import annotations

import time
from collections.abc import Iterable

from confluent_kafka import KafkaError, Producer

from airmirror.errors import ReplicationFailure

REMOTE_CHECK_S = 10.0


class RemoteTopicCheck:
    """The check of one task's remote ``topics`` (see the module docstring); call :meth:`waiting` when a wait
    begins and :meth:`__call__` while it lasts."""

    def __init__(self, producer: Producer, topics: Iterable[str], flow: str) -> None:
        self.producer, self.topics, self.flow = producer, sorted(set(topics)), flow
        self.due = time.monotonic() + REMOTE_CHECK_S

    def waiting(self) -> None:
        """A wait on the producer begins: the first check is due :data:`REMOTE_CHECK_S` from now."""
        self.due = time.monotonic() + REMOTE_CHECK_S

    def __call__(self) -> None:
        """Check, when one is due, that every remote topic still exists; raise naming those that do not."""
        now = time.monotonic()
        if now < self.due:
            return
        self.due = now + REMOTE_CHECK_S
        listed = self.producer.list_topics(timeout=REMOTE_CHECK_S).topics
        gone = [topic for topic in self.topics if topic not in listed or _unknown(listed[topic].error)]
        if gone:
            raise ReplicationFailure(
                f"remote topic {', '.join(gone)} of flow {self.flow} was deleted on the target while a copy task "
                "wrote to it: nothing of the open chunk is committed, and the next round stops the topic (see "
                "`airmirror status`) and copies the others"
            )


def _unknown(error: KafkaError | None) -> bool:
    return error is not None and error.code() == KafkaError.UNKNOWN_TOPIC_OR_PART
