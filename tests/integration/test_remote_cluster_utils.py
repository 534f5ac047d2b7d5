"""MM2's own Java code reads what airmirror writes: ``RemoteClusterUtils.translateOffsets`` from the
``connect-mirror-client`` jar on Maven Central must return the offsets airmirror translated from our checkpoints
(and so must airmirror's Python client, whose ``fail_over`` then commits them), and MM2's ``OffsetSyncStore``
(``connect-mirror``) must translate from our offset-syncs topic, never past the exact position and exactly at the
end of what was copied."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from airmirror import client
from airmirror.checkpoints.translation import Translator
from airmirror.devtools.local_kafka import mm2_classpath
from airmirror.model import PartitionKey
from tests.conftest import compile_java, java_lines, write_config
from tests.kafka_helpers import create_topic, produce
from tests.mirror_helpers import (
    as_java_offsets,
    checkpoint,
    commit_offsets,
    group_consumer,
    group_offsets_on,
    opened,
    produce_transactions,
    replicate,
    unique_records,
)

pytestmark = pytest.mark.integration

JAVA_DIR = Path(__file__).parents[1] / "java"
SYNC_READER_SOURCE = JAVA_DIR / "org" / "apache" / "kafka" / "connect" / "mirror" / "ReadOffsetSyncs.java"
ReadSyncs = Callable[[str, dict[tuple[str, int], list[int]]], dict[tuple[str, int, int], int | None]]


@pytest.fixture(scope="module")
def read_offset_syncs(tmp_path_factory: pytest.TempPathFactory) -> ReadSyncs:
    """``(source bootstrap, {(topic, partition): upstream offsets}) -> {(topic, partition, upstream): downstream}``
    as MM2's ``OffsetSyncStore`` translates them from the offset-syncs topic of flow a->b (``None``: no sync)."""
    classes = tmp_path_factory.mktemp("mm2-classes")
    classpath = f"{classes}:{mm2_classpath()}"
    compile_java(SYNC_READER_SOURCE, classpath, classes)

    def read(bootstrap: str, queries: dict[tuple[str, int], list[int]]) -> dict[tuple[str, int, int], int | None]:
        args = [f"{topic}:{partition}:{','.join(map(str, offsets))}" for (topic, partition), offsets in queries.items()]
        found = {}
        for line in java_lines(
            classpath, "org.apache.kafka.connect.mirror.ReadOffsetSyncs", bootstrap, "a", "b", *args
        ):
            topic, partition, upstream, downstream = line.split(" ")
            found[(topic, int(partition), int(upstream))] = None if downstream == "none" else int(downstream)
        return found

    return read


def test_remote_cluster_utils_returns_our_translated_offsets_and_our_client_fails_over_to_them(
    clusters, spark, prefix, tmp_path, java_translate_offsets, read_offset_syncs
):
    a, b = clusters["a"].bootstrap, clusters["b"].bootstrap
    plain, transactional, group = f"{prefix}.plain", f"{prefix}.tx", f"{prefix}-java-app"
    create_topic(a, plain, 2)
    create_topic(a, transactional)
    produce(a, plain, 0, unique_records("p0", 30))
    produce(a, plain, 1, unique_records("p1", 8))
    produce_transactions(
        a, transactional, f"{prefix}-tx", [("tx", 10, False), ("aborted", 6, True), ("tx-more", 5, False)]
    )
    config = write_config(tmp_path / "mm2.properties", clusters, f"a->b.enabled = true\ntopics = {prefix}.*")
    replicate(config, spark, max_records=12)
    replicate(config, spark)
    commit_offsets(a, group, {(plain, 0): 9, (plain, 1): 8}, "first")
    commit_offsets(a, group, {(transactional, 0): 13}, "in-an-aborted-transaction")
    checkpoint(config)
    commit_offsets(a, group, {(plain, 0): 27}, "later")
    checkpoint(config)  # the topic now holds two checkpoints of plain-0: the last one wins

    committed = {PartitionKey(plain, 0): 27, PartitionKey(plain, 1): 8, PartitionKey(transactional, 0): 13}
    with opened(config) as (flow, store):
        ours = Translator(flow, store).translate(committed)
    expected = {(t.route.target_topic, t.partition): t.downstream_offset for t in ours.values()}
    # plain-0: 12 records, a commit marker, then the rest; tx: 10 records, marker, 6 aborted + marker upstream
    assert expected == {(f"a.{plain}", 0): 28, (f"a.{plain}", 1): 8, (f"a.{transactional}", 0): 11}
    java = java_translate_offsets(b, "a", group)
    assert java == {
        (f"a.{plain}", 0): (28, "later"),
        (f"a.{plain}", 1): (8, "first"),
        (f"a.{transactional}", 0): (11, "in-an-aborted-transaction"),
    }
    on_b = {"bootstrap.servers": b, "group.id": group, "auto.offset.reset": "earliest"}  # an application's own
    assert as_java_offsets(client.translate_offsets(on_b, "a", group, 30)) == java

    running = group_consumer(b, group)
    running.subscribe([f"a.{plain}"])
    while not running.assignment():
        running.poll(0.5)
    try:
        with pytest.raises(client.GroupActive, match=f"group '{group}' on cluster {b} is active"):
            client.fail_over(on_b, "a", group)
        assert group_offsets_on(b, group) == {}
    finally:
        running.close()
    assert as_java_offsets(client.fail_over(on_b, "a", group)) == java
    assert group_offsets_on(b, group) == {key: offset for key, (offset, _) in java.items()}
    assert client.fail_over(on_b, "a", group) == {}  # only forward: the group is there already

    ends = {(plain, 0): 30, (plain, 1): 8, (transactional, 0): 24}  # each log's end: every record copied
    mm2 = read_offset_syncs(a, {key: list(range(end + 1)) for key, end in ends.items()})
    with opened(config) as (flow, store):
        translator = Translator(flow, store)
        exact = {
            (t, p, u): translator.translate({PartitionKey(t, p): u})[PartitionKey(t, p)].downstream_offset
            for (t, p), end in ends.items()
            for u in range(end + 1)
        }
    assert mm2.keys() == exact.keys()
    past = {query: (mm2[query], exact[query]) for query in exact if mm2[query] is None or mm2[query] > exact[query]}
    assert not past, f"MM2 translated past the exact position (or found no sync): {past}"
    # the sync at each run's last record makes the end exact
    assert {key: mm2[(*key, end)] for key, end in ends.items()} == {
        key: exact[(*key, end)] for key, end in ends.items()
    }
