"""Topic creation on a real (single-broker) target: internal topics get their configured replication factor and
``min.insync.replicas``; a factor larger than the cluster is an input error naming the key, for internal and
remote topics alike (one creation path).

Internal topics here get prefixed names, so they stay away from the ``heartbeats`` and checkpoints topics other
tests use on the shared clusters."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient, ConfigEntry, ConfigResource, ConfigSource, ResourceType

from airmirror import names
from airmirror.config import FlowConfig, load_config
from airmirror.errors import ConfigError
from airmirror.kafka.clients import source_admin, target_admin
from airmirror.kafka.topics import COMPACTED, alter_configs, ensure_internal_topic, replicated_topics, sync_topics
from airmirror.replication.pipeline import ensure_batch_log
from airmirror.replication.spark.batch_log import LOG_TOPIC_CONFIG
from tests.conftest import write_config
from tests.kafka_helpers import create_topic, produce, records_of, sample_records
from tests.mirror_helpers import replicate

pytestmark = pytest.mark.integration

INTERNAL_FACTOR_KEYS = [
    "heartbeats.topic.replication.factor",
    "checkpoints.topic.replication.factor",
    "airmirror.batch.log.topic.replication.factor",
]


def flow_of(tmp_path: Path, clusters, prefix: str, extra: str = "") -> FlowConfig:
    config = write_config(tmp_path / "mm2.properties", clusters, f"a->b.enabled = true\ntopics = {prefix}.*\n{extra}")
    return load_config(config).flow("a->b")


def topic_configs(admin: AdminClient, topic: str) -> dict[str, ConfigEntry]:
    resource = ConfigResource(ResourceType.TOPIC, topic)
    return admin.describe_configs([resource], request_timeout=30)[resource].result()


def settled_configs(
    admin: AdminClient, topic: str, expected: dict[str, str], timeout: float = 30
) -> dict[str, ConfigEntry]:
    """The topic's configs once they show ``expected`` (or at ``timeout``): a broker answers describe_configs
    from its metadata cache, which applies an accepted config change a moment later."""
    deadline = time.monotonic() + timeout
    while True:
        configs = topic_configs(admin, topic)
        if (
            all(key in configs and configs[key].value == value for key, value in expected.items())
            or time.monotonic() > deadline
        ):
            return configs
        time.sleep(0.2)


def replica_counts(admin: AdminClient, topic: str, timeout: float = 30) -> list[int]:
    """The replica count of each partition of ``topic``, once the broker's metadata lists its partitions (a topic
    created a moment ago may be listed without them on a loaded machine)."""
    deadline = time.monotonic() + timeout
    while True:
        partitions = admin.list_topics(topic, timeout=30).topics[topic].partitions
        if partitions or time.monotonic() > deadline:
            return [len(partition.replicas) for partition in partitions.values()]
        time.sleep(0.2)


def line_of(config: Path, key: str) -> int:
    lines = config.read_text().splitlines()
    return next(number for number, line in enumerate(lines, 1) if line.split(" = ")[0] == key)


@pytest.mark.parametrize("key", INTERNAL_FACTOR_KEYS)
def test_internal_topic_gets_the_factor_and_min_insync_replicas(clusters, prefix, tmp_path, key):
    flow = flow_of(tmp_path, clusters, prefix)
    admin = target_admin(flow)
    name = f"{prefix}-internal.internal"
    ensure_internal_topic(flow, admin, name, {"cleanup.policy": "delete", "retention.ms": "3600000"}, key)
    assert replica_counts(admin, name) == [1]
    configs = topic_configs(admin, name)
    assert configs["min.insync.replicas"].value == "1"
    assert ConfigSource(configs["min.insync.replicas"].source) == ConfigSource.DYNAMIC_TOPIC_CONFIG
    assert (configs["cleanup.policy"].value, configs["retention.ms"].value) == ("delete", "3600000")


def test_mm2_topics_are_compacted_internal_topics(clusters, prefix, tmp_path):
    flow = flow_of(tmp_path, clusters, prefix)
    name = f"{prefix}-heartbeats"
    ensure_internal_topic(flow, target_admin(flow), name, COMPACTED, "heartbeats.topic.replication.factor")
    admin = target_admin(flow)
    assert replica_counts(admin, name) == [1]
    configs = topic_configs(admin, name)
    assert (configs["cleanup.policy"].value, configs["min.insync.replicas"].value) == ("compact", "1")


def test_broker_default_factor_keeps_broker_defaults(clusters, prefix, tmp_path):
    flow = flow_of(tmp_path, clusters, prefix, "a->b.heartbeats.topic.replication.factor = -1")
    admin = target_admin(flow)
    name = f"{prefix}-default.internal"
    ensure_internal_topic(flow, admin, name, {}, "heartbeats.topic.replication.factor")
    assert replica_counts(admin, name) == [1]
    assert ConfigSource(topic_configs(admin, name)["min.insync.replicas"].source) != ConfigSource.DYNAMIC_TOPIC_CONFIG


@pytest.mark.parametrize("key", INTERNAL_FACTOR_KEYS)
def test_too_large_internal_factor_names_the_key(clusters, prefix, tmp_path, key):
    flow = flow_of(tmp_path, clusters, prefix, f"a->b.{key} = 3")
    admin = target_admin(flow)
    name = f"{prefix}-durable.internal"
    with pytest.raises(ConfigError) as error:
        ensure_internal_topic(flow, admin, name, {}, key)
    assert error.value.exit_code == 2
    assert (error.value.key, error.value.line) == (key, line_of(flow.config_path, f"a->b.{key}"))
    assert "replication factor 3" in str(error.value) and name in str(error.value)
    assert name not in admin.list_topics(timeout=30).topics


def test_too_large_remote_factor_gives_the_same_error(clusters, prefix, tmp_path):
    create_topic(clusters["a"].bootstrap, f"{prefix}.orders")
    flow = flow_of(tmp_path, clusters, prefix, "a->b.replication.factor = 3")
    source = source_admin(flow)
    with pytest.raises(ConfigError) as error:
        sync_topics(flow, source, target_admin(flow), replicated_topics(flow, source))
    assert (error.value.key, error.value.line) == (
        "replication.factor",
        line_of(flow.config_path, "a->b.replication.factor"),
    )
    assert "replication factor 3" in str(error.value) and f"a.{prefix}.orders" in str(error.value)


def test_existing_internal_topic_is_left_as_it_is(clusters, prefix, tmp_path):
    key = "airmirror.batch.log.topic.replication.factor"
    name = f"{prefix}-existing.internal"
    single = flow_of(tmp_path, clusters, prefix)
    ensure_internal_topic(single, target_admin(single), name, {}, key)
    durable = flow_of(tmp_path, clusters, prefix, f"a->b.{key} = 3")
    ensure_internal_topic(durable, target_admin(durable), name, {}, key)
    assert replica_counts(target_admin(durable), name) == [1]


def test_batch_log_created_by_an_earlier_version_becomes_compacted(clusters, prefix, tmp_path):
    """Earlier versions created the batch log with ``cleanup.policy=delete``, which would one day delete
    progress records; topic sync gives an existing batch log the compacted configs."""
    flow = flow_of(tmp_path, clusters, prefix)
    admin = target_admin(flow)
    name = names.batch_log_topic(flow.source)
    ensure_batch_log(flow, admin)
    alter_configs(admin, {name: {"cleanup.policy": "delete", "retention.ms": "1209600000"}})
    assert settled_configs(admin, name, {"cleanup.policy": "delete"})["cleanup.policy"].value == "delete"
    ensure_batch_log(flow, admin)
    configs = settled_configs(admin, name, LOG_TOPIC_CONFIG)
    assert {key: configs[key].value for key in LOG_TOPIC_CONFIG} == LOG_TOPIC_CONFIG


MM2_ONE_BROKER_FACTORS = [  # what MM2's own example file sets for a one-broker cluster; no airmirror key
    "replication.factor = 1",
    "checkpoints.topic.replication.factor = 1",
    "heartbeats.topic.replication.factor = 1",
    "offset-syncs.topic.replication.factor = 1",
    "offset.storage.replication.factor = 1",
    "status.storage.replication.factor = 1",
    "config.storage.replication.factor = 1",
]


def test_an_unmodified_mm2_file_for_one_broker_replicates(clusters, spark, prefix, tmp_path, caplog):
    """The batch log takes MM2's ``offset.storage.replication.factor``: an MM2 file made for one-broker clusters
    replicates as it is, topic ACL sync on (MM2's default) against brokers without an authorizer included (the
    source's DescribeAcls answer SECURITY_DISABLED reaches airmirror as no ACLs: librdkafka drops that error, so
    nothing is created on the target and nothing is logged).  The aliases are new, so the flow gets a batch log
    of its own."""
    source, target = f"{prefix}src", f"{prefix}dst"
    topic = f"{prefix}.orders"
    create_topic(clusters["a"].bootstrap, topic)
    sent = sample_records(5, prefix=prefix)
    produce(clusters["a"].bootstrap, topic, 0, sent)
    config = tmp_path / "mm2.properties"
    config.write_text(
        "\n".join(
            [
                f"clusters = {source}, {target}",
                f"{source}.bootstrap.servers = {clusters['a'].bootstrap}",
                f"{target}.bootstrap.servers = {clusters['b'].bootstrap}",
                *MM2_ONE_BROKER_FACTORS,
                f"{source}->{target}.enabled = true",
                f"topics = {prefix}.*",
                f"airmirror.metadata.db.url = sqlite:///{tmp_path / 'metadata.db'}",
            ]
        )
        + "\n"
    )
    assert load_config(config).flow(f"{source}->{target}").topic_sync.sync_acls_enabled
    with caplog.at_level("WARNING", logger="airmirror"):
        summary = replicate(config, spark, f"{source}->{target}").summary
    assert summary is not None and summary.records == len(sent)
    assert records_of(clusters["b"].bootstrap, f"{source}.{topic}", 0) == sent
    assert replica_counts(
        AdminClient({"bootstrap.servers": clusters["b"].bootstrap}), names.batch_log_topic(source)
    ) == [1]
    assert [r.getMessage() for r in caplog.records if r.name.startswith("airmirror.kafka")] == []
