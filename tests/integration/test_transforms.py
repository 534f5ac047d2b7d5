"""MM2's SMTs on the copy path, on real clusters and real Spark: Filter with HasHeaderKey and TopicNameMatches,
InsertHeader and DropHeaders, and on JSON MaskField, HeaderFrom, ReplaceField and InsertField; the target equals the
transformed source record by record, and every source offset translates exactly, across drops at chunk and batch
edges, transaction markers, and a partition whose records are all dropped."""

from __future__ import annotations

import threading
import time
from datetime import timedelta
from pathlib import Path

import pytest

from airmirror.checkpoints.translation import Translator
from airmirror.config import load_config
from airmirror.errors import ReplicationFailure
from airmirror.migration.verification import verify_flow
from airmirror.model import PartitionKey, Verdict
from airmirror.replication import continuous
from airmirror.replication.options import BatchOptions
from airmirror.replication.status import flow_status
from airmirror.store import MetadataStore, folding, retention
from tests.conftest import write_config
from tests.integration.test_checkpoints import checkpoints_of
from tests.kafka_helpers import Record, create_topic, end_offset, produce, read_partition, recent_ms
from tests.mirror_helpers import checkpoint, commit_offsets, opened, replicate

pytestmark = pytest.mark.integration

T = "org.apache.kafka.connect.transforms."
STRIPPED = ("authorization", "x-user-email")
TAG = ("mirrored-by", b"airmirror")


def chain(prefix: str) -> str:
    return f"""\
a->b.enabled = true
topics = {prefix}.*
airmirror.transaction.max.records = 7
a->b.transforms = dropPII, dropAudit, tag, strip
a->b.transforms.dropPII.type = {T}Filter
a->b.transforms.dropPII.predicate = isPII
a->b.transforms.dropAudit.type = {T}Filter
a->b.transforms.dropAudit.predicate = isAudit
a->b.transforms.tag.type = {T}InsertHeader
a->b.transforms.tag.header = mirrored-by
a->b.transforms.tag.value.literal = airmirror
a->b.transforms.strip.type = {T}DropHeaders
a->b.transforms.strip.headers = authorization, x-user-email
a->b.predicates = isPII, isAudit
a->b.predicates.isPII.type = {T}predicates.HasHeaderKey
a->b.predicates.isPII.name = pii
a->b.predicates.isAudit.type = {T}predicates.TopicNameMatches
a->b.predicates.isAudit.pattern = a\\.{prefix}\\.audit
"""


def orders(label: str, count: int, pii_every: int) -> list[Record]:
    """Records with an ``authorization`` header each, every ``pii_every``-th with a ``pii`` header too; the last
    record of the list always has one (so a batch can end on a dropped record)."""
    now = recent_ms()
    out = []
    for i in range(count):
        headers: tuple[tuple[str, bytes | None], ...] = (("authorization", b"Bearer s3cret"), ("trace", b"t%d" % i))
        if i % pii_every == 0 or i == count - 1:
            headers += (("pii", b"1"),)
        out.append(Record(f"{label}-k{i}".encode(), f"{label}-v{i}".encode(), headers, now + i))
    return out


def transformed(record: Record) -> Record | None:
    """The oracle: what MM2's chain makes of a record, written out by hand."""
    if any(name == "pii" for name, _ in record.headers):
        return None
    headers = (*(h for h in record.headers if h[0] not in STRIPPED), TAG)
    return Record(record.key, record.value, headers, record.timestamp)


def expected_positions(source: list[tuple[int, Record]], target: list[tuple[int, Record]], end: int) -> list[int]:
    """For every source offset 0..end, the target offset of the first kept record at or after it, else just past
    the last copied record (the brute-force oracle of exact translation across drops)."""
    kept = [offset for offset, record in source if transformed(record) is not None]
    assert len(kept) == len(target)
    after_last = target[-1][0] + 1 if target else 0
    positions = []
    for u in range(end + 1):
        index = next((i for i, offset in enumerate(kept) if offset >= u), None)
        positions.append(after_last if index is None else target[index][0])
    return positions


