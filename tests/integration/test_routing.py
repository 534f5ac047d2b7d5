"""RegexRouter on real clusters and real Spark: the copy goes to the routed remote topic, with the source's configs,
and checkpoints, group offset sync, translation, the failover client and verify all name it; a changed route starts
the topic afresh in its new remote topic, by itself; two topics routed to one remote topic are refused."""

from __future__ import annotations

import json

import pytest
from confluent_kafka.admin import AdminClient
from sqlalchemy import create_engine, update

from airmirror.checkpoints.translation import Translator
from airmirror.client import remote_cluster_utils as client
from airmirror.config import load_config
from airmirror.errors import ConfigError
from airmirror.migration.verification import verify_flow
from airmirror.model import PartitionKey, Verdict
from airmirror.store.schema import remote_topics
from tests.cli_helpers import airmirror_process
from tests.conftest import write_config
from tests.integration.test_checkpoints import checkpoints_of
from tests.kafka_helpers import create_topic, produce, read_partition
from tests.mirror_helpers import checkpoint, commit_offsets, group_offsets_on, opened, replicate, unique_records

pytestmark = pytest.mark.integration

T = "org.apache.kafka.connect.transforms."


def topic_names(bootstrap: str) -> set[str]:
    return set(AdminClient({"bootstrap.servers": bootstrap}).list_topics(timeout=10).topics)


def routed(prefix: str, replacement: str) -> str:
    return f"""\
a->b.enabled = true
topics = {prefix}.*
groups = {prefix}.*
sync.group.offsets.enabled = true
a->b.transforms = route
a->b.transforms.route.type = {T}RegexRouter
a->b.transforms.route.regex = a\\.{prefix}\\.(.*)
a->b.transforms.route.replacement = {replacement}
"""


def test_a_routed_topic_is_copied_checkpointed_translated_and_verified_under_its_new_name(
    clusters, spark, prefix, tmp_path
):
    a, b = clusters["a"].bootstrap, clusters["b"].bootstrap
    topic, group = f"{prefix}.payments", f"{prefix}.payers"
    remote = f"restricted-{prefix}.payments"
    create_topic(a, topic)
    records = unique_records("pay", 12)
    produce(a, topic, 0, records)
    config = write_config(tmp_path / "mm2.properties", clusters, routed(prefix, f"restricted-{prefix}.$1"))

    replicate(config, spark)

    assert [record for _, record in read_partition(b, remote, 0)] == records
    assert f"a.{topic}" not in topic_names(b), "nothing is written under the policy's name"
    commit_offsets(a, group, {(topic, 0): 5})
    checkpoint(config)
    [mark] = checkpoints_of(b, group)
    assert (mark.topic, mark.partition, mark.upstream_offset, mark.downstream_offset) == (remote, 0, 5, 5)
    assert group_offsets_on(b, group) == {(remote, 0): 5}
    with opened(config) as (flow, store):
        key = PartitionKey(topic, 0)
        assert Translator(flow, store).translate({key: 5})[key].route.target_topic == remote
        [verified] = verify_flow(flow, store, lambda: spark).partitions
    assert (verified.remote_topic, verified.verdict) == (remote, Verdict.EQUAL)
    translated = client.translate_offsets({"bootstrap.servers": b}, "a", group, 30)
    assert {(tp.topic, tp.partition): o.offset for tp, o in translated.items()} == {(remote, 0): 5}

    shown = airmirror_process("status", str(config), "--flow", "a->b", "--json")
    assert shown.returncode == 0, shown.stderr
    assert {p["remote_topic"] for p in json.loads(shown.stdout)["partitions"]} == {remote}


def test_a_changed_route_starts_the_topic_afresh_in_its_new_remote_topic(clusters, spark, prefix, tmp_path):
    a, b = clusters["a"].bootstrap, clusters["b"].bootstrap
    topic, group = f"{prefix}.ledger", f"{prefix}.auditors"
    create_topic(a, topic)
    first, later = unique_records("first", 6), unique_records("later", 4)
    produce(a, topic, 0, first)
    config = write_config(tmp_path / "mm2.properties", clusters, f"a->b.enabled = true\ntopics = {prefix}.*\n")
    replicate(config, spark)
    assert len(read_partition(b, f"a.{topic}", 0)) == 6
    database = create_engine(load_config(config).flow("a->b").metadata_db_url)
    with database.begin() as connection:  # as a row recorded before remote topics kept their source topic
        connection.execute(update(remote_topics).values(source_topic=None))
    database.dispose()

    config = write_config(tmp_path / "mm2.properties", clusters, routed(prefix, f"vault-{prefix}.$1"))
    produce(a, topic, 0, later)
    replicate(config, spark)

    moved = f"vault-{prefix}.ledger"
    assert [record for _, record in read_partition(b, moved, 0)] == first + later, "copied again from its start"
    assert len(read_partition(b, f"a.{topic}", 0)) == 6, "the old remote topic keeps what was copied"
    commit_offsets(a, group, {(topic, 0): 8})
    checkpoint(config)
    assert [(c.topic, c.downstream_offset) for c in checkpoints_of(b, group)] == [(moved, 8)]
    again = replicate(config, spark)
    assert again.planned.ranges == [], "the route change was followed once"


def test_two_topics_routed_to_one_remote_topic_are_refused_naming_both(clusters, spark, prefix, tmp_path):
    a = clusters["a"].bootstrap
    for name in ("eu", "us"):
        create_topic(a, f"{prefix}.{name}.orders")
    body = routed(prefix, f"all-{prefix}.orders").replace(f"a\\.{prefix}\\.(.*)", f"a\\.{prefix}\\.(eu|us)\\.orders")
    config = write_config(tmp_path / "mm2.properties", clusters, body)
    with pytest.raises(ConfigError) as refused:
        replicate(config, spark)
    assert refused.value.exit_code == 2 and refused.value.key == "a->b.transforms"
    assert f"{prefix}.eu.orders and {prefix}.us.orders" in str(refused.value)
    assert f"all-{prefix}.orders" not in topic_names(clusters["b"].bootstrap), "nothing was created"


def test_a_group_reading_a_routed_topic_fails_back_to_the_topic_it_came_from(clusters, spark, prefix, tmp_path):
    a, b = clusters["a"].bootstrap, clusters["b"].bootstrap
    topic, group = f"{prefix}.back", f"{prefix}.returning"
    routed_name = f"restricted-{prefix}.back"
    create_topic(b, topic)
    produce(b, topic, 0, unique_records("back", 10))
    body = (
        routed(prefix, f"restricted-{prefix}.$1").replace("a->b.", "b->a.").replace("a\\.", "b\\.")
        + f"a->b.enabled = true\na->b.topics.exclude = restricted-{prefix}.*\nheartbeats.replication.enabled = false\n"
    )
    config = write_config(tmp_path / "mm2.properties", clusters, body)
    replicate(config, spark, "b->a")
    assert len(read_partition(a, routed_name, 0, timeout=60)) == 10  # twice, in a loaded CI, 20 s heard nothing

    commit_offsets(a, group, {(routed_name, 0): 4})
    checkpoint(config, "a->b")
    [mark] = checkpoints_of(b, group)
    assert (mark.topic, mark.upstream_offset, mark.downstream_offset) == (topic, 4, 4)
