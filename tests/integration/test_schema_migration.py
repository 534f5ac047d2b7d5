"""Schema registry migration end to end (issue 24): real Kafka, real Spark, real registries (Apicurio 3.3.3 serving
Confluent's API), confluent-kafka's own serializers on the source and deserializers on the target, each target
consumer reading only the target registry.

Most tests share the session registries ``a`` and ``b`` (``b`` padded, so ids differ) and name their subjects and
schemas after their own ``prefix``; ids are always read from the registries, never assumed.  The registry-down tests
stop one and the compatibility test changes global levels: they use a pair of this module (``fresh``: data kept on
disk across a restart).  ``keep`` is refused on Apicurio (it ignores the ids of IMPORT mode): its test checks the
refusal; the copy under ``keep`` is a contract test against the fake registry (``tests/unit/schemas``).
"""

from __future__ import annotations

import json
import os
import struct
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
from confluent_kafka.schema_registry import Schema, SchemaReference, record_subject_name_strategy
from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
from confluent_kafka.serialization import MessageField, SerializationContext
from google.protobuf import descriptor_pb2
from google.protobuf.json_format import MessageToDict

from airmirror.config import FlowConfig
from airmirror.devtools.local_kafka import LocalBroker, free_port
from airmirror.devtools.local_registry import LocalRegistry, start_registry, stop_registry
from airmirror.errors import RegistryUnavailable, ReplicationFailure
from airmirror.kafka.clients import shared_clients
from airmirror.migration.verification import verify_flow
from airmirror.model import Verification
from airmirror.replication.options import BatchOptions
from airmirror.replication.pipeline import PlannedBatch, copy_and_record, plan_batch, sync_flow_topics
from airmirror.replication.schema_sync import schemas_verb
from airmirror.schemas import record_ids, registry_client
from airmirror.store import MetadataStore
from tests.conftest import write_config
from tests.kafka_helpers import Record, create_topic, end_offset, produce, read_partition, recent_ms
from tests.mirror_helpers import opened, replicate
from tests.polling import wait_until
from tests.registry_helpers import (
    CONTENT_TYPE,
    avro_deserializer,
    avro_serializer,
    client,
    get,
    json_deserializer,
    json_serializer,
    message_classes,
    protobuf_deserializer,
    protobuf_frame,
    protobuf_framed,
    protobuf_serializer,
    register,
    registry_message_class,
    registry_url,
    set_compatibility,
    subject_version,
    versions,
)

pytestmark = pytest.mark.integration

KEY, VALUE = MessageField.KEY, MessageField.VALUE


# -- helpers ---------------------------------------------------------------------------------------------------------
def schema_config(
    tmp_path: Path, clusters: dict[str, LocalBroker], prefix: str, url_a: str, url_b: str, extra: str = ""
) -> Path:
    """A flow a->b of the test's topics with a registry per cluster (ids translated unless ``extra`` says)."""
    body = f"a->b.enabled = true\ntopics = {prefix}.*\na.schema.registry.url = {url_a}\nb.schema.registry.url = {url_b}"
    return write_config(tmp_path / "mm2.properties", clusters, body + ("\n" + extra if extra else ""))


def urls(registries: dict[str, LocalRegistry]) -> tuple[str, str]:
    return registry_url(registries["a"]), registry_url(registries["b"])


def framed_id(data: bytes | None) -> int | None:
    """The schema id in Confluent's frame (magic byte 0, 4-byte id), read here independently of airmirror."""
    if data is None or len(data) < 5 or data[0] != 0:
        return None
    found: int = struct.unpack(">I", data[1:5])[0]
    return found


def with_id(data: bytes, schema_id: int) -> bytes:
    return data[:1] + struct.pack(">I", schema_id) + data[5:]


def translated(data: bytes | None, ids: dict[int, int]) -> bytes | None:
    """``data`` as a translated copy holds it: its framed id replaced through ``ids``."""
    source_id = framed_id(data)
    return data if source_id is None or data is None else with_id(data, ids[source_id])


def id_map(url_a: str, url_b: str, subjects: dict[str, str]) -> dict[int, int]:
    """Source id -> target id of every version of each source subject -> its target subject, read from both
    registries (the truth a translated copy must follow)."""
    ids = {}
    for source, target in subjects.items():
        for version in versions(url_a, source):
            found_a, found_b = subject_version(url_a, source, version), subject_version(url_b, target, version)
            assert found_b is not None, f"{target} v{version} missing on the target registry"
            assert found_a is not None
            ids[int(found_a["id"])] = int(found_b["id"])
    return ids


def committed_records(bootstrap: str, topic: str, partition: int = 0) -> list[Record]:
    """The partition's committed records (read_committed); none while the topic does not exist."""
    if end_offset(bootstrap, topic, partition) == 0:
        return []
    return [record for _, record in read_partition(bootstrap, topic, partition)]


def stored_ids(config: Path) -> dict[int, int]:
    with opened(config) as (flow, store):
        return store.schema_ids(flow.name)


def avro(name: str, namespace: str, fields: list[dict[str, Any]]) -> str:
    return json.dumps({"type": "record", "name": name, "namespace": namespace, "fields": fields})


def order_schemas(prefix: str) -> tuple[str, str, str, str]:
    """Avro schemas named after the test: a key, an address (referenced), an order v1 and a compatible v2."""
    key = avro("OrderKey", prefix, [{"name": "id", "type": "long"}])
    address = avro("Address", prefix, [{"name": "street", "type": "string"}])
    order = [{"name": "id", "type": "long"}, {"name": "addr", "type": f"{prefix}.Address"}]
    v1 = avro("Order", prefix, order)
    v2 = avro("Order", prefix, [*order, {"name": "note", "type": "string", "default": ""}])
    return key, address, v1, v2


def order(i: int, prefix: str, v2: bool = False) -> dict[str, Any]:
    value: dict[str, Any] = {"id": i, "addr": {"street": f"{prefix} street {i}"}}
    if v2:
        value["note"] = f"note {i}"
    return value


def assert_copied(source: list[Record], target: list[Record], ids: dict[int, int], sides: tuple[str, ...]) -> None:
    """The target holds the source record for record: ``sides`` (``key``/``value``) with ids translated, every other
    byte, header and timestamp as they were."""
    assert len(target) == len(source)
    for s, t in zip(source, target, strict=True):
        expected_key = translated(s.key, ids) if "key" in sides else s.key
        expected_value = translated(s.value, ids) if "value" in sides else s.value
        assert (t.key, t.value, t.headers, t.timestamp) == (expected_key, expected_value, s.headers, s.timestamp)