def translated(config: Path, topic: str, end: int) -> list[int | None]:
    with opened(config) as (flow, store):
        translator = Translator(flow, store)
        key = PartitionKey(topic, 0)
        return [translator.translate({key: u})[key].downstream_offset for u in range(end + 1)]


def test_the_target_equals_the_transformed_source_and_every_offset_translates_exactly(
    clusters, spark, prefix, tmp_path, monkeypatch
):
    a, b = clusters["a"].bootstrap, clusters["b"].bootstrap
    topic, audit = f"{prefix}.orders", f"{prefix}.audit"
    create_topic(a, topic)
    create_topic(a, audit)
    produce(a, topic, 0, orders("plain", 20, pii_every=3))
    produce(a, topic, 0, orders("txn", 9, pii_every=4), transactional_id=f"{prefix}-txn")
    produce(a, audit, 0, orders("audit", 12, pii_every=100))
    config = write_config(tmp_path / "mm2.properties", clusters, chain(prefix))

    first = replicate(config, spark)
    assert first.summary is not None
    for label in ("later", "last"):
        produce(a, topic, 0, orders(label, 10, pii_every=2))
        replicate(config, spark)

    source = read_partition(a, topic, 0)
    target = read_partition(b, f"a.{topic}", 0)
    assert [record for _, record in target] == [kept for _, r in source if (kept := transformed(r)) is not None]
    end = end_offset(a, topic, 0)
    oracle = expected_positions(source, target, end)
    assert translated(config, topic, end) == oracle
    with opened(config) as (flow, store):
        runs = store.offset_runs(flow.name, PartitionKey(topic, 0))
    # drops are holes of their chunk's run: at most a run per chunk transaction, never one per drop
    assert len(runs) <= -(-len(target) // 7) + 2 and sum(len(run.holes) for run in runs) > 0

    assert read_partition(b, f"a.{audit}", 0) == [], "every record of the audit topic is dropped"
    audit_end = end_offset(a, audit, 0)
    with opened(config) as (flow, store):
        assert store.cursors(flow.name)[PartitionKey(audit, 0)] == audit_end
    assert translated(config, audit, audit_end) == [0] * (audit_end + 1)

    again = replicate(config, spark)
    assert again.planned.ranges == [] and again.summary is None
    assert len(read_partition(b, f"a.{topic}", 0)) == len(target)

    dropped = sum(1 for _, r in source if transformed(r) is None)
    first_kept = next(offset for offset, r in source if transformed(r) is not None)
    compared_drops = sum(1 for offset, r in source if transformed(r) is None and offset > first_kept)
    with opened(config) as (flow, store):
        status = {(p.topic, p.records_filtered, p.records_copied) for p in flow_status(flow, store).partitions}
        assert status == {(topic, dropped, len(target)), (audit, 12, 0)}
        verified = {p.topic: p for p in verify_flow(flow, store, lambda: spark).partitions}
    assert {name: (p.verdict, p.filtered) for name, p in verified.items()} == {
        topic: (Verdict.EQUAL, compared_drops),
        audit: (Verdict.EQUAL, 12),
    }
    assert verified[topic].source_digest == verified[topic].target_digest
    produce(b, f"a.{topic}", 0, orders("stray", 1, pii_every=100))
    with opened(config) as (flow, store):
        [damaged] = verify_flow(flow, store, lambda: spark, topics_regex=f"{prefix}\\.orders").partitions
    assert damaged.verdict is Verdict.EXTRA

    for module in (folding, retention):  # fold every run but the newest, one at a time
        monkeypatch.setattr(module, "EXACT_RUNS", 1)
        monkeypatch.setattr(module, "FOLD_SIZE", 1)
    with opened(config) as (flow, store):
        store.fold_runs(flow.name, [PartitionKey(topic, 0)])
        *older, newest = store.offset_runs(flow.name, PartitionKey(topic, 0))
    after_folding = translated(config, topic, end)
    assert older and not any(run.exact for run in older) and newest.exact
    assert after_folding[newest.upstream_start :] == oracle[newest.upstream_start :]
    assert all(got is not None and got <= want for got, want in zip(after_folding, oracle, strict=True))


def test_failing_back_through_a_filtered_flow_resumes_at_the_first_record_the_group_had_not_read(
    clusters, spark, prefix, tmp_path
):
    b = clusters["b"].bootstrap
    topic = f"{prefix}.back"
    create_topic(b, topic)
    source = orders("back", 20, 4)  # pii at 0, 4, 8, 12, 16 and 19: dropped on the way to a
    produce(b, topic, 0, source)
    filtered = chain(prefix).replace("a->b.", "b->a.").replace(f"a\\.{prefix}\\.audit", f"b\\.{prefix}\\.audit")
    config = write_config(
        tmp_path / "mm2.properties",
        clusters,
        filtered.replace(f"topics = {prefix}.*", f"a->b.enabled = true\ntopics = {prefix}.*, b\\.{prefix}.*")
        + "heartbeats.replication.enabled = false\n",
    )
    replicate(config, spark, "b->a")
    kept = [offset for offset, record in enumerate(source) if transformed(record) is not None]
    assert len(read_partition(clusters["a"].bootstrap, f"b.{topic}", 0)) == len(kept)

    with opened(config, "a->b") as (flow, store):
        translator = Translator(flow, store)
        key = PartitionKey(f"b.{topic}", 0)
        back = [translator.translate({key: d})[key].downstream_offset for d in range(len(kept) + 1)]

    # a group that read d copies on a resumes on b at the d-th kept record; having read them all, at the cursor
    assert back == [*kept, len(source)]


def test_json_fields_are_masked_and_a_record_no_transform_can_read_fails_then_is_skipped(
    clusters, spark, prefix, tmp_path
):
    a, b = clusters["a"].bootstrap, clusters["b"].bootstrap
    topic = f"{prefix}.users"
    create_topic(a, topic)
    now = recent_ms()
    values = [b'{"user":"u%d","password":"pw%d","pin":%d}' % (i, i, 1000 + i) for i in range(8)]
    values[5] = b"\x00\x00\x00\x00\x07not json"
    produce(a, topic, 0, [Record(b"k%d" % i, v, (), now + i) for i, v in enumerate(values)])
    chain = (
        f"a->b.enabled = true\ntopics = {prefix}.*\na->b.transforms = mask\n"
        f"a->b.transforms.mask.type = {T}MaskField$Value\na->b.transforms.mask.fields = password, pin\n"
    )
    config = write_config(tmp_path / "mm2.properties", clusters, chain)

    with pytest.raises(ReplicationFailure, match=rf"record {topic}-0@5: transform 'mask' \(MaskField\$Value\)"):
        replicate(config, spark)
    assert read_partition(b, f"a.{topic}", 0) == []

    dropping = f"a->b.transforms = mask, all\na->b.transforms.all.type = {T}Filter\n"
    tolerant = (
        f"errors.tolerance = all\nerrors.deadletterqueue.topic.name = {prefix}.dlq\n"
        "errors.deadletterqueue.context.headers.enable = true\nerrors.deadletterqueue.topic.replication.factor = 1\n"
    )
    changed = chain.replace("a->b.transforms = mask\n", dropping) + tolerant
    write_config(tmp_path / "mm2.properties", clusters, changed)
    replicate(config, spark)
    copied = [record.value for _, record in read_partition(b, f"a.{topic}", 0)]
    assert copied == [b'{"user":"u%d","password":"","pin":0}' % i for i in range(8) if i != 5], (
        "the resumed batch applies the chain it was planned with, and the errors.tolerance of now"
    )
    [(_, dead)] = read_partition(b, f"{prefix}.dlq", 0)
    assert (dead.key, dead.value, dead.timestamp) == (b"k5", values[5], now + 5)
    context = dict(dead.headers)
    assert (context["__connect.errors.topic"], context["__connect.errors.offset"]) == (topic.encode(), b"5")
    assert context["__connect.errors.class.name"] == f"{T}MaskField$Value".encode()
    write_config(tmp_path / "mm2.properties", clusters, chain + tolerant)
    with opened(config) as (flow, store):
        [status] = flow_status(flow, store).partitions
        assert (status.records_copied, status.records_skipped, status.records_filtered, status.lag) == (7, 1, 0, 0)
        [verified] = verify_flow(flow, store, lambda: spark).partitions
    assert (verified.verdict, verified.filtered, verified.source_records) == (Verdict.EQUAL, 1, 7)

    write_config(tmp_path / "mm2.properties", clusters, changed)
    produce(a, topic, 0, [Record(b"k8", b'{"user":"u8","password":"pw8"}', (), recent_ms())])
    replicate(config, spark)
    assert len(read_partition(b, f"a.{topic}", 0)) == 7, "the next batch applies the changed chain"


def test_header_from_replace_field_and_insert_field_reshape_json_records_that_verify_equal(
    clusters, spark, prefix, tmp_path
):
    topic, now = f"{prefix}.events", recent_ms()
    values = [b'{"user":"u%d","tenant":"t%d","secret":"s%d","n":%d}' % (i, i % 2, i, i) for i in range(6)]
    create_topic(clusters["a"].bootstrap, topic)
    keyed = [Record(b'{"id": %d}' % i, value, (), now + i) for i, value in enumerate(values)]
    produce(clusters["a"].bootstrap, topic, 0, keyed)
    chain = f"""\
a->b.enabled = true
topics = {prefix}.*
a->b.transforms = keyed, lift, drop, add
a->b.transforms.keyed.type = {T}HeaderFrom$Key
a->b.transforms.keyed.fields = id
a->b.transforms.keyed.headers = key-id
a->b.transforms.keyed.operation = copy
a->b.transforms.lift.type = {T}HeaderFrom$Value
a->b.transforms.lift.fields = tenant
a->b.transforms.lift.headers = x-tenant
a->b.transforms.lift.operation = move
a->b.transforms.drop.type = {T}ReplaceField$Value
a->b.transforms.drop.exclude = secret
a->b.transforms.add.type = {T}InsertField$Value
a->b.transforms.add.topic.field = origin
a->b.transforms.add.partition.field = p
"""
    config = write_config(tmp_path / "mm2.properties", clusters, chain)

    replicate(config, spark)

    remote = f"a.{topic}"
    expected = [
        Record(
            b'{"id": %d}' % i,  # HeaderFrom's copy leaves the key's bytes as they were
            b'{"user":"u%d","n":%d,"origin":"%s","p":0}' % (i, i, remote.encode()),
            (("key-id", b"%d" % i), ("x-tenant", b"t%d" % (i % 2))),
            now + i,
        )
        for i in range(6)
    ]
    assert [record for _, record in read_partition(clusters["b"].bootstrap, remote, 0)] == expected
    with opened(config) as (flow, store):
        [verified] = verify_flow(flow, store, lambda: spark).partitions
    assert (verified.verdict, verified.source_records, verified.filtered) == (Verdict.EQUAL, 6, 0)


def test_a_python_function_on_the_executors_and_a_condition_transform_and_filter_a_copy_that_verifies_equal(
    clusters, spark, prefix, tmp_path
):
    topic, now = f"{prefix}.cards", recent_ms()
    create_topic(clusters["a"].bootstrap, topic)
    records = [
        Record(b"k%d" % i, b'{"kind":"%s","card":"4111-%04d"}' % (b"test" if i % 3 == 0 else b"sale", i), (), now + i)
        for i in range(9)
    ]
    produce(clusters["a"].bootstrap, topic, 0, [*records, Record(b"drop", b"x", (), now + 9)])
    own = f"""\
a->b.enabled = true
topics = {prefix}.*
a->b.transforms = dropTests, redact
a->b.transforms.dropTests.type = {T}Filter
a->b.transforms.dropTests.predicate = isTest
a->b.transforms.redact.type = airmirror.transforms.Python
a->b.transforms.redact.function = tests.transform_functions:redact_card
a->b.predicates = isTest
a->b.predicates.isTest.type = airmirror.predicates.Condition
a->b.predicates.isTest.expression = value.kind == 'test'
"""
    config = write_config(tmp_path / "mm2.properties", clusters, own)

    replicate(config, spark)

    kept = [r for i, r in enumerate(records) if i % 3]
    copied = [record for _, record in read_partition(clusters["b"].bootstrap, f"a.{topic}", 0)]
    assert [(r.key, r.value, r.headers) for r in copied] == [
        (r.key, b'{"kind":"sale","card":"####-####"}', (("seen-on", b"0"),)) for r in kept
    ], "the executors imported the function; the condition dropped the tests, the function the 'drop' key"
    with opened(config) as (flow, store):
        [status] = flow_status(flow, store).partitions
        [verified] = verify_flow(flow, store, lambda: spark).partitions
    assert (status.records_copied, status.records_filtered) == (6, 4)
    # verify compares from the first copied offset (1): the test record at 0 was dropped before it
    assert (verified.verdict, verified.filtered) == (Verdict.EQUAL, 3)


def test_a_live_stream_of_a_partition_whose_records_are_all_dropped_advances_its_cursor_and_checkpoints(
    clusters, spark, prefix, tmp_path
):
    a, b = clusters["a"].bootstrap, clusters["b"].bootstrap
    kept, noise, group = f"{prefix}.kept", f"{prefix}.noise", f"{prefix}-reader"
    create_topic(a, kept)
    create_topic(a, noise)
    body = (
        f"a->b.enabled = true\ntopics = {prefix}.*\na->b.transforms = quiet\n"
        f"a->b.transforms.quiet.type = {T}Filter\na->b.transforms.quiet.predicate = isNoise\n"
        f"a->b.predicates = isNoise\na->b.predicates.isNoise.type = {T}predicates.TopicNameMatches\n"
        f"a->b.predicates.isNoise.pattern = a\\\\.{prefix}\\\\.noise\n"
    )
    config = write_config(tmp_path / "mm2.properties", clusters, body)
    flow = load_config(config).flow("a->b")

    def write_while_streaming() -> None:
        for round_ in range(6):
            time.sleep(1)
            produce(a, kept, 0, orders(f"kept{round_}", 5, pii_every=100))
            produce(a, noise, 0, orders(f"noise{round_}", 7, pii_every=100))

    writer = threading.Thread(target=write_while_streaming)
    with MetadataStore.open(flow.metadata_db_url) as store:
        writer.start()
        report = continuous.replicate_continuously(
            flow, store, BatchOptions(), lambda: spark, stop=threading.Event(), duration=timedelta(seconds=15)
        )
        writer.join()
        assert report.records == 30, report
        assert store.cursors(flow.name)[PartitionKey(noise, 0)] == end_offset(a, noise, 0) == 42
    assert read_partition(b, f"a.{noise}", 0) == []
    copies = read_partition(b, f"a.{kept}", 0)
    assert [r for _, r in copies] == [r for _, r in read_partition(a, kept, 0)]
    commit_offsets(a, group, {(noise, 0): 42, (kept, 0): 12})
    checkpoint(config)
    written = {c.topic: (c.upstream_offset, c.downstream_offset) for c in checkpoints_of(b, group)}
    assert written == {f"a.{noise}": (42, 0), f"a.{kept}": (12, copies[12][0])}
