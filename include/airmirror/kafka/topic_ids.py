"""Topic ids: which incarnation of a topic a cluster holds (Kafka's topic id, KIP-516), asked by name.

A topic deleted and created again under its name has another id; airmirror records the ids of the topics it copies
between (:mod:`airmirror.replication.incarnations`) and compares them.  This module imports only the Kafka client
and airmirror's errors, so a copy task's worker can check ids without the driver's configuration code.
"""

from __future__ import annotations

import time
from collections.abc import Iterable

from confluent_kafka import KafkaError, KafkaException, TopicCollection
from confluent_kafka.admin import AdminClient

from airmirror.errors import ReplicationFailure
from airmirror.kafka.clients import NEW_TOPIC_WAIT_S, REQUEST_TIMEOUT_S


def topic_ids(admin: AdminClient, topics: Iterable[str]) -> dict[str, str | None]:
    """Each topic's id (Kafka's base64 form, as ``kafka-topics --describe`` prints it); ``None`` for a
    topic that does not exist."""
    names = sorted(set(topics))
    if not names:
        return {}
    futures = admin.describe_topics(TopicCollection(names), request_timeout=REQUEST_TIMEOUT_S)
    ids: dict[str, str | None] = {}
    for name, future in futures.items():
        try:
            ids[name] = str(future.result().topic_id)
        except KafkaException as error:
            if error.args[0].code() != KafkaError.UNKNOWN_TOPIC_OR_PART:
                raise ReplicationFailure(f"cannot describe topic {name}: {error}") from error
            ids[name] = None
    return ids


def settled_topic_ids(
    admin: AdminClient, topics: Iterable[str], wait_s: float = NEW_TOPIC_WAIT_S
) -> dict[str, str | None]:
    """Each topic's id, as :func:`topic_ids`; a topic not found is asked for again every half second for up to
    ``wait_s`` (one created a moment ago may not be known to every broker yet), and is ``None`` only after that."""
    ids = topic_ids(admin, topics)
    deadline = time.monotonic() + wait_s
    while (
        missing := sorted(name for name, topic_id in ids.items() if topic_id is None)
    ) and time.monotonic() < deadline:
        time.sleep(0.5)
        ids.update(topic_ids(admin, missing))
    return ids
