"""Field transforms on Avro keys and values framed with a registry id, end to end: real Kafka, real Spark, real
registries (Apicurio 3.3.3, Confluent's API).  The source's records are written with confluent-kafka's AvroSerializer
against registry ``a``; the target's are read with its AvroDeserializer against registry ``b`` only: each copy carries
the schema the chain derives, registered on ``b`` under the remote topic's subject, and ``airmirror verify`` finds the
copy equal to the transformed source."""

from __future__ import annotations

import json
from typing import Any

import pytest
from confluent_kafka.serialization import MessageField

from airmirror.migration.verification import verify_flow
from airmirror.model import PartitionKey, Verdict
from airmirror.replication.status import flow_status
from tests.conftest import write_config
from tests.kafka_helpers import Record, create_topic, produce, read_partition, recent_ms
from tests.mirror_helpers import opened, replicate
from tests.registry_helpers import avro_deserializer, avro_serializer, registry_url, subject_version, versions

pytestmark = pytest.mark.integration

T = "org.apache.kafka.connect.transforms."
KEY, VALUE = MessageField.KEY, MessageField.VALUE


def user_schema(prefix: str) -> dict[str, Any]:
    return {
        "type": "record",
        "name": "User",
        "namespace": prefix,
        "fields": [
            {"name": "id", "type": "long"},
            {"name": "name", "type": "string"},
            {"name": "password", "type": "string"},
            {"name": "internal", "type": "boolean"},
            {"name": "email", "type": ["null", "string"], "default": None},
        ],
    }


def chain(prefix: str, url_a: str, url_b: str) -> str:
    return f"""\
a->b.enabled = true
topics = {prefix}.*
a.schema.registry.url = {url_a}
b.schema.registry.url = {url_b}
airmirror.transaction.max.records = 5
a->b.transforms = dropPII, mask, cut, add, email, keyMask
a->b.transforms.dropPII.type = {T}Filter
a->b.transforms.dropPII.predicate = isPII
a->b.transforms.mask.type = {T}MaskField$Value
a->b.transforms.mask.fields = password
a->b.transforms.cut.type = {T}ReplaceField$Value
a->b.transforms.cut.exclude = internal
a->b.transforms.add.type = {T}InsertField$Value
a->b.transforms.add.topic.field = origin
a->b.transforms.email.type = {T}HeaderFrom$Value
a->b.transforms.email.fields = email
a->b.transforms.email.headers = x-email
a->b.transforms.email.operation = move
a->b.transforms.keyMask.type = {T}MaskField$Key
a->b.transforms.keyMask.fields = region
a->b.predicates = isPII
a->b.predicates.isPII.type = {T}predicates.HasHeaderKey
a->b.predicates.isPII.name = pii
"""


def key_schema(prefix: str) -> dict[str, Any]:
    return {
        "type": "record",
        "name": "UserKey",
        "namespace": prefix,
        "fields": [{"name": "id", "type": "long"}, {"name": "region", "type": "string"}],
    }


