"""``airmirror verify`` against real clusters and real Spark: equal after a replication, extra after a record is
written straight into the remote topic, missing after the cursor was moved past uncopied records, equal with
compaction noted after the source was compacted; bad input and an unfinished batch are refused."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType

from airmirror.cli import main
from airmirror.config import load_config
from airmirror.model import Verdict
from airmirror.replication.options import BatchOptions
from airmirror.replication.pipeline import plan_batch, replicate_once, sync_flow_topics
from airmirror.replication.verification import verify_flow
from airmirror.store import MetadataStore
from tests.conftest import write_config
from tests.kafka_helpers import Record, create_topic, end_offset, produce, read_partition, recent_ms, sample_records

pytestmark = pytest.mark.integration


@dataclass(frozen=True)
class Run:
    returncode: int
    stdout: str
    stderr: str


@pytest.fixture
def airmirror(capsys) -> Callable[..., Run]:
    """The ``airmirror`` command, run in this process (its ``main``), with what it printed."""

    def run(*args: str) -> Run:
        capsys.readouterr()
        code = main(list(args))
        printed = capsys.readouterr()
        return Run(code, printed.out, printed.err)

    return run


def replicate(config: Path, spark, **options) -> None:
    flow = load_config(config).flow("a->b")
    with MetadataStore.open(flow.metadata_db_url) as store:
        replicate_once(flow, store, BatchOptions(**options), lambda: spark)


def verify(config: Path, spark, topics: str | None = None):
    flow = load_config(config).flow("a->b")
    with MetadataStore.open(flow.metadata_db_url) as store:
        return verify_flow(flow, store, lambda: spark, topics)


def with_headers(count: int, label: str) -> list[Record]:
    base = recent_ms()
    return [Record(f"{label}-{i}".encode(), f"value {i}".encode(), (("seq", str(i).encode()), ("empty", None)), base + i) for i in range(count)]


def test_equal_after_replication_then_extra_at_a_record_written_into_the_target(clusters, spark, prefix, tmp_path, airmirror):
    a, b = clusters["a"].bootstrap, clusters["b"].bootstrap
    topic = f"{prefix}.orders"
    create_topic(a, topic, 2)
    for p in range(2):
        produce(a, topic, p, with_headers(40, f"p{p}"))
    config = write_config(tmp_path / "mm2.properties", clusters, f"a->b.enabled = true\ntopics = {prefix}.*")
    replicate(config, spark)

    verification = verify(config, spark)

    assert verification.equal and [p.verdict for p in verification.partitions] == [Verdict.EQUAL] * 2
    assert all(p.source_records == p.target_records == 40 and p.source_digest == p.target_digest for p in verification.partitions)

    intruder = end_offset(b, f"a.{topic}", 1)
    produce(b, f"a.{topic}", 1, [Record(b"intruder", b"not from the source", (), recent_ms())])

    result = airmirror("verify", str(config), "--flow", "a->b", "--json")

    assert result.returncode == 1, result.stderr
    document = json.loads(result.stdout)
    assert document["verdicts"] == {"equal": 1, "missing": 0, "extra": 1, "different": 0} and not document["equal"]
    extra = document["partitions"][1]
    assert (extra["verdict"], extra["first_offset"], extra["extra"]) == ("extra", intruder, 1)
    assert "verify: 2 of 2 partitions compared" in result.stderr
    status = airmirror("status", str(config), "--flow", "a->b", "--json")
    assert json.loads(status.stdout)["verification"]["id"] == document["id"]
    text = airmirror("status", str(config), "--flow", "a->b")
    assert f"EXTRA at target offset {intruder}" in text.stdout


def test_missing_from_the_first_record_skipped_by_a_moved_cursor(clusters, spark, prefix, tmp_path):
    a = clusters["a"].bootstrap
    topic = f"{prefix}.events"
    create_topic(a, topic)
    produce(a, topic, 0, sample_records(30, "e", recent_ms()))
    config = write_config(tmp_path / "mm2.properties", clusters, f"a->b.enabled = true\ntopics = {prefix}.*")
    replicate(config, spark, max_records=10)
    replicate(config, spark, start_from="latest", reset_cursor=True)
    produce(a, topic, 0, sample_records(5, "f", recent_ms()))
    replicate(config, spark)

    [partition] = verify(config, spark).partitions

    assert (partition.verdict, partition.first_offset, partition.missing) == (Verdict.MISSING, 10, 20)
    assert (partition.source_records, partition.target_records) == (35, 15)


def test_a_source_compacted_after_the_copy_is_equal_with_compaction_noted(clusters, spark, prefix, tmp_path):
    a = clusters["a"].bootstrap
    topic = f"{prefix}.profiles"
    create_topic(a, topic, 1, {"cleanup.policy": "compact"})
    base = recent_ms()
    produce(a, topic, 0, [Record(f"k{i % 4}".encode(), None if i == 38 else f"v{i}".encode(), (), base + i) for i in range(40)])
    config = write_config(tmp_path / "mm2.properties", clusters, f"a->b.enabled = true\ntopics = {prefix}.*")
    replicate(config, spark)
    compact_now(a, topic)

    [partition] = verify(config, spark).partitions

    assert (partition.verdict, partition.missing, partition.extra) == (Verdict.EQUAL, 0, 0)
    assert partition.compacted_source > 0 and partition.target_records == 40


def compact_now(bootstrap: str, topic: str) -> None:
    """Make the cleaner compact ``topic`` now: short segments and any dirty ratio, then roll segments with
    records of fresh keys until holes show in the first 40 offsets."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    settings = {"segment.ms": "100", "min.cleanable.dirty.ratio": "0.001"}
    resource = ConfigResource(ResourceType.TOPIC, topic, incremental_configs=[ConfigEntry(k, v, incremental_operation=AlterConfigOpType.SET) for k, v in settings.items()])
    for future in admin.incremental_alter_configs([resource]).values():
        future.result(30)
    deadline = time.monotonic() + 90
    while len([o for o, _ in read_partition(bootstrap, topic, 0) if o < 40]) == 40:
        assert time.monotonic() < deadline, "the broker never compacted the topic"
        time.sleep(1)
        produce(bootstrap, topic, 0, [Record(f"roll-{time.time()}".encode(), b"x", (), recent_ms())])


