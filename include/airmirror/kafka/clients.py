"""The one place that builds a flow's Kafka admin clients and its driver's plain producers, and the request
timeout they share.

Settings come from the flow (:meth:`~airmirror.config.FlowConfig.client_config`: MM2's client keys translated
for librdkafka, secrets resolved).  Producers and consumers of the copy job are built in
:mod:`airmirror.replication.spark` from settings the driver hands each task, since executors have no config.

Inside :func:`shared_clients` (a continuous run, a batch, a DAG task) there is one admin client per flow, cluster
and access scope, and one idempotent producer per flow and cluster (:func:`producer_client`: heartbeats,
checkpoints, offset syncs, batch-log tombstones; a stream writes those twice a second), built on first use and
dropped when the block ends; outside it every call builds its own.
A client holds no reference to itself (its error callback keeps the error in a separate object), so the last
reference dropped frees it, its threads and its broker connections at once, without waiting for a garbage
collection.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeAlias

from confluent_kafka import KafkaError, KafkaException, Producer
from confluent_kafka.admin import AdminClient, ClusterMetadata

from airmirror.errors import ReplicationFailure
from airmirror.kafka.authorization import AccessScope, access_scope
from airmirror.kafka.client_log import logged

if TYPE_CHECKING:
    from airmirror.config import FlowConfig

ClientConfig: TypeAlias = Mapping[str, str | int]
"""A client's librdkafka settings as they travel to Spark executors (pickled): plain strings and integers, no
callbacks (a task adds its own)."""
REQUEST_TIMEOUT_S = 30.0
"""How long one admin or metadata request may take before it fails (every admin call of airmirror), unless the
cluster's admin ``request.timeout.ms`` bounds :func:`cluster_metadata`."""
NEW_TOPIC_WAIT_S = 60.0
"""How long a call about a topic this run's topic sync may have created a moment ago (a remote topic, the batch
log) is asked again while a broker does not know the topic or its leader yet, before it fails: a broker bringing
up the remote topics of a whole cluster at once (thousands of partitions) may take tens of seconds on a busy
machine."""
METADATA_SLICE_S = 1.0
"""How long a metadata request waits before :func:`cluster_metadata` checks for a refused login and asks again."""
REFUSED_LOGIN = frozenset({KafkaError._AUTHENTICATION, KafkaError._SSL})
"""Client errors no retry cures: failed SASL authentication, failed TLS handshake (an untrusted certificate)."""


NO_TOPIC_CREATION = {"allow.auto.create.topics": False}
"""Set on every airmirror producer and admin client (a producer inside), whatever the flow's settings: librdkafka's
producers otherwise ask the broker to create a topic they write to or ask about (``auto.create.topics.enable``),
with the broker's defaults; airmirror creates every topic it writes itself, and a remote topic deleted under a copy
must stay deleted."""


class ClusterAdmin(AdminClient):
    """An admin client of cluster ``alias`` that keeps the last client-level error librdkafka reported for it (a
    failed SASL authentication, a failed TLS handshake, a refused connection), so that a request the cluster
    never answered can say which cluster it could not reach, and why (:meth:`unreachable`).  ``access`` names
    the ACL behind a refused request (:mod:`airmirror.kafka.authorization`).  ``request_timeout_s`` is the
    cluster's admin ``request.timeout.ms`` (MM2's key, librdkafka's ``socket.timeout.ms``) if set, else
    :data:`REQUEST_TIMEOUT_S`."""

    def __init__(self, alias: str, config: dict[str, Any], access: AccessScope | None = None) -> None:
        self.alias = alias
        self.access = access
        self.bootstrap = str(config.get("bootstrap.servers", ""))
        self.request_timeout_s = (
            int(config["socket.timeout.ms"]) / 1000 if "socket.timeout.ms" in config else REQUEST_TIMEOUT_S
        )
        self._errors = ClientErrors()
        # confluent-kafka's AdminClient annotates its config values as str | int | float | bool, but its
        # "error_cb" takes a callable
        super().__init__(logged({**config, "error_cb": self._errors.remember, **NO_TOPIC_CREATION}))

    @property
    def last_error(self) -> KafkaError | None:
        return self._errors.last

    def refused_login(self) -> bool:
        """True once the cluster refused the login or the TLS handshake (see :data:`REFUSED_LOGIN`)."""
        self.poll(0)  # serve the error events queued while a request waited
        return self.last_error is not None and self.last_error.code() in REFUSED_LOGIN

    def unreachable(self, error: KafkaException) -> ReplicationFailure:
        """The failure to raise for ``error``: the cluster, its bootstrap servers and librdkafka's own cause."""
        cause = self.last_error.str() if self.last_error is not None else str(error)
        return ReplicationFailure(f"cannot reach cluster '{self.alias}' ({self.bootstrap}): {cause}")


