"""airmirror's failover client: MM2's ``RemoteClusterUtils`` for Python applications.

An application that fails over from a lost cluster to its replica reads, on the cluster it moves to, what the
replication wrote there: checkpoints of its consumer group and heartbeats.  These functions read them as MM2's
Java client does, from checkpoints written by airmirror or by MM2 alike, with nothing but the cluster:

- :func:`translate_offsets` -- a group's offsets on this cluster, from the checkpoints of ``remote_cluster_alias``;
- :func:`fail_over` -- commit those offsets to the group on this cluster, only forward, never while it runs;
- :func:`upstream_clusters`, :func:`replication_hops`, :func:`heartbeat_topics`, :func:`checkpoint_topics`.

Each takes ``consumer_config``, a confluent-kafka consumer configuration of the cluster the application connects
to (librdkafka keys), plus MM2's ``replication.policy.class``, ``replication.policy.separator`` and
``replication.policy.internal.topic.separator.enabled`` when the flow does not use MM2's defaults.

The package imports confluent-kafka and airmirror's MM2 contract (:mod:`airmirror.mm2`) only: never PySpark,
Spark, Airflow, SQLAlchemy or the metadata DB.
"""

from airmirror.client.connection import ClusterConnection
from airmirror.client.failover import GroupActive, fail_over
from airmirror.client.remote_cluster_utils import (
    OffsetAndMetadata,
    checkpoint_topics,
    heartbeat_topics,
    replication_hops,
    translate_offsets,
    upstream_clusters,
)

__all__ = [
    "ClusterConnection",
    "GroupActive",
    "OffsetAndMetadata",
    "checkpoint_topics",
    "fail_over",
    "heartbeat_topics",
    "replication_hops",
    "translate_offsets",
    "upstream_clusters",
]