# -- 1. translate: Avro keys and values, two versions, a reference ---------------------------------------------------
def test_avro_keys_and_values_of_two_versions_with_a_reference_decode_with_the_target_registry_only(
    clusters, registries, spark, prefix, tmp_path
):
    a, b = clusters["a"].bootstrap, clusters["b"].bootstrap
    url_a, url_b = urls(registries)
    topic, remote, address_subject = f"{prefix}.orders", f"a.{prefix}.orders", f"{prefix}.Address"
    key_schema, address, v1, v2 = order_schemas(prefix)
    register(url_a, address_subject, address)
    set_compatibility(url_a, f"{topic}-value", "BACKWARD")
    references = [SchemaReference(f"{prefix}.Address", address_subject, 1)]
    serialize_key = avro_serializer(url_a, key_schema)
    serialize_v1 = avro_serializer(url_a, Schema(v1, "AVRO", references))
    serialize_v2 = avro_serializer(url_a, Schema(v2, "AVRO", references))
    keys = [{"id": i} for i in range(7)]
    values: list[dict[str, Any] | None] = [order(i, prefix) for i in range(3)]
    values += [order(i, prefix, v2=True) for i in range(3, 6)] + [None]  # the last one a tombstone
    now = recent_ms()
    source = [
        Record(
            serialize_key(k, topic, KEY),
            None if v is None else (serialize_v2 if "note" in v else serialize_v1)(v, topic, VALUE),
            (("trace", f"t{i}".encode()),),
            now + i,
        )
        for i, (k, v) in enumerate(zip(keys, values, strict=True))
    ]
    create_topic(a, topic)
    produce(a, topic, 0, source)
    config = schema_config(tmp_path, clusters, prefix, url_a, url_b)

    assert replicate(config, spark).summary.records == 7

    assert versions(url_b, f"{remote}-value") == [1, 2]
    assert versions(url_b, f"{remote}-key") == [1]
    assert versions(url_b, address_subject) == [1]
    assert get(url_b, f"/config/{remote}-value")["compatibilityLevel"] == "BACKWARD"
    for version in (1, 2):
        on_b = subject_version(url_b, f"{remote}-value", version)
        assert on_b["references"] == [{"name": f"{prefix}.Address", "subject": address_subject, "version": 1}]
        assert subject_version(url_b, address_subject, 1)["id"] < on_b["id"]  # the reference was registered first
    ids = id_map(url_a, url_b, {f"{topic}-key": f"{remote}-key", f"{topic}-value": f"{remote}-value"})
    assert any(s != t for s, t in ids.items()), f"the registries gave the same ids {ids}: nothing shows a rewrite"
    target = committed_records(b, remote)
    assert_copied(source, target, ids, ("key", "value"))
    deserialize = avro_deserializer(url_b)
    assert [deserialize(r.key, remote, KEY) for r in target] == keys
    assert [None if r.value is None else deserialize(r.value, remote, VALUE) for r in target] == values
    assert ids.items() <= stored_ids(config).items()


# -- 2. translate: JSON Schema with a $ref, two versions -------------------------------------------------------------
def test_json_schema_keys_and_values_of_two_versions_with_a_reference_decode_with_the_target_registry_only(
    clusters, registries, spark, prefix, tmp_path
):
    a, b = clusters["a"].bootstrap, clusters["b"].bootstrap
    url_a, url_b = urls(registries)
    topic, remote, base_subject = f"{prefix}.json", f"a.{prefix}.json", f"{prefix}.base-json"
    draft = "http://json-schema.org/draft-07/schema#"
    base = {"$schema": draft, "type": "object", "properties": {"b": {"type": "integer"}}, "required": ["b"]}
    register(url_a, base_subject, json.dumps(base), "JSON")
    properties: dict[str, Any] = {"base": {"$ref": "base.json"}, "n": {"type": "integer"}}
    v1 = {"$schema": draft, "title": prefix, "type": "object", "properties": properties, "required": ["base", "n"]}
    v2 = {**v1, "properties": {**properties, "tag": {"type": "string"}}}
    references = [SchemaReference("base.json", base_subject, 1)]
    serialize_v1 = json_serializer(url_a, Schema(json.dumps(v1), "JSON", references))
    serialize_v2 = json_serializer(url_a, Schema(json.dumps(v2), "JSON", references))
    key_schema = {"$schema": draft, "title": f"{prefix}-key", "type": "object", "properties": {"k": {"type": "string"}}}
    serialize_key = json_serializer(url_a, json.dumps(key_schema))
    keys = [{"k": f"key {i}"} for i in range(5)]
    values = [{"base": {"b": i}, "n": i} for i in range(3)] + [
        {"base": {"b": i}, "n": i, "tag": f"x{i}"} for i in (3, 4)
    ]
    now = recent_ms()
    serialized = [(serialize_v2 if "tag" in v else serialize_v1)(v, topic, VALUE) for v in values]
    source = [Record(serialize_key(k, topic, KEY), serialized[i], (), now + i) for i, k in enumerate(keys)]
    create_topic(a, topic)
    produce(a, topic, 0, source)
    config = schema_config(tmp_path, clusters, prefix, url_a, url_b)

    assert replicate(config, spark).summary.records == 5

    assert versions(url_b, f"{remote}-value") == [1, 2] and versions(url_b, f"{remote}-key") == [1]
    assert versions(url_b, base_subject) == [1]
    on_b = subject_version(url_b, f"{remote}-value", 2)
    assert on_b["schemaType"] == "JSON" and json.loads(on_b["schema"]) == v2
    assert on_b["references"] == [{"name": "base.json", "subject": base_subject, "version": 1}]
    ids = id_map(url_a, url_b, {f"{topic}-key": f"{remote}-key", f"{topic}-value": f"{remote}-value"})
    target = committed_records(b, remote)
    assert_copied(source, target, ids, ("key", "value"))
    deserialize = json_deserializer(url_b)
    assert [deserialize(r.key, remote, KEY) for r in target] == keys
    assert [deserialize(r.value, remote, VALUE) for r in target] == values


