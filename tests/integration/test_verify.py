"""``airmirror verify`` against real clusters and real Spark: equal after a replication, extra after a record is
written straight into the remote topic, missing after the cursor was moved past uncopied records, equal with
compaction noted after the source was compacted; partitions whose topics were stopped, deleted or recreated,
or whose records no run maps, get verdicts of their own; records deleted from one side are excused only where
retention explains them; folded offset-sync runs compare equal, and copies deleted from the target into a
folded run are missing; bad input and an unfinished batch are refused."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from confluent_kafka import TopicPartition
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType

from airmirror.config import load_config
from airmirror.migration.verification import verify_flow
from airmirror.model import PartitionKey, Verdict
from airmirror.replication.options import BatchOptions
from airmirror.replication.pipeline import plan_batch, replicate_once, sync_flow_topics
from airmirror.store import MetadataStore, folding, retention
from tests.cli_helpers import Run, airmirror_in_process
from tests.conftest import write_config
from tests.kafka_helpers import (
    Record,
    create_topic,
    delete_topic_and_wait,
    end_offset,
    produce,
    read_partition,
    recent_ms,
    recreate_topic,
    sample_records,
)

pytestmark = pytest.mark.integration


@pytest.fixture
def airmirror() -> Callable[..., Run]:
    """The ``airmirror`` command, run in this process (its ``main``), with what it printed."""
    return airmirror_in_process


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
    return [
        Record(f"{label}-{i}".encode(), f"value {i}".encode(), (("seq", str(i).encode()), ("empty", None)), base + i)
        for i in range(count)
    ]


def test_equal_after_replication_then_extra_at_a_record_written_into_the_target(
    clusters, spark, prefix, tmp_path, airmirror
):
    a, b = clusters["a"].bootstrap, clusters["b"].bootstrap
    topic = f"{prefix}.orders"
    create_topic(a, topic, 2)
    for p in range(2):
        produce(a, topic, p, with_headers(40, f"p{p}"))
    config = write_config(tmp_path / "mm2.properties", clusters, f"a->b.enabled = true\ntopics = {prefix}.*")
    replicate(config, spark)

    verification = verify(config, spark)

    assert verification.equal and [p.verdict for p in verification.partitions] == [Verdict.EQUAL] * 2
    assert all(
        p.source_records == p.target_records == 40 and p.source_digest == p.target_digest
        for p in verification.partitions
    )

    intruder = end_offset(b, f"a.{topic}", 1)
    produce(b, f"a.{topic}", 1, [Record(b"intruder", b"not from the source", (), recent_ms())])

    result = airmirror("verify", str(config), "--flow", "a->b", "--json")

    assert result.returncode == 1, result.stderr
    document = json.loads(result.stdout)
    assert {verdict: n for verdict, n in document["verdicts"].items() if n} == {
        "equal": 1,
        "extra": 1,
    } and not document["equal"]
    assert set(document["verdicts"]) == {verdict.value for verdict in Verdict}
    extra = document["partitions"][1]
    assert (extra["verdict"], extra["first_offset"], extra["extra"]) == ("extra", intruder, 1)
    assert extra["reason"] == f"target offset {intruder} is no copy of a source record"
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
    produce(
        a,
        topic,
        0,
        [Record(f"k{i % 4}".encode(), None if i == 38 else f"v{i}".encode(), (), base + i) for i in range(40)],
    )
    config = write_config(tmp_path / "mm2.properties", clusters, f"a->b.enabled = true\ntopics = {prefix}.*")
    replicate(config, spark)
    compact_now(a, topic)

    [partition] = verify(config, spark).partitions

    assert (partition.verdict, partition.missing, partition.extra) == (Verdict.EQUAL, 0, 0)
    assert partition.compacted_source > 0 and partition.target_records == 40


def compact_now(bootstrap: str, topic: str) -> None:
    """Make the cleaner compact ``topic`` now: short segments and any dirty ratio, then roll segments with
    records of fresh keys until holes show in the first 40 offsets."""
    set_topic_configs(bootstrap, topic, {"segment.ms": "100", "min.cleanable.dirty.ratio": "0.001"})
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


def delete_records(bootstrap: str, topic: str, partition: int, before: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.delete_records([TopicPartition(topic, partition, before)]).values():
        future.result(30)


def set_topic_configs(bootstrap: str, topic: str, settings: dict[str, str]) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    entries = [ConfigEntry(k, v, incremental_operation=AlterConfigOpType.SET) for k, v in settings.items()]
    for future in admin.incremental_alter_configs(
        [ConfigResource(ResourceType.TOPIC, topic, incremental_configs=entries)]
    ).values():
        future.result(30)


def test_partitions_that_cannot_be_compared_get_verdicts_of_their_own_never_equal(
    clusters, spark, prefix, tmp_path, airmirror
):
    a, b = clusters["a"].bootstrap, clusters["b"].bootstrap
    names = {label: f"{prefix}.{label}" for label in ("kept", "stopped", "gone", "dropped", "reborn", "latest")}
    for label in ("kept", "stopped", "gone", "dropped", "reborn"):
        create_topic(a, names[label])
        produce(a, names[label], 0, sample_records(10, label, recent_ms()))
    config = write_config(tmp_path / "mm2.properties", clusters, f"a->b.enabled = true\ntopics = {prefix}.*")
    replicate(config, spark)
    create_topic(a, names["latest"])
    produce(a, names["latest"], 0, sample_records(10, "latest", recent_ms()))
    replicate(config, spark, topics_regex=names["latest"], start_from="latest")
    target, source = AdminClient({"bootstrap.servers": b}), AdminClient({"bootstrap.servers": a})
    target.delete_topics([f"a.{names['stopped']}"], operation_timeout=30)[f"a.{names['stopped']}"].result()
    delete_topic_and_wait(target, f"a.{names['stopped']}")
    assert airmirror("replicate", str(config), "--flow", "a->b").returncode == 1  # stops the topic
    target.delete_topics([f"a.{names['gone']}"], operation_timeout=30)[f"a.{names['gone']}"].result()
    delete_topic_and_wait(target, f"a.{names['gone']}")
    source.delete_topics([names["dropped"]], operation_timeout=30)[names["dropped"]].result()
    delete_topic_and_wait(source, names["dropped"])
    recreate_topic(a, names["reborn"])
    produce(a, names["reborn"], 0, sample_records(10, "reborn", recent_ms()))

    result = airmirror("verify", str(config), "--flow", "a->b", "--json")

    assert result.returncode == 1, result.stderr
    verdicts = {p["topic"]: (p["verdict"], p["reason"]) for p in json.loads(result.stdout)["partitions"]}
    assert {topic: verdict for topic, (verdict, _) in verdicts.items()} == {
        names["kept"]: "equal",
        names["stopped"]: "stopped",
        names["gone"]: "target_deleted",
        names["dropped"]: "source_deleted",
        names["reborn"]: "source_recreated",
        names["latest"]: "no_runs",
    }
    assert verdicts[names["kept"]][1] == "" and all(
        reason for verdict, reason in verdicts.values() if verdict != "equal"
    )
    assert f"remote topic a.{names['stopped']} on cluster b was deleted" in verdicts[names["stopped"]][1]
    assert "0 to 9 lie below the cursor" in verdicts[names["latest"]][1]
    narrowed = airmirror("verify", str(config), "--flow", "a->b", "--topics", f"{names['kept']}|{names['stopped']}")
    assert narrowed.returncode == 1 and "STOPPED: replication stopped" in narrowed.stdout, narrowed.stderr


def test_records_deleted_from_one_side_are_missing_unless_retention_explains_them(clusters, spark, prefix, tmp_path):
    a, b = clusters["a"].bootstrap, clusters["b"].bootstrap
    young, aged, both = f"{prefix}.young", f"{prefix}.aged", f"{prefix}.both"
    hours_ago = recent_ms() - 2 * 3_600_000
    for topic, stamped in ((young, recent_ms()), (aged, hours_ago), (both, recent_ms())):
        create_topic(a, topic)
        produce(a, topic, 0, sample_records(30, topic, stamped))
    config = write_config(tmp_path / "mm2.properties", clusters, f"a->b.enabled = true\ntopics = {prefix}.*")
    replicate(config, spark)
    delete_records(b, f"a.{young}", 0, 10)  # an operator's mistake: 7-day retention, the source still holds them
    set_topic_configs(a, aged, {"retention.ms": "3600000"})
    delete_records(a, aged, 0, 10)  # what the source's one-hour retention does to records two hours old
    delete_records(a, both, 0, 10)
    delete_records(b, f"a.{both}", 0, 10)

    partitions = {p.topic: p for p in verify(config, spark).partitions}

    missing = partitions[young]
    assert (missing.verdict, missing.first_offset, missing.missing, missing.target_records) == (
        Verdict.MISSING,
        0,
        10,
        20,
    )
    assert "deleted from the target while the source holds them" in missing.reason
    assert (partitions[aged].verdict, partitions[aged].source_start, partitions[aged].target_start) == (
        Verdict.EQUAL,
        10,
        10,
    )
    assert "deleted by the source's retention.ms" in partitions[aged].note
    assert (partitions[both].verdict, partitions[both].source_records) == (Verdict.EQUAL, 20)
    assert "deleted on both sides" in partitions[both].note


def test_folded_runs_compare_equal_and_copies_deleted_from_the_target_into_one_are_missing(
    clusters, spark, prefix, tmp_path, airmirror, monkeypatch
):
    for module in (
        folding,
        retention,
    ):  # fold after a handful of batches: the newest run stays exact, two fold at a time
        monkeypatch.setattr(module, "EXACT_RUNS", 1)
        monkeypatch.setattr(module, "FOLD_SIZE", 2)
    a, b = clusters["a"].bootstrap, clusters["b"].bootstrap
    topic = f"{prefix}.folded"
    create_topic(a, topic)
    produce(a, topic, 0, sample_records(20, "f", recent_ms()))
    config = write_config(tmp_path / "mm2.properties", clusters, f"a->b.enabled = true\ntopics = {prefix}.*")
    for _ in range(5):
        replicate(config, spark, max_records=4)
    flow = load_config(config).flow("a->b")
    with MetadataStore.open(flow.metadata_db_url) as store:
        store.fold_runs(flow.name, [PartitionKey(topic, 0)])
        runs = store.offset_runs(flow.name, PartitionKey(topic, 0))
    folded = [run for run in runs if not run.exact]
    assert folded and folded[0].upstream_start == 0 and folded[0].downstream_length > folded[0].copies

    [partition] = verify(config, spark).partitions

    assert (partition.verdict, partition.source_records, partition.target_records) == (Verdict.EQUAL, 20, 20)

    delete_records(b, f"a.{topic}", 0, folded[0].downstream_start + 2)  # the target only; the source keeps them a week

    result = airmirror("verify", str(config), "--flow", "a->b", "--json")

    assert result.returncode == 1, result.stderr
    [missing] = json.loads(result.stdout)["partitions"]
    assert (missing["verdict"], missing["first_offset"], missing["missing"], missing["target_records"]) == (
        "missing",
        0,
        2,
        18,
    )
    assert "source offset 0 and 1 more were deleted from the target while the source holds them" in missing["reason"]
