"""``airmirror verify`` of a flow that translates schema ids, against real clusters, real schema registries and real
Spark: Avro records copied with their ids translated compare ``equal`` through the flow's id map; a tampered map (a
wrong target id, then a deleted mapping) is a ``schema_id`` difference that names the record, the side and the ids,
in ``--json`` and in text, and the command exits 1."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable
from pathlib import Path

import pytest

from airmirror.config import load_config
from airmirror.migration.verification import verify_flow
from airmirror.model import Verdict, Verification
from airmirror.schemas.framing import framed_id
from airmirror.store import MetadataStore
from tests.cli_helpers import Run, airmirror_in_process
from tests.conftest import write_config
from tests.kafka_helpers import Record, create_topic, produce, read_partition, recent_ms
from tests.mirror_helpers import replicate
from tests.registry_helpers import avro_deserializer, avro_serializer, registry_url

pytestmark = pytest.mark.integration

ORDER = json.dumps(
    {
        "type": "record",
        "name": "Order",
        "namespace": "airmirror.test",
        "fields": [{"name": "id", "type": "int"}, {"name": "item", "type": "string"}],
    }
)
RECORDS = 20


@pytest.fixture
def airmirror() -> Callable[..., Run]:
    """The ``airmirror`` command, run in this process (its ``main``), with what it printed."""
    return airmirror_in_process


def verify(config: Path, spark) -> Verification:
    flow = load_config(config).flow("a->b")
    with MetadataStore.open(flow.metadata_db_url) as store:
        return verify_flow(flow, store, lambda: spark)


def change_map(db: Path, statement: str, *parameters: int) -> None:
    with sqlite3.connect(db) as connection:
        assert connection.execute(statement, parameters).rowcount == 1


def test_a_translated_copy_is_equal_and_a_tampered_id_mapping_is_named(
    clusters, registries, spark, prefix, tmp_path, airmirror
):
    a, b = clusters["a"].bootstrap, clusters["b"].bootstrap
    source_url, target_url = registry_url(registries["a"]), registry_url(registries["b"])
    topic, remote = f"{prefix}.orders", f"a.{prefix}.orders"
    create_topic(a, topic, 1)
    serialize, base = avro_serializer(source_url, ORDER), recent_ms()
    orders = [{"id": i, "item": f"item {i}"} for i in range(RECORDS)]
    produce(a, topic, 0, [Record(f"k{i}".encode(), serialize(o, topic), (), base + i) for i, o in enumerate(orders)])
    config = write_config(
        tmp_path / "mm2.properties",
        clusters,
        f"a->b.enabled = true\ntopics = {prefix}.*\n"
        f"a.schema.registry.url = {source_url}\nb.schema.registry.url = {target_url}",
    )
    replicate(config, spark)
    source_id = framed_id(read_partition(a, topic, 0)[0][1].value)
    copies = [record.value for _, record in read_partition(b, remote, 0)]
    target_id = framed_id(copies[0])
    assert source_id is not None and target_id is not None and source_id != target_id
    deserialize = avro_deserializer(target_url)
    assert [deserialize(value, remote) for value in copies] == orders

    verification = verify(config, spark)

    assert verification.equal, verification
    (partition,) = verification.partitions
    assert (partition.source_records, partition.target_records, partition.schema_id) == (RECORDS, RECORDS, 0)
    assert partition.source_digest == partition.target_digest

    db = tmp_path / "metadata.db"
    change_map(db, "UPDATE airmirror_schema_ids SET target_id = ? WHERE source_id = ?", target_id + 1, source_id)
    wrong = airmirror("verify", str(config), "--flow", "a->b", "--json")

    assert wrong.returncode == 1, wrong.stderr
    document = json.loads(wrong.stdout)
    assert not document["equal"] and {v: n for v, n in document["verdicts"].items() if n} == {"schema_id": 1}
    (found,) = document["partitions"]
    named = f"source offset 0, value: source id {source_id} maps to {target_id + 1}, the copy holds {target_id}"
    assert (found["verdict"], found["first_offset"], found["schema_id"], found["different"]) == (
        "schema_id",
        0,
        RECORDS,
        0,
    )
    assert found["schema_id_difference"] == named
    assert named in found["reason"]

    change_map(db, "DELETE FROM airmirror_schema_ids WHERE source_id = ?", source_id)
    unmapped = airmirror("verify", str(config), "--flow", "a->b")

    assert unmapped.returncode == 1, unmapped.stderr
    assert "1 schema_id" in unmapped.stdout
    assert "SCHEMA_ID at source offset 0" in unmapped.stdout
    assert f"source id {source_id} is unmapped, the copy holds {target_id}" in unmapped.stdout
    assert f"{RECORDS} schema_id" in unmapped.stdout
    with MetadataStore.open(load_config(config).flow("a->b").metadata_db_url) as store:
        stored = store.last_verification("a->b")
    assert stored is not None and [(p.verdict, p.schema_id) for p in stored.partitions] == [
        (Verdict.SCHEMA_ID, RECORDS)
    ]