# -- 3. translate: Protobuf, nested message indexes, an import -------------------------------------------------------
def proto_files(prefix: str, v2: bool) -> tuple[descriptor_pb2.FileDescriptorProto, descriptor_pb2.FileDescriptorProto]:
    """``{prefix}/other.proto`` (message Other) and ``{prefix}/main.proto``, which imports it: messages First and
    Outer, Outer nesting Skip and Inner (Inner's indexes: [1, 1]); v2 adds a field to Inner."""
    other = descriptor_pb2.FileDescriptorProto(name=f"{prefix}/other.proto", package=prefix, syntax="proto3")
    other.message_type.add(name="Other").field.add(name="v", number=1, type=9, label=1)
    main = descriptor_pb2.FileDescriptorProto(
        name=f"{prefix}/main.proto", package=prefix, syntax="proto3", dependency=[other.name]
    )
    main.message_type.add(name="First").field.add(name="a", number=1, type=5, label=1)
    outer = main.message_type.add(name="Outer")
    outer.field.add(name="x", number=1, type=9, label=1)
    outer.nested_type.add(name="Skip").field.add(name="s", number=1, type=9, label=1)
    inner = outer.nested_type.add(name="Inner")
    inner.field.add(name="n", number=1, type=3, label=1)
    inner.field.add(name="o", number=2, type=11, label=1, type_name=f".{prefix}.Other")
    if v2:
        inner.field.add(name="note", number=3, type=9, label=1)
    return other, main


def proto_key_text(prefix: str) -> str:
    """A key schema as Java clients register it, .proto text: the key is ``Wrapper.Id`` (indexes [1, 0])."""
    return (
        f'syntax = "proto3";\npackage {prefix}.keys;\n\nmessage Unused {{\n  string u = 1;\n}}\n\n'
        "message Wrapper {\n  message Id {\n    int64 id = 1;\n  }\n  string w = 1;\n}\n"
    )


def proto_key_class(prefix: str) -> Any:
    file = descriptor_pb2.FileDescriptorProto(name=f"{prefix}/keys.proto", package=f"{prefix}.keys", syntax="proto3")
    file.message_type.add(name="Unused").field.add(name="u", number=1, type=9, label=1)
    wrapper = file.message_type.add(name="Wrapper")
    wrapper.field.add(name="w", number=1, type=9, label=1)
    wrapper.nested_type.add(name="Id").field.add(name="id", number=1, type=3, label=1)
    return message_classes(file)(f"{prefix}.keys.Wrapper.Id")


def test_protobuf_nested_messages_with_an_import_keep_their_indexes_and_name_the_same_schema_on_the_target(
    clusters, registries, spark, prefix, tmp_path
):
    a, b = clusters["a"].bootstrap, clusters["b"].bootstrap
    url_a, url_b = urls(registries)
    topic, remote = f"{prefix}.proto", f"a.{prefix}.proto"
    pool_v1, pool_v2 = message_classes(*proto_files(prefix, False)), message_classes(*proto_files(prefix, True))
    v1_class, other_v1 = pool_v1(f"{prefix}.Outer.Inner"), pool_v1(f"{prefix}.Other")
    v2_class, other_v2 = pool_v2(f"{prefix}.Outer.Inner"), pool_v2(f"{prefix}.Other")
    serialize_v1, serialize_v2 = protobuf_serializer(url_a, v1_class), protobuf_serializer(url_a, v2_class)
    key_id = register(url_a, f"{topic}-key", proto_key_text(prefix), "PROTOBUF")
    key_class = proto_key_class(prefix)
    messages = [v1_class(n=i, o=other_v1(v=f"o{i}")) for i in range(3)]
    messages += [v2_class(n=i, o=other_v2(v=f"o{i}"), note=f"note {i}") for i in (3, 4)]
    now = recent_ms()
    source = [
        Record(
            protobuf_framed(key_id, [1, 0], key_class(id=i)),
            (serialize_v2 if i >= 3 else serialize_v1)(message, topic, VALUE),
            (),
            now + i,
        )
        for i, message in enumerate(messages)
    ]
    create_topic(a, topic)
    produce(a, topic, 0, source)
    config = schema_config(tmp_path, clusters, prefix, url_a, url_b)

    assert replicate(config, spark).summary.records == 5

    assert versions(url_b, f"{remote}-value") == [1, 2] and versions(url_b, f"{remote}-key") == [1]
    assert versions(url_b, f"{prefix}/other.proto") == [1]
    on_b = subject_version(url_b, f"{remote}-value", 1)
    assert on_b["references"] == [{"name": f"{prefix}/other.proto", "subject": f"{prefix}/other.proto", "version": 1}]
    ids = id_map(url_a, url_b, {f"{topic}-key": f"{remote}-key", f"{topic}-value": f"{remote}-value"})
    target = committed_records(b, remote)
    assert_copied(source, target, ids, ("key", "value"))
    classes = {
        subject_version(url_b, f"{remote}-value", 1)["id"]: v1_class,
        subject_version(url_b, f"{remote}-value", 2)["id"]: v2_class,
    }
    for i, (s, t, message) in enumerate(zip(source, target, messages, strict=True)):
        for side, indexes, expected, decode_class in (
            ("key", [1, 0], key_class(id=i), key_class),
            ("value", [1, 1], message, None),
        ):
            source_id, source_indexes, _ = protobuf_frame(getattr(s, side))
            target_id, target_indexes, _ = protobuf_frame(getattr(t, side))
            assert source_indexes == target_indexes == indexes
            on_a, on_b = get(url_a, f"/schemas/ids/{source_id}"), get(url_b, f"/schemas/ids/{target_id}")
            assert on_b["schemaType"] == "PROTOBUF" and on_b["schema"] == on_a["schema"]
            decode_class = decode_class or classes[target_id]
            field = KEY if side == "key" else VALUE
            assert protobuf_deserializer(decode_class)(getattr(t, side), remote, field) == expected
        # The value once more, with a message class built from what registry b alone holds (its file and import).
        target_id, indexes, payload = protobuf_frame(t.value)
        from_b = registry_message_class(url_b, target_id, indexes)
        assert MessageToDict(from_b.FromString(payload)) == MessageToDict(message)
    assert get(url_b, f"/schemas/ids/{ids[key_id]}")["schema"] == proto_key_text(prefix)


# -- 4. in-run mapping: a schema registered after the run's schema sync ----------------------------------------------
LATE_DECODED = [{"id": 0}, {"id": 1, "extra": 1}, {"id": 2, "extra": 2}]


