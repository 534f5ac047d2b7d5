"""``airmirror takeover --from-mm2`` after a real MirrorMaker 2 (dedicated mode, the Maven Central jars of the
brokers' Kafka version) copied part of a flow: refused while MM2 runs; after MM2 is killed (kill -9, so its
stored source offsets may lag what it copied), replication continues exactly where MM2 stopped (nothing copied
twice, nothing missed) and a consumer group that read MM2's copies translates without a gap.  MM2 runs once for
the module, over two topics; each test takes one of them over with its own metadata DB (the second takes over
partitions whose MM2 offset syncs retention made useless: groups there translate never past MM2's copies)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

import pytest
from confluent_kafka import TopicPartition
from confluent_kafka.admin import AdminClient

from airmirror import client
from airmirror.checkpoints.translation import Translator
from airmirror.config import load_config
from airmirror.devtools.local_kafka import LocalBroker
from airmirror.devtools.mm2 import mm2_command, write_mm2_files
from airmirror.mm2.wire_formats import Checkpoint
from airmirror.model import PartitionKey
from airmirror.store import MetadataStore
from tests.cli_helpers import Run, airmirror_in_process
from tests.conftest import write_config
from tests.kafka_helpers import create_topic, end_offset, produce, read_partition, records_of, sample_records
from tests.mirror_helpers import as_java_offsets, commit_offsets, group_offsets_on
from tests.polling import wait_until

pytestmark = [pytest.mark.integration, pytest.mark.slow]

PARTITIONS = 2
MM2_RECORDS = 300
LATER_RECORDS = 100
GROUP_POSITION = 150


airmirror = airmirror_in_process


def mm2_properties(clusters, prefix: str) -> str:
    return (
        "\n".join(
            [
                "clusters = a, b",
                f"a.bootstrap.servers = {clusters['a'].bootstrap}",
                f"b.bootstrap.servers = {clusters['b'].bootstrap}",
                "a->b.enabled = true",
                f"topics = {prefix}\\..*",
                f"groups = {prefix}-.*",
                "replication.factor = 1",
                "offset-syncs.topic.replication.factor = 1",
                "checkpoints.topic.replication.factor = 1",
                "offset.storage.replication.factor = 1",
                "status.storage.replication.factor = 1",
                "config.storage.replication.factor = 1",
                "emit.heartbeats.enabled = false",
                "emit.checkpoints.interval.seconds = 1",
                "sync.topic.acls.enabled = false",
                "offset.lag.max = 1000",  # one offset sync per partition, of its first record: the rest is MM2's alone
            ]
        )
        + "\n"
    )


def mm2_checkpoint(bootstrap: str, group: str, remote: str, partition: int) -> Checkpoint | None:
    newest = None
    for _, record in read_partition(bootstrap, "a.checkpoints.internal", 0, timeout=5):
        checkpoint = Checkpoint.decode(record.key, record.value)
        if (checkpoint.group, checkpoint.topic, checkpoint.partition) == (group, remote, partition):
            newest = checkpoint
    return newest


def topic_names(prefix: str, name: str) -> tuple[str, str]:
    """``(source topic, remote topic)`` of topic ``name`` of the module's MM2 run."""
    return f"{prefix}.{name}", f"a.{prefix}.{name}"


@dataclass(frozen=True)
class Mm2Left:
    """What a killed MM2 left: topics ``orders`` and ``payments`` copied (``MM2_RECORDS`` per partition,
    ``LATER_RECORDS`` more on the source since), the group ``{prefix}-readers`` checkpointed by MM2, and the
    takeover ``refused`` while MM2 still ran."""

    prefix: str
    refused: Run

    def topic(self, name: str) -> tuple[str, str]:
        return topic_names(self.prefix, name)