def test_avro_keys_and_values_are_masked_cut_and_extended_with_the_derived_schema_registered_on_the_target(
    clusters, registries, spark, prefix, tmp_path
):
    a, b = clusters["a"].bootstrap, clusters["b"].bootstrap
    url_a, url_b = registry_url(registries["a"]), registry_url(registries["b"])
    topic, remote = f"{prefix}.users", f"a.{prefix}.users"
    serialize = avro_serializer(url_a, json.dumps(user_schema(prefix)))
    serialize_key = avro_serializer(url_a, json.dumps(key_schema(prefix)))
    users = [
        {"id": i, "name": f"u{i}", "password": f"pw{i}", "internal": i % 2 == 0, "email": f"u{i}@x" if i % 3 else None}
        for i in range(12)
    ]
    now = recent_ms()
    source = [
        Record(
            serialize_key({"id": i, "region": "eu"}, topic, KEY),
            serialize(u, topic, VALUE),
            (("pii", b"1"),) if i % 4 == 3 else (),
            now + i,
        )
        for i, u in enumerate(users)
    ]
    create_topic(a, topic)
    produce(a, topic, 0, source)
    config = write_config(tmp_path / "mm2.properties", clusters, chain(prefix, url_a, url_b))

    report = replicate(config, spark)

    assert report.summary is not None and report.summary.records == 9
    target = [record for _, record in read_partition(b, remote, 0)]
    deserialize = avro_deserializer(url_b)
    kept = [u for i, u in enumerate(users) if i % 4 != 3]
    assert [deserialize(r.value, remote, VALUE) for r in target] == [
        {"id": u["id"], "name": u["name"], "password": "", "origin": remote} for u in kept
    ]
    assert [dict(r.headers).get("x-email") for r in target] == [
        None if u["email"] is None else u["email"].encode() for u in kept
    ]
    assert [deserialize(r.key, remote, KEY) for r in target] == [{"id": u["id"], "region": ""} for u in kept]
    assert versions(url_b, f"{remote}-value") == [1], "the derived schema alone: the source's subject is not synced"
    latest = subject_version(url_b, f"{remote}-value")
    assert latest is not None
    assert [f["name"] for f in json.loads(latest["schema"])["fields"]] == ["id", "name", "password", "origin"]
    assert {int.from_bytes(r.value[1:5], "big") for r in target if r.value} == {int(latest["id"])}
    key_id = subject_version(url_b, f"{remote}-key")
    assert key_id is not None and {int.from_bytes(r.key[1:5], "big") for r in target if r.key} == {int(key_id["id"])}

    with opened(config) as (flow, store):
        [partition] = verify_flow(flow, store, lambda: spark).partitions
        status = {p.topic: p.records_filtered for p in flow_status(flow, store).partitions}
    assert (partition.verdict, partition.source_records, partition.target_records) == (Verdict.EQUAL, 9, 9)
    assert partition.filtered == 3 and status == {topic: 3}
    assert PartitionKey(topic, 0) == PartitionKey(partition.topic, partition.partition)


def test_a_routed_avro_topic_has_its_subject_and_ids_under_the_routed_name(
    clusters, registries, spark, prefix, tmp_path
):
    a, b = clusters["a"].bootstrap, clusters["b"].bootstrap
    url_a, url_b = registry_url(registries["a"]), registry_url(registries["b"])
    topic, remote = f"{prefix}.accounts", f"restricted-{prefix}.accounts"
    serialize = avro_serializer(url_a, json.dumps(user_schema(prefix)))
    users = [{"id": i, "name": f"u{i}", "password": f"pw{i}", "internal": False, "email": None} for i in range(5)]
    now = recent_ms()
    create_topic(a, topic)
    produce(a, topic, 0, [Record(b"k%d" % i, serialize(u, topic, VALUE), (), now + i) for i, u in enumerate(users)])
    body = (
        f"a->b.enabled = true\ntopics = {prefix}.*\na.schema.registry.url = {url_a}\nb.schema.registry.url = {url_b}\n"
        f"a->b.transforms = route, mask\na->b.transforms.route.type = {T}RegexRouter\n"
        f"a->b.transforms.route.regex = a\\\\.{prefix}\\\\.(.*)\n"
        f"a->b.transforms.route.replacement = restricted-{prefix}.$1\n"
        f"a->b.transforms.mask.type = {T}MaskField$Value\na->b.transforms.mask.fields = password\n"
    )
    config = write_config(tmp_path / "mm2.properties", clusters, body)

    replicate(config, spark)

    deserialize = avro_deserializer(url_b)
    target = [record for _, record in read_partition(b, remote, 0)]
    assert [deserialize(r.value, remote, VALUE) for r in target] == [{**u, "password": ""} for u in users]
    latest = subject_version(url_b, f"{remote}-value")
    assert latest is not None and {int.from_bytes(r.value[1:5], "big") for r in target} == {int(latest["id"])}
    assert subject_version(url_b, f"a.{topic}-value") is None, "nothing under the policy's name"
    with opened(config) as (flow, store):
        [partition] = verify_flow(flow, store, lambda: spark).partitions
    assert (partition.remote_topic, partition.verdict) == (remote, Verdict.EQUAL)