@contextmanager
def late_schema_batch(
    clusters: dict[str, LocalBroker], spark: Any, tmp_path: Path, prefix: str, urls: tuple[str, str], topic: str
) -> Iterator[tuple[FlowConfig, MetadataStore, PlannedBatch, list[Record]]]:
    """A run of topic ``topic`` stopped before its copy: an earlier run copied its first record (schema v1); this
    run's schema sync found nothing new, then v2 was registered on the source and two records of it produced.
    Yields the flow, its store, the planned batch and the three records; the copy tasks must map v2."""
    a = clusters["a"].bootstrap
    url_a, url_b = urls
    no_reference = avro("Order", prefix, [{"name": "id", "type": "long"}])
    evolved = avro("Order", prefix, [{"name": "id", "type": "long"}, {"name": "extra", "type": "int", "default": 0}])
    create_topic(a, topic)
    now = recent_ms()
    first = [Record(b"k0", avro_serializer(url_a, no_reference)(LATE_DECODED[0], topic, VALUE), (), now)]
    produce(a, topic, 0, first)
    config = schema_config(tmp_path, clusters, prefix, url_a, url_b)
    assert replicate(config, spark).summary.records == 1
    mapped_first = stored_ids(config)
    with opened(config) as (flow, store), shared_clients():
        topics = sync_flow_topics(flow, store, BatchOptions())
        assert store.schema_ids(flow.name) == mapped_first  # nothing new to sync yet
        serialize = avro_serializer(url_a, evolved)  # registers v2 on a now, after the run's sync
        late = [Record(f"k{i}".encode(), serialize(LATE_DECODED[i], topic, VALUE), (), now + i) for i in (1, 2)]
        produce(a, topic, 0, late)
        assert framed_id(late[0].value) not in mapped_first
        yield flow, store, plan_batch(flow, store, topics.mappings, BatchOptions()), first + late
    assert replicate(config, spark).summary is None  # nothing left, nothing copied twice


def assert_late_schema_copied(
    bootstrap: str, url_b: str, remote: str, source: list[Record], mapped: dict[int, int]
) -> None:
    """The records of :func:`late_schema_batch` are on the target once, v2 mapped to the target's second version."""
    new_id = framed_id(source[1].value)
    assert new_id in mapped and mapped[new_id] == subject_version(url_b, f"{remote}-value", 2)["id"]
    assert versions(url_b, f"{remote}-value") == [1, 2]
    target = committed_records(bootstrap, remote)
    assert_copied(source, target, mapped, ("value",))
    deserialize = avro_deserializer(url_b)
    assert [deserialize(r.value, remote, VALUE) for r in target] == LATE_DECODED


def test_a_schema_registered_after_the_sync_is_mapped_by_the_copy_tasks_in_the_same_run(
    clusters, registries, spark, prefix, tmp_path
):
    topic, remote = f"{prefix}.late", f"a.{prefix}.late"
    with late_schema_batch(clusters, spark, tmp_path, prefix, urls(registries), topic) as (
        flow,
        store,
        planned,
        source,
    ):
        copy_and_record(flow, store, planned, lambda: spark)
        mapped = store.schema_ids(flow.name)
    assert_late_schema_copied(clusters["b"].bootstrap, urls(registries)[1], remote, source, mapped)


def test_a_schema_a_live_stream_meets_is_mapped_by_its_tasks_and_stored_when_the_window_ends(
    clusters, registries, spark, prefix, tmp_path
):
    """A live run streams two topics.  Mid-window a new version is registered on the source and records of it
    produced: the stream's tasks map the new id, and the run stores it in the flow's map when its window ends
    (``verify`` and later runs translate through the DB, not only through the next sync).  The other topic gets its
    first subject mid-window: once the topic-sync interval has passed, its framed records are translated too."""
    a, b = clusters["a"].bootstrap, clusters["b"].bootstrap
    url_a, url_b = urls(registries)
    topic, remote = f"{prefix}.streamed", f"a.{prefix}.streamed"
    newly, newly_remote = f"{prefix}.newly", f"a.{prefix}.newly"
    first = avro("Order", prefix, [{"name": "id", "type": "long"}])
    evolved = avro("Order", prefix, [{"name": "id", "type": "long"}, {"name": "extra", "type": "int", "default": 0}])
    create_topic(a, topic)
    create_topic(a, newly)
    now = recent_ms()
    produce(a, topic, 0, [Record(b"k0", avro_serializer(url_a, first)(LATE_DECODED[0], topic, VALUE), (), now)])
    config = schema_config(tmp_path, clusters, prefix, url_a, url_b)
    command = ["replicate", str(config), "--flow", "a->b", "--continuous", "--for", "50s"]
    log = tmp_path / "live.log"
    with log.open("w") as output:
        live = subprocess.Popen([sys.executable, "-m", "airmirror.cli", *command], stdout=output, stderr=output)
    try:
        wait_until(lambda: end_offset(b, remote, 0) > 0, 180, "the stream copies the first record")
        serialize = avro_serializer(url_a, evolved)  # registers v2 on a now, while the stream runs
        late = [Record(f"k{i}".encode(), serialize(LATE_DECODED[i], topic, VALUE), (), now + i) for i in (1, 2)]
        produce(a, topic, 0, late)
        serialize_newly = avro_serializer(url_a, avro("Newly", prefix, [{"name": "id", "type": "long"}]))
        newly_value = serialize_newly({"id": 7}, newly, VALUE)  # the topic's first subject, registered now
        time.sleep(record_ids.UNKNOWN_ID_TTL_S + 1)
        produce(a, newly, 0, [Record(b"n", newly_value, (), recent_ms())])
        live.wait(timeout=300)
    finally:
        if live.poll() is None:
            live.kill()
            live.wait()
    assert live.returncode == 0, log.read_text()[-4000:]
    new_id = framed_id(late[0].value)
    with opened(config) as (flow, store):
        mapped = store.schema_ids(flow.name)
    assert new_id in mapped and mapped[new_id] == subject_version(url_b, f"{remote}-value", 2)["id"]
    copied = committed_records(b, newly_remote)
    assert [framed_id(r.value) for r in copied] == [subject_version(url_b, f"{newly_remote}-value", 1)["id"]]
    assert avro_deserializer(url_b)(copied[0].value, newly_remote, VALUE) == {"id": 7}