@pytest.fixture(scope="module")
def mm2_left(clusters: dict[str, LocalBroker], tmp_path_factory: pytest.TempPathFactory) -> Mm2Left:
    """One real MM2 run for the module: it copies both topics, is refused a takeover, then is killed."""
    a, b, home = clusters["a"].bootstrap, clusters["b"].bootstrap, tmp_path_factory.mktemp("mm2-left")
    prefix = f"t{uuid.uuid4().hex[:8]}"
    topics = [topic_names(prefix, name) for name in ("orders", "payments")]
    for topic, _ in topics:
        create_topic(a, topic, PARTITIONS)
        for p in range(PARTITIONS):
            produce(a, topic, p, sample_records(MM2_RECORDS, f"mm2-{topic}-{p}"))
    orders, remote_orders = topics[0]
    commit_offsets(a, f"{prefix}-readers", {(orders, 0): GROUP_POSITION, (orders, 1): MM2_RECORDS})
    mm2_config, log_config = write_mm2_files(home, "mm2", mm2_properties(clusters, prefix))
    config = write_config(home / "airmirror.properties", clusters, f"a->b.enabled = true\ntopics = {prefix}\\..*")

    mm2 = subprocess.Popen(mm2_command(mm2_config, log_config, "b"), start_new_session=True)
    try:
        copied = [(remote, p) for _, remote in topics for p in range(PARTITIONS)]
        wait_until(
            lambda: all(end_offset(b, r, p, committed=True) == MM2_RECORDS for r, p in copied),
            180,
            "MM2 to copy the topics",
        )
        wait_until(
            lambda: mm2_checkpoint(b, f"{prefix}-readers", remote_orders, 0) is not None,
            120,
            "MM2's checkpoint of the group",
        )
        refused = airmirror("takeover", str(config), "--flow", "a->b", "--from-mm2")
    finally:
        os.killpg(mm2.pid, signal.SIGKILL)
        mm2.wait(30)
    for topic, _ in topics:
        for p in range(PARTITIONS):
            produce(a, topic, p, sample_records(LATER_RECORDS, f"later-{topic}-{p}"))
    return Mm2Left(prefix, refused)


def test_our_python_client_reads_mm2s_own_checkpoints_as_mm2s_java_client_and_fails_over_to_them(
    clusters, mm2_left, java_translate_offsets
):
    b, group = clusters["b"].bootstrap, f"{mm2_left.prefix}-readers"
    _, remote = mm2_left.topic("orders")
    java = java_translate_offsets(b, "a", group)
    written = mm2_checkpoint(b, group, remote, 0)
    assert written is not None and java[(remote, 0)] == (written.downstream_offset, written.metadata)

    assert as_java_offsets(client.translate_offsets({"bootstrap.servers": b}, "a", group, 30)) == java
    assert as_java_offsets(client.fail_over({"bootstrap.servers": b}, "a", group)) == java
    assert group_offsets_on(b, group) == {key: offset for key, (offset, _) in java.items()}


def take_over(config: Path, *flags: str) -> Run:
    """The takeover, tried again while the killed MM2 worker is still a member of its group (10 s at most)."""
    taken = airmirror("takeover", str(config), "--flow", "a->b", "--from-mm2", *flags)
    deadline = time.monotonic() + 60
    while taken.returncode == 1 and "still running" in taken.stderr and time.monotonic() < deadline:
        taken = airmirror("takeover", str(config), "--flow", "a->b", "--from-mm2", *flags)
    return taken