def test_bad_input_is_refused_with_exit_2_naming_it(clusters, prefix, tmp_path, airmirror):
    config = write_config(tmp_path / "mm2.properties", clusters, f"a->b.enabled = true\ntopics = {prefix}.*")

    bad_regex = airmirror("verify", str(config), "--flow", "a->b", "--topics", "[")
    nothing = airmirror("verify", str(config), "--flow", "a->b")
    unknown = airmirror("verify", str(config), "--flow", "a->c")

    assert bad_regex.returncode == 2 and "--topics: invalid regex '['" in bad_regex.stderr
    assert nothing.returncode == 2 and "--flow a->b: no partition has been replicated yet" in nothing.stderr
    assert unknown.returncode == 2 and "a->c" in unknown.stderr


def test_an_unfinished_batch_is_refused_until_it_is_finished(clusters, prefix, tmp_path, airmirror):
    a = clusters["a"].bootstrap
    create_topic(a, f"{prefix}.late")
    produce(a, f"{prefix}.late", 0, sample_records(5, "l", recent_ms()))
    config = write_config(tmp_path / "mm2.properties", clusters, f"a->b.enabled = true\ntopics = {prefix}.*")
    flow = load_config(config).flow("a->b")
    with MetadataStore.open(flow.metadata_db_url) as store:
        options = BatchOptions()
        batch = plan_batch(flow, store, sync_flow_topics(flow, store, options).mappings, options)

    result = airmirror("verify", str(config), "--flow", "a->b")

    assert result.returncode == 1
    assert f"flow a->b has unfinished batch {batch.batch_id}" in result.stderr