# -- 5. an id the source registry does not know: fail, then pass -----------------------------------------------------
def test_an_unknown_id_fails_the_chunk_then_passes_through_exactly_once(clusters, registries, spark, prefix, tmp_path):
    a, b = clusters["a"].bootstrap, clusters["b"].bootstrap
    url_a, url_b = urls(registries)
    topic, remote = f"{prefix}.raw", f"a.{prefix}.raw"
    unknown = 987_654
    assert get(url_a, f"/schemas/ids/{unknown}") is None
    thing = avro("Thing", prefix, [{"name": "n", "type": "int"}])
    serialize = avro_serializer(url_a, thing, **{"subject.name.strategy": record_subject_name_strategy})
    now = recent_ms()
    source = [Record(f"k{i}".encode(), serialize({"n": i}, topic, VALUE), (), now + i) for i in range(6)]
    source[3] = Record(b"k3", b"\x00" + struct.pack(">I", unknown) + b"not avro", (), now + 3)
    create_topic(a, topic)
    produce(a, topic, 0, source)
    schema_topics = f"airmirror.schema.topics = {prefix}.raw"
    failing = schema_config(
        tmp_path, clusters, prefix, url_a, url_b, f"{schema_topics}\nairmirror.schema.unknown = fail"
    )

    with pytest.raises(ReplicationFailure) as failed:
        replicate(failing, spark)
    message = str(failed.value)
    assert f"{topic}-0@3" in message and str(unknown) in message and "'a'" in message, message
    assert committed_records(b, remote) == []

    passing = schema_config(
        tmp_path, clusters, prefix, url_a, url_b, f"{schema_topics}\nairmirror.schema.unknown = pass"
    )
    assert replicate(passing, spark).summary.records == 6
    assert replicate(passing, spark).summary is None
    thing_id = framed_id(source[0].value)
    on_b = subject_version(url_b, f"{prefix}.Thing", 1)  # copied in-run, under its own (RecordNameStrategy) subject
    ids = {thing_id: on_b["id"], unknown: unknown}
    assert_copied(source, committed_records(b, remote), ids, ("value",))
    with opened(passing) as (flow, store):
        assert store.schema_passed(flow.name) == 1
        assert store.schema_ids(flow.name)[thing_id] == on_b["id"]
    deserialize = avro_deserializer(url_b)
    target = committed_records(b, remote)
    assert [deserialize(r.value, remote, VALUE)["n"] for r in target if r.key != b"k3"] == [0, 1, 2, 4, 5]


# -- 6 and 7: a fresh pair of registries of this module --------------------------------------------------------------
@pytest.fixture(scope="module")
def fresh(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, LocalRegistry]]:
    """Registries ``fa`` and ``fb`` of this module, their schemas kept on disk across a restart."""
    home = tmp_path_factory.mktemp("fresh-registries")
    ports = {"fa": free_port()}
    ports["fb"] = free_port(avoid=(ports["fa"],))
    with ThreadPoolExecutor(2) as pool:
        futures = {
            name: pool.submit(start_registry, name, port, home, home / f"{name}-data") for name, port in ports.items()
        }
        started = {name: future.result() for name, future in futures.items()}
    try:
        yield started
    finally:
        for name in started:
            stop_registry(name, home)


def registry_state(url: str, subjects: list[str]) -> dict[str, Any]:
    """What a refused run must leave as it was: the subjects (soft-deleted ones too), the global mode and level, and
    each of ``subjects``' versions, mode and level."""
    return {
        "subjects": sorted(get(url, "/subjects?deleted=true")),
        "mode": get(url, "/mode"),
        "config": get(url, "/config"),
        **{
            subject: (versions(url, subject), get(url, f"/mode/{subject}"), get(url, f"/config/{subject}"))
            for subject in subjects
        },
    }


def test_keep_on_a_registry_that_ignores_import_ids_is_refused_with_the_target_registry_as_it_was(
    clusters, registries, spark, prefix, tmp_path
):
    """Apicurio 3.3's Confluent API registers IMPORT mode's schemas under ids of its own: ``keep`` finds it out with
    a probe subject before anything else is written, deletes the probe, and fails naming the registry and
    ``translate``; nothing is copied, and the target registry is as it was."""
    a, b = clusters["a"].bootstrap, clusters["b"].bootstrap
    url_a, url_b = urls(registries)
    topic, remote = f"{prefix}.kept", f"a.{prefix}.kept"
    value = avro_serializer(url_a, avro("Order", prefix, [{"name": "id", "type": "long"}]))({"id": 0}, topic, VALUE)
    create_topic(a, topic)
    produce(a, topic, 0, [Record(b"k", value, (), recent_ms())])
    register(url_b, f"{remote}-value", avro("Theirs", prefix, [{"name": "t", "type": "int"}]))  # the target's own
    before = registry_state(url_b, [f"{remote}-value", f"{remote}-key"])
    config = schema_config(tmp_path, clusters, prefix, url_a, url_b, "airmirror.schema.ids = keep")

    with pytest.raises(ReplicationFailure) as failed:
        replicate(config, spark)

    message = str(failed.value)
    assert "does not keep the ids of IMPORT mode" in message and "cluster 'b'" in message, message
    assert "airmirror.schema.ids = translate" in message
    assert registry_state(url_b, [f"{remote}-value", f"{remote}-key"]) == before
    assert committed_records(b, remote) == []


@contextmanager
def stopped(registry: LocalRegistry) -> Iterator[None]:
    """``registry`` (of the fresh pair) down within the block, then started again on its port with its schemas."""
    assert stop_registry(registry.name, registry.home)
    try:
        yield
    finally:
        start_registry(registry.name, registry.port, registry.home, registry.home / f"{registry.name}-data")


def test_a_registry_that_is_down_fails_the_run_clearly_and_the_next_run_copies_exactly_once(
    clusters, fresh, spark, prefix, tmp_path, monkeypatch
):
    a, b = clusters["a"].bootstrap, clusters["b"].bootstrap
    registry = fresh["fa"]
    url_a, url_b = registry_url(registry), registry_url(fresh["fb"])
    topic, remote = f"{prefix}.down", f"a.{prefix}.down"
    secret = f"s3cret-{uuid.uuid4().hex}"
    value_schema = avro("Reading", prefix, [{"name": "n", "type": "int"}, {"name": "s", "type": "string"}])
    serialize = avro_serializer(url_a, value_schema)
    values = [{"n": i, "s": f"reading {i}"} for i in range(5)]
    now = recent_ms()
    source = [Record(f"k{i}".encode(), serialize(v, topic, VALUE), (), now + i) for i, v in enumerate(values)]
    create_topic(a, topic)
    produce(a, topic, 0, source)
    config = schema_config(
        tmp_path, clusters, prefix, url_a, url_b, f"a.schema.registry.basic.auth.user.info = airmirror:{secret}"
    )
    monkeypatch.setattr(registry_client, "UNAVAILABLE_AFTER_S", 2.0)  # the driver's retry window, not 30 s

    with stopped(registry), pytest.raises(RegistryUnavailable) as before_the_run:  # step 1's schema sync
        replicate(config, spark)
    with opened(config) as (flow, store), shared_clients():
        topics = sync_flow_topics(flow, store, BatchOptions())
        planned = plan_batch(flow, store, topics.mappings, BatchOptions())
        assert planned.batch_id is not None
        with stopped(registry), pytest.raises(RegistryUnavailable) as before_the_copy:  # step 3 reads the subjects
            copy_and_record(flow, store, planned, lambda: spark)
    for failed in (before_the_run, before_the_copy):
        message = str(failed.value)
        assert "cluster 'a'" in message and f"127.0.0.1:{registry.port}" in message, message
        assert secret not in message and "airmirror:" not in message, message
    assert committed_records(b, remote) == []

    resumed = replicate(config, spark)
    assert resumed.planned.batch_id == planned.batch_id and resumed.summary.records == 5
    assert replicate(config, spark).summary is None
    ids = id_map(url_a, url_b, {f"{topic}-value": f"{remote}-value"})
    target = committed_records(b, remote)
    assert_copied(source, target, ids, ("value",))
    deserialize = avro_deserializer(url_b)
    assert [deserialize(r.value, remote, VALUE) for r in target] == values