class ClientErrors:
    """The last client-level error librdkafka reported for one client; kept apart from the client so that its
    callback does not make the client refer to itself."""

    def __init__(self) -> None:
        self.last: KafkaError | None = None

    def remember(self, error: KafkaError) -> None:
        """Keep ``error`` unless it is the summary "all brokers are down" that follows a cause already kept."""
        if error.code() != KafkaError._ALL_BROKERS_DOWN or self.last is None:
            self.last = error


@dataclass
class _SharedClients:
    """The clients of one :func:`shared_clients` block."""

    admins: dict[tuple[str, str, bool], ClusterAdmin] = field(default_factory=dict)
    producers: dict[tuple[str, str], Producer] = field(default_factory=dict)


_shared: ContextVar[_SharedClients | None] = ContextVar("airmirror_shared_clients", default=None)


@contextmanager
def shared_clients() -> Iterator[None]:
    """Within the block, :func:`admin_client` returns one client per flow, cluster and access scope, and
    :func:`producer_client` one producer per flow and cluster (see the module docstring).  Nested blocks share
    the outermost one's clients."""
    if _shared.get() is not None:
        yield
        return
    token = _shared.set(_SharedClients())
    try:
        yield
    finally:
        _shared.reset(token)


def admin_client(flow: FlowConfig, alias: str, *, takeover: bool = False) -> ClusterAdmin:
    """An admin client of cluster ``alias`` with the flow's settings for it (its refusals name the takeover's
    ACLs too with ``takeover``, see :func:`~airmirror.kafka.authorization.access_scope`)."""
    shared = _shared.get()
    clients = shared.admins if shared is not None else None
    key = (flow.name, alias, takeover)
    if clients is None or key not in clients:
        client = ClusterAdmin(alias, flow.client_config(alias, "admin"), access_scope(flow, alias, takeover=takeover))
        if clients is None:
            return client
        clients[key] = client
    return clients[key]


def producer_client(flow: FlowConfig, alias: str, queue_records: int) -> Producer:
    """An idempotent producer of cluster ``alias`` with the flow's producer settings (its queue holds at most
    ``queue_records`` unless they say otherwise) that never makes a broker create a topic it writes to
    (:data:`NO_TOPIC_CREATION`).  Callers flush what they produce before they return and take each record's
    outcome from its own delivery callback, so that one producer serves them all."""
    shared = _shared.get()
    key = (flow.name, alias)
    if shared is None or key not in shared.producers:
        producer = Producer(
            logged(
                {
                    "queue.buffering.max.messages": queue_records,
                    **flow.client_config(alias, "producer"),
                    "enable.idempotence": True,
                    **NO_TOPIC_CREATION,
                }
            )
        )
        if shared is None:
            return producer
        shared.producers[key] = producer
    return shared.producers[key]


def warm_producer(flow: FlowConfig, alias: str, queue_records: int) -> None:
    """Create the shared producer of cluster ``alias`` now (as :func:`producer_client` would), so that it
    connects and gets its producer id in librdkafka's threads while the caller does other work; nothing outside
    a :func:`shared_clients` block, where no producer outlives its write."""
    if _shared.get() is not None:
        producer_client(flow, alias, queue_records)


def drop_producer(flow: FlowConfig, alias: str) -> None:
    """Forget the shared producer of cluster ``alias`` (after a failed write: the next one starts afresh)."""
    shared = _shared.get()
    if shared is not None:
        shared.producers.pop((flow.name, alias), None)


def source_admin(flow: FlowConfig) -> ClusterAdmin:
    """An admin client of the flow's source cluster."""
    return admin_client(flow, flow.source)


def target_admin(flow: FlowConfig) -> ClusterAdmin:
    """An admin client of the flow's target cluster."""
    return admin_client(flow, flow.target)


def cluster_metadata(admin: ClusterAdmin, topic: str | None = None) -> ClusterMetadata:
    """The cluster's topics (only ``topic`` if given).  A cluster that refuses the login or the TLS handshake
    (wrong credentials, an untrusted certificate) fails at once, as Java clients do; one that does not answer
    within its ``request_timeout_s`` (down, restarting) fails then.  Both raise
    :class:`~airmirror.errors.ReplicationFailure` naming the cluster and the cause
    (:meth:`ClusterAdmin.unreachable`)."""
    deadline = time.monotonic() + admin.request_timeout_s
    while True:
        try:
            return admin.list_topics(topic, timeout=min(METADATA_SLICE_S, max(deadline - time.monotonic(), 0.1)))
        except KafkaException as error:
            if admin.refused_login() or time.monotonic() >= deadline:
                raise admin.unreachable(error) from error
