"""``airmirror takeover --from-mm2`` after a real MirrorMaker 2 (dedicated mode, the Maven Central jars of the
brokers' Kafka version) copied part of a flow: refused while MM2 runs; after MM2 is killed (kill -9, so its
stored source offsets may lag what it copied), replication continues exactly where MM2 stopped (nothing copied
twice, nothing missed) and a consumer group that read MM2's copies translates without a gap."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass

import pytest

from airmirror.checkpoints.translation import Translator
from airmirror.cli import main
from airmirror.config import load_config
from airmirror.devtools.mm2 import mm2_command, write_mm2_files
from airmirror.mm2.wire_formats import Checkpoint
from airmirror.model import PartitionKey
from airmirror.store import MetadataStore
from tests.conftest import write_config
from tests.kafka_helpers import create_topic, end_offset, produce, read_partition, records_of, sample_records
from tests.mirror_helpers import commit_offsets
from tests.polling import wait_until

pytestmark = [pytest.mark.integration, pytest.mark.slow]

PARTITIONS = 2
MM2_RECORDS = 300
LATER_RECORDS = 100
GROUP_POSITION = 150


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


def mm2_properties(clusters, prefix: str) -> str:
    return "\n".join(
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
        ]
    ) + "\n"


def mm2_checkpoint(bootstrap: str, group: str, remote: str, partition: int) -> Checkpoint | None:
    newest = None
    for _, record in read_partition(bootstrap, "a.checkpoints.internal", 0, timeout=5):
        checkpoint = Checkpoint.decode(record.key, record.value)
        if (checkpoint.group, checkpoint.topic, checkpoint.partition) == (group, remote, partition):
            newest = checkpoint
    return newest


def test_takeover_continues_exactly_where_a_stopped_mm2_left_off(clusters, prefix, tmp_path, airmirror):
    a, b = clusters["a"].bootstrap, clusters["b"].bootstrap
    topic, remote, group = f"{prefix}.orders", f"a.{prefix}.orders", f"{prefix}-readers"
    create_topic(a, topic, PARTITIONS)
    for p in range(PARTITIONS):
        produce(a, topic, p, sample_records(MM2_RECORDS, f"mm2-{p}"))
    commit_offsets(a, group, {(topic, 0): GROUP_POSITION, (topic, 1): MM2_RECORDS})
    mm2_config, log_config = write_mm2_files(tmp_path, "mm2", mm2_properties(clusters, prefix))
    config = write_config(tmp_path / "airmirror.properties", clusters, f"a->b.enabled = true\ntopics = {prefix}\\..*")

    mm2 = subprocess.Popen(mm2_command(mm2_config, log_config, "b"), start_new_session=True)
    try:
        wait_until(lambda: all(end_offset(b, remote, p, committed=True) == MM2_RECORDS for p in range(PARTITIONS)), 180, "MM2 to copy the topic")
        wait_until(lambda: mm2_checkpoint(b, group, remote, 0) is not None, 120, "MM2's checkpoint of the group")
        refused = airmirror("takeover", str(config), "--flow", "a->b", "--from-mm2")
        assert refused.returncode == 1, refused.stderr
        assert "MirrorMaker 2 is still running flow a->b: its worker group 'a-mm2' on cluster 'b'" in refused.stderr
    finally:
        os.killpg(mm2.pid, signal.SIGKILL)
        mm2.wait(30)
    for p in range(PARTITIONS):
        produce(a, topic, p, sample_records(LATER_RECORDS, f"later-{p}"))

    dry = airmirror("takeover", str(config), "--flow", "a->b", "--from-mm2", "--dry-run", "--json")
    deadline = time.monotonic() + 60
    while dry.returncode == 1 and "still running" in dry.stderr and time.monotonic() < deadline:
        dry = airmirror("takeover", str(config), "--flow", "a->b", "--from-mm2", "--dry-run", "--json")
    assert dry.returncode == 0, dry.stderr
    assert json.loads(dry.stdout)["dry_run"] and all(p["cursor"] == MM2_RECORDS for p in json.loads(dry.stdout)["partitions"])
    flow = load_config(config).flow("a->b")
    with MetadataStore.open(flow.metadata_db_url) as store:
        assert store.cursors(flow.name) == {}

    taken = airmirror("takeover", str(config), "--flow", "a->b", "--from-mm2", "--json")
    assert taken.returncode == 0, taken.stderr
    plan = json.loads(taken.stdout)
    assert [(p["partition"], p["cursor"], p["last_copied"]) for p in plan["partitions"]] == [(p, MM2_RECORDS, MM2_RECORDS - 1) for p in range(PARTITIONS)]
    assert plan["checkpoints_imported"] >= 1 and all(p["syncs_imported"] >= 1 for p in plan["partitions"])

    again = airmirror("takeover", str(config), "--flow", "a->b", "--from-mm2")
    assert again.returncode == 2 and "--flow a->b: airmirror already replicates this flow" in again.stderr
    replicated = airmirror("replicate", str(config), "--flow", "a->b", "--json")
    assert replicated.returncode == 0, replicated.stderr
    assert json.loads(replicated.stdout)["records"] == PARTITIONS * LATER_RECORDS
    for p in range(PARTITIONS):
        assert records_of(b, remote, p) == records_of(a, topic, p)

    with MetadataStore.open(flow.metadata_db_url) as store:
        translated = Translator(flow, store).translate({PartitionKey(topic, 0): GROUP_POSITION, PartitionKey(topic, 1): MM2_RECORDS})
    mm2_position = mm2_checkpoint(b, group, remote, 0).downstream_offset
    assert mm2_position <= translated[PartitionKey(topic, 0)].downstream_offset <= GROUP_POSITION
    assert translated[PartitionKey(topic, 1)].downstream_offset == MM2_RECORDS