def test_a_target_registry_down_while_a_copy_task_maps_a_new_id_is_waited_for_and_the_copy_is_exact(
    clusters, fresh, spark, prefix, tmp_path
):
    """The copy task, not the driver, meets the outage: the schema registered after the run's sync must be copied to
    the target registry by the task, which retries while the registry restarts (its client's 30 s, then Spark's task
    attempts); the records are copied once, naming the target's id."""
    pair = (registry_url(fresh["fa"]), registry_url(fresh["fb"]))
    topic, remote = f"{prefix}.blip", f"a.{prefix}.blip"
    down = fresh["fb"]
    with late_schema_batch(clusters, spark, tmp_path, prefix, pair, topic) as (flow, store, planned, source):
        assert stop_registry(down.name, down.home)
        with ThreadPoolExecutor(1) as pool:
            restarted = pool.submit(restart_after, 3.0, down)
            copy_and_record(flow, store, planned, lambda: spark)
            restarted.result()
        mapped = store.schema_ids(flow.name)
    assert_late_schema_copied(clusters["b"].bootstrap, pair[1], remote, source, mapped)


def restart_after(seconds: float, registry: LocalRegistry) -> None:
    """Start the stopped ``registry`` again, on its port and with its schemas, ``seconds`` from now."""
    time.sleep(seconds)
    start_registry(registry.name, registry.port, registry.home, registry.home / f"{registry.name}-data")


@contextmanager
def global_levels(levels: dict[str, str]) -> Iterator[None]:
    """Each registry (by URL) at a global compatibility level within the block, its own level again after it."""
    before = {url: get(url, "/config")["compatibilityLevel"] for url in levels}
    try:
        for url, level in levels.items():
            put_global_level(url, level)
        yield
    finally:
        for url, level in before.items():
            put_global_level(url, level)


def put_global_level(url: str, level: str) -> None:
    httpx.put(f"{url}/config", json={"compatibility": level}, headers=CONTENT_TYPE, timeout=30).raise_for_status()


def test_each_target_subject_gets_the_source_level_in_force_so_a_source_evolution_never_dead_ends(
    clusters, fresh, prefix, tmp_path
):
    """Source registry at NONE (Apicurio's default), target at BACKWARD, a subject evolved on the source in a way
    BACKWARD refuses: its target subject is set to NONE before its first version, so both versions are copied; a
    subject with a level of its own gets that level."""
    url_a, url_b = registry_url(fresh["fa"]), registry_url(fresh["fb"])
    inherits, own = f"{prefix}.inherits", f"{prefix}.own"
    for topic in (inherits, own):
        create_topic(clusters["a"].bootstrap, topic)
        register(url_a, f"{topic}-value", avro("Level", prefix, [{"name": "n", "type": "int"}]))
    config = schema_config(tmp_path, clusters, prefix, url_a, url_b)
    with global_levels({url_a: "NONE", url_b: "BACKWARD"}):
        set_compatibility(url_a, f"{own}-value", "FORWARD")  # a level of its own, unlike a's global one
        register(url_a, f"{inherits}-value", avro("Level", prefix, [{"name": "n", "type": "string"}]))
        with opened(config) as (flow, store):
            report = schemas_verb(flow, store, dry_run=False)
        in_force = {
            topic: get(url_b, f"/config/a.{topic}-value?defaultToGlobal=true")["compatibilityLevel"]
            for topic in (inherits, own)
        }
        copied = get(url_b, f"/subjects/a.{inherits}-value/versions")
    levels = {s.subject: s.compatibility for s in report.subjects}
    assert levels == {f"{inherits}-value": "NONE", f"{own}-value": "FORWARD"}
    assert in_force == {inherits: "NONE", own: "FORWARD"}
    assert len(copied) == 2


# -- 8. airmirror schemas --------------------------------------------------------------------------------------------
def run_cli(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "AIRMIRROR_HOME": str(home)}
    return subprocess.run(
        [sys.executable, "-m", "airmirror.cli", *args], capture_output=True, text=True, env=env, timeout=300
    )