def test_takeover_continues_exactly_where_a_stopped_mm2_left_off(clusters, mm2_left, tmp_path):
    a, b = clusters["a"].bootstrap, clusters["b"].bootstrap
    (topic, remote), group = mm2_left.topic("orders"), f"{mm2_left.prefix}-readers"
    config = write_config(
        tmp_path / "airmirror.properties", clusters, f"a->b.enabled = true\ntopics = {mm2_left.prefix}\\.orders"
    )
    assert mm2_left.refused.returncode == 1, mm2_left.refused.stderr
    assert (
        "MirrorMaker 2 is still running flow a->b: its worker group 'a-mm2' on cluster 'b'" in mm2_left.refused.stderr
    )

    dry = take_over(config, "--dry-run", "--json")
    assert dry.returncode == 0, dry.stderr
    assert json.loads(dry.stdout)["dry_run"] and all(
        p["cursor"] == MM2_RECORDS for p in json.loads(dry.stdout)["partitions"]
    )
    flow = load_config(config).flow("a->b")
    with MetadataStore.open(flow.metadata_db_url) as store:
        assert store.cursors(flow.name) == {}

    taken = airmirror("takeover", str(config), "--flow", "a->b", "--from-mm2", "--json")
    assert taken.returncode == 0, taken.stderr
    plan = json.loads(taken.stdout)
    assert [(p["partition"], p["cursor"], p["last_copied"]) for p in plan["partitions"]] == [
        (p, MM2_RECORDS, MM2_RECORDS - 1) for p in range(PARTITIONS)
    ]
    assert plan["checkpoints_imported"] >= 1 and all(p["syncs_imported"] >= 1 for p in plan["partitions"])

    again = airmirror("takeover", str(config), "--flow", "a->b", "--from-mm2")
    assert again.returncode == 2 and "--flow a->b: airmirror already replicates this flow" in again.stderr
    replicated = airmirror("replicate", str(config), "--flow", "a->b", "--json")
    assert replicated.returncode == 0, replicated.stderr
    assert json.loads(replicated.stdout)["records"] == PARTITIONS * LATER_RECORDS
    for p in range(PARTITIONS):
        assert records_of(b, remote, p) == records_of(a, topic, p)

    with MetadataStore.open(flow.metadata_db_url) as store:
        translated = Translator(flow, store).translate(
            {PartitionKey(topic, 0): GROUP_POSITION, PartitionKey(topic, 1): MM2_RECORDS}
        )
    mm2_position = mm2_checkpoint(b, group, remote, 0).downstream_offset
    assert mm2_position <= translated[PartitionKey(topic, 0)].downstream_offset <= GROUP_POSITION
    assert translated[PartitionKey(topic, 1)].downstream_offset == MM2_RECORDS


def test_after_retention_took_mm2s_synced_records_a_group_never_translates_past_mm2s_copies(
    clusters, mm2_left, tmp_path
):
    """Retention deleted the source records MM2 synced (DeleteRecords moves the log start as retention does), so the
    takeover cannot walk MM2's tail: each partition continues after MM2's copy (at the source's log start, or
    after MM2's stored offset), with MM2's sync of offset 0 imported.  After airmirror's first batch, a group inside
    MM2's part translates by MM2's rule (at or before its exact position, re-reading, never skipping), not to
    airmirror's first copied offset, which lies past MM2's copies of the records it has not read."""
    a, b = clusters["a"].bootstrap, clusters["b"].bootstrap
    topic, remote = mm2_left.topic("payments")
    admin = AdminClient({"bootstrap.servers": a})
    for future in admin.delete_records([TopicPartition(topic, p, MM2_RECORDS) for p in range(PARTITIONS)]).values():
        future.result()
    config = write_config(
        tmp_path / "airmirror.properties", clusters, f"a->b.enabled = true\ntopics = {mm2_left.prefix}\\.payments"
    )

    taken = take_over(config, "--json")
    assert taken.returncode == 0, taken.stderr
    plan = json.loads(taken.stdout)["partitions"]
    assert all(p["runs"] == 0 and p["syncs_imported"] == 1 and "gone (retention)" in p["note"] for p in plan), plan
    mm2_copy_ends = [end_offset(b, remote, p, committed=True) for p in range(PARTITIONS)]
    assert mm2_copy_ends == [MM2_RECORDS] * PARTITIONS
    replicated = airmirror("replicate", str(config), "--flow", "a->b", "--json")
    assert replicated.returncode == 0, replicated.stderr
    assert json.loads(replicated.stdout)["records"] == PARTITIONS * LATER_RECORDS

    flow = load_config(config).flow("a->b")
    cursors = {PartitionKey(topic, p["partition"]): p["cursor"] for p in plan}
    with MetadataStore.open(flow.metadata_db_url) as store:
        translator = Translator(flow, store)
        inside_mm2s_part = translator.translate({key: cursor - 1 for key, cursor in cursors.items()})
        at_the_takeover = translator.translate(cursors)
    for key, cursor in cursors.items():
        # MM2 copied source offset u to remote offset u (a fresh remote topic, no restart): exact is cursor - 1
        assert (
            inside_mm2s_part[key].downstream_offset is not None
            and inside_mm2s_part[key].downstream_offset <= cursor - 1
        )
        assert at_the_takeover[key].downstream_offset == MM2_RECORDS  # airmirror's first copy, after MM2's
