"""A copy task's remote topics: checked while its producer cannot deliver to them, and their incarnations checked
before every chunk that wrote records to them commits.

librdkafka keeps the records of a partition whose topic was deleted queued until ``message.timeout.ms`` (five
minutes by default) before it reports them failed, and a producer never creates a topic by writing to it
(:data:`~airmirror.kafka.clients.NO_TOPIC_CREATION`): a chunk writing to a deleted remote topic would hold the whole
task, every other partition of it included, for that long.  So while a task waits on its producer (a chunk's flush,
a full queue), :class:`RemoteTopicCheck` asks the target cluster's metadata, through the producer's own connections,
once the wait has lasted :data:`REMOTE_CHECK_S` and then every :data:`REMOTE_CHECK_S`.  A remote topic the cluster
no longer lists fails the task at once with a :class:`~airmirror.errors.ReplicationFailure` naming it: the open
chunk is aborted, so nothing of it is committed, and the run's next round stops the topic
(:mod:`airmirror.replication.incarnations`) and copies the other topics on.

librdkafka writes by topic name, so a remote topic deleted and created again under its name takes a task's records as
if nothing happened, and the transaction's commit, sent by name too, makes them visible there.
:class:`RemoteIncarnations` asks the target cluster for the ids of the remote topics it is given (one metadata request
for all of them, through an admin client of the task's own, made at the first check) and fails the task with a
:class:`~airmirror.errors.ReplicationFailure` naming each topic whose id is not the one the driver found for the job
(``RangeTask.remote_topic_id``): the open chunk is aborted, and the next round stops the topic.  What this cannot
see: a topic recreated in the milliseconds between the check and the commit's markers.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping

from confluent_kafka import KafkaError, Producer
from confluent_kafka.admin import AdminClient

from airmirror.errors import ReplicationFailure
from airmirror.kafka.clients import ClientConfig
from airmirror.kafka.topic_ids import topic_ids

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


class RemoteIncarnations:
    """The incarnations a copy task's remote topics must be (``expected``: topic to id, as the driver found them;
    see the module docstring)."""

    def __init__(self, admin_config: ClientConfig, expected: Mapping[str, str | None], flow: str) -> None:
        self.admin_config, self.expected, self.flow = admin_config, dict(expected), flow
        self.admin: AdminClient | None = None

    def verify(self, topics: Iterable[str]) -> None:
        """Raise naming each of ``topics`` whose id on the target is not the expected one (or that is gone)."""
        known = sorted({topic for topic in topics if self.expected.get(topic) is not None})
        if not known:
            return
        if self.admin is None:
            self.admin = AdminClient(dict(self.admin_config))
        found = topic_ids(self.admin, known)
        changed = [topic for topic in known if found[topic] != self.expected[topic]]
        if changed:
            raise ReplicationFailure(
                "; ".join(
                    f"remote topic {topic} of flow {self.flow} was "
                    + ("deleted" if found[topic] is None else "recreated")
                    + f" on the target while a copy task wrote to it (topic id {self.expected[topic]} -> "
                    f"{found[topic] or 'none'})"
                    for topic in changed
                )
                + ": nothing of the open chunk is committed, and the next round stops the topic "
                "(see `airmirror status`)"
            )