def test_the_schemas_verb_lists_in_a_dry_run_registers_without_and_refuses_a_flow_without_registries(
    clusters, registries, prefix, tmp_path, test_home
):
    url_a, url_b = urls(registries)
    topic, remote, address_subject = f"{prefix}.cli", f"a.{prefix}.cli", f"{prefix}.Address"
    _, address, v1, v2 = order_schemas(prefix)
    register(url_a, address_subject, address)
    references = [{"name": f"{prefix}.Address", "subject": address_subject, "version": 1}]
    source_ids = [register(url_a, f"{topic}-value", schema, references=references) for schema in (v1, v2)]
    record_subject = f"{prefix}.Rec"  # RecordNameStrategy: synced by airmirror.schema.record.subjects, name kept
    record_id = register(url_a, record_subject, avro("Rec", prefix, [{"name": "r", "type": "int"}]))
    create_topic(clusters["a"].bootstrap, topic)
    config = schema_config(tmp_path, clusters, prefix, url_a, url_b, f"airmirror.schema.record.subjects = {prefix}.Rec")

    dry = run_cli(test_home, "schemas", str(config), "--flow", "a->b", "--dry-run", "--json")
    assert dry.returncode == 0, dry.stderr
    report = json.loads(dry.stdout)
    assert report["dry_run"] is True and report["mode"] == "translate"
    listed = {s["subject"]: s for s in report["subjects"]}
    assert sorted(listed) == sorted([f"{topic}-value", record_subject])
    subject = listed[f"{topic}-value"]
    assert subject["target_subject"] == f"{remote}-value"
    assert [(v["version"], v["source_id"], v["registered"]) for v in subject["versions"]] == [
        (1, source_ids[0], True),
        (2, source_ids[1], True),
    ]
    assert listed[record_subject]["target_subject"] == record_subject
    assert [(v["source_id"], v["registered"]) for v in listed[record_subject]["versions"]] == [(record_id, True)]
    for untouched in (f"{remote}-value", address_subject, record_subject):
        assert versions(url_b, untouched) == [], untouched

    real = run_cli(test_home, "schemas", str(config), "--flow", "a->b", "--json")
    assert real.returncode == 0, real.stderr
    report = json.loads(real.stdout)
    assert report["dry_run"] is False and report["registered"] == 3
    assert versions(url_b, f"{remote}-value") == [1, 2] and versions(url_b, address_subject) == [1]
    assert versions(url_b, record_subject) == [1]
    target_ids = [subject_version(url_b, f"{remote}-value", v)["id"] for v in (1, 2)]
    listed = {s["subject"]: s for s in report["subjects"]}
    assert [v["target_id"] for v in listed[f"{topic}-value"]["versions"]] == target_ids
    assert {int(k): v for k, v in report["ids"].items()}.items() >= dict(
        zip(source_ids, target_ids, strict=True)
    ).items()

    plain = write_config(tmp_path / "plain.properties", clusters, f"a->b.enabled = true\ntopics = {prefix}.*")
    refused = run_cli(test_home, "schemas", str(plain), "--flow", "a->b", "--dry-run")
    assert refused.returncode == 2 and "airmirror.schema.ids" in refused.stderr, refused.stderr


# -- 9. schema ids in headers ----------------------------------------------------------------------------------------
def header_id_serializer(payload: bytes, ctx: SerializationContext | None, schema_id: Any) -> bytes:
    """confluent-kafka's ``schema.id.serializer`` hook writing the id form (magic 0) into the header: its own
    ``header_schema_id_serializer`` writes a GUID, which Apicurio does not give."""
    assert ctx is not None and isinstance(ctx.headers, list)
    ctx.headers.append((f"__{'key' if ctx.field == KEY else 'value'}_schema_id", schema_id.id_to_bytes()))
    return payload


def test_schema_ids_in_headers_are_rewritten_and_the_unframed_payloads_left_as_they_are(
    clusters, registries, spark, prefix, tmp_path
):
    a, b = clusters["a"].bootstrap, clusters["b"].bootstrap
    url_a, url_b = urls(registries)
    topic, remote = f"{prefix}.headed", f"a.{prefix}.headed"
    key_schema = avro("Key", prefix, [{"name": "k", "type": "string"}])
    # n = 0 first: the raw payload starts with a zero byte, as a framed one would.
    value_schema = avro("Reading", prefix, [{"name": "n", "type": "int"}, {"name": "s", "type": "string"}])
    conf = {"schema.id.serializer": header_id_serializer}
    key_serializer = AvroSerializer(client(url_a), key_schema, conf=conf)
    value_serializer = AvroSerializer(client(url_a), value_schema, conf=conf)
    now = recent_ms()
    source, values = [], []
    for i in range(3):
        headers: list[tuple[str, bytes]] = [("trace", f"t{i}".encode())]
        value = {"n": 0, "s": f"reading {i}"}
        key = key_serializer({"k": f"key {i}"}, SerializationContext(topic, KEY, headers))
        data = value_serializer(value, SerializationContext(topic, VALUE, headers))
        assert data[0] == 0 and framed_id(data) is not None  # looks framed, but is not: its id is in the header
        source.append(Record(key, data, tuple(headers), now + i))
        values.append(value)
    guid_header = b"\x01" + uuid.uuid4().bytes  # a GUID (magic 1): Apicurio has none, so no registry names it
    source.append(Record(None, source[0].value, (("__value_schema_id", guid_header),), now + 3))
    create_topic(a, topic)
    produce(a, topic, 0, source)
    failing = schema_config(tmp_path, clusters, prefix, url_a, url_b)

    with pytest.raises(ReplicationFailure) as failed:
        replicate(failing, spark)
    message = str(failed.value)
    assert f"{topic}-0@3: the header __value_schema_id names schema GUID" in message, message
    assert "airmirror.schema.unknown = pass" in message and committed_records(b, remote) == []
    config = schema_config(tmp_path, clusters, prefix, url_a, url_b, "airmirror.schema.unknown = pass")
    assert replicate(config, spark).summary.records == 4
    with opened(config) as (flow, store):
        assert store.schema_passed(flow.name) == 1

    ids = id_map(url_a, url_b, {f"{topic}-key": f"{remote}-key", f"{topic}-value": f"{remote}-value"})
    target = committed_records(b, remote)
    assert len(target) == 4
    for s, t in zip(source, target, strict=True):
        assert (t.key, t.value, t.timestamp) == (s.key, s.value, s.timestamp)  # payloads untouched
        expected = tuple(
            (name, translated(data, ids) if name in ("__key_schema_id", "__value_schema_id") else data)
            for name, data in s.headers
        )
        assert t.headers == expected
    assert target[3].headers == source[3].headers
    key_deserializer, value_deserializer = AvroDeserializer(client(url_b)), AvroDeserializer(client(url_b))
    for t, value in zip(target[:3], values, strict=True):
        headers = list(t.headers)
        assert value_deserializer(t.value, SerializationContext(remote, VALUE, headers)) == value
        assert key_deserializer(t.key, SerializationContext(remote, KEY, headers))["k"].startswith("key ")


# -- 10. schemas that used to dead-end a flow (issue 34) -------------------------------------------------------------
def soft_delete(url: str, subject: str, version: int) -> None:
    httpx.delete(f"{url}/subjects/{subject}/versions/{version}", timeout=30).raise_for_status()


