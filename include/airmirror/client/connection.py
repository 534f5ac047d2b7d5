"""One cluster as an application's consumer configuration describes it: the replication policy that names its
topics, and the librdkafka settings of the clients that read it.

MM2's ``MirrorClientConfig`` takes the replication policy keys from the same map as the client settings; so does
:meth:`ClusterConnection.of`.  The rest goes to librdkafka unchanged, except that the admin client leaves out
the consumer-only keys (librdkafka would warn about each one).  The settings may hold secrets: a connection's
repr never shows them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka import Consumer
from confluent_kafka.admin import AdminClient

from airmirror.errors import ConfigError
from airmirror.mm2.policy import ReplicationPolicy, load_policy

POLICY_CLASS_KEY = "replication.policy.class"
SEPARATOR_KEY = "replication.policy.separator"
INTERNAL_SEPARATOR_KEY = "replication.policy.internal.topic.separator.enabled"
POLICY_KEYS = (POLICY_CLASS_KEY, SEPARATOR_KEY, INTERNAL_SEPARATOR_KEY)

CONSUMER_ONLY_KEYS = frozenset(
    {
        "group.id",
        "group.instance.id",
        "group.protocol",
        "group.protocol.type",
        "group.remote.assignor",
        "partition.assignment.strategy",
        "session.timeout.ms",
        "heartbeat.interval.ms",
        "coordinator.query.interval.ms",
        "max.poll.interval.ms",
        "enable.auto.commit",
        "auto.commit.enable",
        "auto.commit.interval.ms",
        "enable.auto.offset.store",
        "auto.offset.reset",
        "queued.min.messages",
        "queued.max.messages.kbytes",
        "fetch.wait.max.ms",
        "fetch.queue.backoff.ms",
        "fetch.message.max.bytes",
        "max.partition.fetch.bytes",
        "fetch.max.bytes",
        "fetch.min.bytes",
        "fetch.error.backoff.ms",
        "isolation.level",
        "enable.partition.eof",
        "check.crcs",
        "consume.callback.max.messages",
        "offset.store.method",
        "offset.store.path",
        "offset.store.sync.interval.ms",
        "on_commit",
    }
)
"""librdkafka's consumer-scope keys (and confluent-kafka's ``on_commit``): an admin client leaves them out."""

READER_GROUP = "airmirror-client"
"""The ``group.id`` of the checkpoints reader when the configuration names none; it only assigns, never commits."""


@dataclass(frozen=True)
class ClusterConnection:
    """The cluster ``consumer_config`` connects to, with the replication policy its topics are named by."""

    policy: ReplicationPolicy
    client_config: Mapping[str, Any] = field(repr=False)

    @classmethod
    def of(cls, consumer_config: Mapping[str, Any]) -> ClusterConnection:
        """Split ``consumer_config`` into the policy keys (MM2's defaults when absent) and librdkafka's settings.
        A bad policy key raises :class:`~airmirror.errors.ConfigError` naming it."""
        internal = consumer_config.get(INTERNAL_SEPARATOR_KEY, True)
        if isinstance(internal, str) and internal.strip().lower() in ("true", "false"):
            internal = internal.strip().lower() == "true"
        if not isinstance(internal, bool):
            raise ConfigError(f"expected true or false, got {internal!r}", key=INTERNAL_SEPARATOR_KEY)
        separator = str(consumer_config.get(SEPARATOR_KEY, "."))
        if not separator:
            raise ConfigError("the separator must not be empty", key=SEPARATOR_KEY)
        policy = load_policy(
            str(consumer_config.get(POLICY_CLASS_KEY, "DefaultReplicationPolicy")),
            separator,
            internal_topic_separator_enabled=internal,
        )
        client = {key: value for key, value in consumer_config.items() if key not in POLICY_KEYS}
        if "bootstrap.servers" not in client and "metadata.broker.list" not in client:
            raise ConfigError("the consumer configuration names no cluster", key="bootstrap.servers")
        return cls(policy, client)

    @property
    def cluster(self) -> str:
        """The cluster as its bootstrap servers name it, for messages."""
        return str(self.client_config.get("bootstrap.servers") or self.client_config.get("metadata.broker.list"))

    @property
    def admin_config(self) -> dict[str, Any]:
        """The settings of an admin client of the cluster: the consumer-only keys left out."""
        return {k: v for k, v in self.client_config.items() if k not in CONSUMER_ONLY_KEYS}

    def admin(self) -> AdminClient:
        """An admin client of the cluster."""
        return AdminClient(self.admin_config)

    def reader(self) -> Consumer:
        """A consumer that reads what transactions committed, assigns partitions itself and never commits."""
        settings = {
            "group.id": READER_GROUP,
            **self.client_config,
            "enable.auto.commit": False,
            "enable.auto.offset.store": False,
            "enable.partition.eof": True,
            "isolation.level": "read_committed",
        }
        return Consumer(settings)

    def topics(self, timeout_s: float) -> set[str]:
        """Every topic of the cluster but Kafka's internal ones (``__*``), as Kafka's ``listTopics`` returns them."""
        metadata = self.admin().list_topics(timeout=timeout_s)
        return {name for name in metadata.topics if not name.startswith("__")}