def test_versions_met_out_of_order_soft_deleted_versions_and_references_outside_the_batch_never_dead_end(
    clusters, registries, spark, prefix, tmp_path
):
    """One flow, one topic per case, ``airmirror.schema.unknown = pass``:

    - ``ooo``: v2 and v3 registered after the run's sync, a v3 record met before the v2 record: the target subject's
      versions follow the source's order;
    - ``ref``: a new version, met mid-run, references the subject of a replicated topic the batch does not copy: the
      referenced subject is registered under its remote topic's name, never under the source's;
    - ``sdok``: a record of a soft-deleted version: its schema is registered on the target under a subject of its
      own, soft-deleted there, so the record decodes and the target subject's latest version stays the source's;
    - ``sdno``: the same where the subject's level (BACKWARD, the target subject's too) refuses the old version after
      the newer one.

    Every record decodes with the target registry alone, none passed, ``verify`` says equal, and the next run goes
    on."""
    a, b = clusters["a"].bootstrap, clusters["b"].bootstrap
    url_a, url_b = urls(registries)
    ooo, ref, customers, sdok, sdno = (f"{prefix}.{name}" for name in ("ooo", "ref", "customers", "sdok", "sdno"))
    for topic in (ooo, ref, customers, sdok, sdno):
        create_topic(a, topic)
    now = recent_ms()
    n_field = {"name": "n", "type": "int"}
    ooo_schemas = [
        avro("Ooo", prefix, [n_field]),
        avro("Ooo", prefix, [n_field, {"name": "b", "type": "string", "default": ""}]),
        avro("Ooo", prefix, [n_field, {"name": "c", "type": "int"}]),
    ]
    ref_v1 = avro("Ref", prefix, [n_field])
    produce(a, ooo, 0, [Record(b"0", avro_serializer(url_a, ooo_schemas[0])({"n": 0}, ooo, VALUE), (), now)])
    produce(a, ref, 0, [Record(b"0", avro_serializer(url_a, ref_v1)({"n": 0}, ref, VALUE), (), now)])
    # Soft-deleted versions, met in records the first run copies.
    sd_schemas = {
        sdok: (avro("SdOk", prefix, [n_field]), avro("SdOk", prefix, [n_field, {"name": "m", "type": "int"}])),
        sdno: (avro("SdNo", prefix, [n_field, {"name": "gone", "type": "string"}]), avro("SdNo", prefix, [n_field])),
    }
    set_compatibility(url_a, f"{sdno}-value", "BACKWARD")  # v2 drops a field: fine; v1 after v2: refused
    sd_records = {}
    for topic, (old, new) in sd_schemas.items():
        old_value = {"n": 1, "gone": "x"} if topic == sdno else {"n": 1}
        sd_records[topic] = [
            Record(b"old", avro_serializer(url_a, old)(old_value, topic, VALUE), (), now),
            Record(
                b"new",
                avro_serializer(url_a, new)({"n": 2, "m": 2} if topic == sdok else {"n": 2}, topic, VALUE),
                (),
                now + 1,
            ),
        ]
        produce(a, topic, 0, sd_records[topic])
        soft_delete(url_a, f"{topic}-value", 1)
    config = schema_config(tmp_path, clusters, prefix, url_a, url_b, "airmirror.schema.unknown = pass")

    assert replicate(config, spark).summary.records == 6

    with opened(config) as (flow, store), shared_clients():
        topics = sync_flow_topics(flow, store, BatchOptions())
        serialize = [avro_serializer(url_a, schema) for schema in ooo_schemas[1:]]  # registers v2, then v3
        ooo_late = [
            Record(b"3", serialize[1]({"n": 3, "c": 3}, ooo, VALUE), (), now + 3),
            Record(b"2", serialize[0]({"n": 2, "b": "two"}, ooo, VALUE), (), now + 4),
        ]
        produce(a, ooo, 0, ooo_late)
        customer = avro("Customer", prefix, [{"name": "name", "type": "string"}])
        register(url_a, f"{customers}-value", customer)
        ref_v2 = Schema(
            avro("Ref", prefix, [n_field, {"name": "who", "type": f"{prefix}.Customer", "default": {"name": ""}}]),
            "AVRO",
            [SchemaReference(f"{prefix}.Customer", f"{customers}-value", 1)],
        )
        ref_late = [
            Record(b"1", avro_serializer(url_a, ref_v2)({"n": 1, "who": {"name": "c"}}, ref, VALUE), (), now + 5)
        ]
        produce(a, ref, 0, ref_late)
        planned = plan_batch(flow, store, topics.mappings, BatchOptions())
        assert {r.topic for r in planned.ranges if r.end > r.start} == {ooo, ref}, "customers is outside the batch"
        copy_and_record(flow, store, planned, lambda: spark)
        passed = store.schema_passed(flow.name)

    deserialize = avro_deserializer(url_b)
    # ooo: the target's versions in the source's order.
    assert [subject_version(url_b, f"a.{ooo}-value", n)["schema"] for n in (1, 2, 3)] == [
        subject_version(url_a, f"{ooo}-value", n)["schema"] for n in (1, 2, 3)
    ]
    assert [deserialize(r.value, f"a.{ooo}", VALUE)["n"] for r in committed_records(b, f"a.{ooo}")] == [0, 3, 2]
    # ref: the referenced subject under its remote topic's name only.
    assert versions(url_b, f"a.{customers}-value") == [1] and versions(url_b, f"{customers}-value") == []
    assert subject_version(url_b, f"a.{ref}-value", 2)["references"] == [
        {"name": f"{prefix}.Customer", "subject": f"a.{customers}-value", "version": 1}
    ]
    assert deserialize(committed_records(b, f"a.{ref}")[1].value, f"a.{ref}", VALUE)["who"] == {"name": "c"}
    # sdok, sdno: decode; each target subject holds the source's latest only; the old schema is soft-deleted under
    # a subject of its own.
    for topic, decoded in ((sdok, [{"n": 1}, {"n": 2, "m": 2}]), (sdno, [{"n": 1, "gone": "x"}, {"n": 2}])):
        copied = committed_records(b, f"a.{topic}")
        assert [deserialize(r.value, f"a.{topic}", VALUE) for r in copied] == decoded
        latest = subject_version(url_a, f"{topic}-value")["schema"]
        assert [
            subject_version(url_b, f"a.{topic}-value", n)["schema"] for n in versions(url_b, f"a.{topic}-value")
        ] == [latest]
        old_id = framed_id(sd_records[topic][0].value)
        assert get(url_b, f"/subjects/a.{topic}-value.airmirror-deleted-{old_id}/versions?deleted=true") == [1]
        assert f"a.{topic}-value.airmirror-deleted-{old_id}" not in get(url_b, "/subjects")
    assert passed == 0

    verification = verify_flow_of(config, spark)
    assert verification.equal, [(p.remote_topic, p.verdict, p.reason) for p in verification.partitions]
    assert replicate(config, spark).summary is None  # the next run goes on: nothing left, nothing copied twice


def verify_flow_of(config: Path, spark: Any) -> Verification:
    with opened(config) as (flow, store):
        return verify_flow(flow, store, lambda: spark)
