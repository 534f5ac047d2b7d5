"""A source record larger than the remote topic accepts: a clear error, then a clean resume once fixed.

The source topic accepts records up to 3 MiB and holds one of 2 MiB between small ones.  The remote topic
exists before the first run and accepts at most 1 MiB.  Topic config sync is on (MM2's default), so
airmirror would copy the source's ``max.message.bytes`` onto the existing remote topic and the record
would simply fit; the flow therefore lists ``max.message.bytes`` in ``config.properties.exclude`` (next to
MM2's default exclusions), as an operator does who sizes the target's limits on the target: the remote
topic keeps its 1 MiB, and the target really rejects the record.

The first run must fail with exit 1 and an error naming the topic, partition, offset, size and the setting
to change.  Small records before the big one are committed in earlier chunk transactions before the
failure (more small records than one read returns, and small chunks), so the resumed run, after the
remote topic's limit was raised, must continue after them: the target then equals the source record for
record, nothing duplicated.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from confluent_kafka import Message, Producer
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType

from tests.conftest import write_config
from tests.kafka_helpers import Record, create_topic, read_partition, records_of

pytestmark = pytest.mark.integration

MIB = 1024 * 1024
SMALL_BEFORE = 12_000  # more than one read of the range returns (10,000), so earlier chunks commit first
SMALL_AFTER = 2_000
BIG_KEY = b"big"
BIG_VALUE = bytes(range(256)) * (2 * MIB // 256)  # 2 MiB
FAILING_RUN_TIMEOUT_S = 300
MM2_DEFAULT_CONFIG_EXCLUDES = (
    r"follower\.replication\.throttled\.replicas, leader\.replication\.throttled\.replicas, "
    r"message\.timestamp\.difference\.max\.ms, message\.timestamp\.type, "
    r"unclean\.leader\.election\.enable, min\.insync\.replicas"
)


def small(label: str, i: int, now: int) -> Record:
    return Record(f"{label}-{i}".encode(), f"{label}-value-{i}".encode(), (("seq", str(i).encode()),), now + i)


def load_source(bootstrap: str, topic: str) -> int:
    """Small records, one 2 MiB record, small records, written in order once each (an idempotent producer); returns
    the big record's offset as the broker gave it."""
    create_topic(bootstrap, topic, 1, {"max.message.bytes": str(3 * MIB)})
    now = int(time.time() * 1000)
    records = [small("before", i, now) for i in range(SMALL_BEFORE)]
    records.append(Record(BIG_KEY, BIG_VALUE, (("big", b"yes"),), now + SMALL_BEFORE))
    records += [small("after", i, now + SMALL_BEFORE + 1) for i in range(SMALL_AFTER)]
    producer = Producer(
        {"bootstrap.servers": bootstrap, "linger.ms": 5, "message.max.bytes": 4 * MIB, "enable.idempotence": True}
    )
    failures: list[object] = []
    big_offsets: list[int] = []

    def delivered(error: object, message: Message) -> None:
        if error is not None:
            failures.append(error)
        elif message.key() == BIG_KEY:
            big_offsets.append(message.offset())

    for r in records:
        producer.produce(
            topic, r.value, r.key, partition=0, timestamp=r.timestamp, headers=list(r.headers), on_delivery=delivered
        )
        producer.poll(0)
    assert producer.flush(60) == 0 and not failures, failures
    return big_offsets[0]


def set_max_message_bytes(bootstrap: str, topic: str, value: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    resource = ConfigResource(
        ResourceType.TOPIC,
        topic,
        incremental_configs=[ConfigEntry("max.message.bytes", str(value), incremental_operation=AlterConfigOpType.SET)],
    )
    admin.incremental_alter_configs([resource])[resource].result()


def max_message_bytes(bootstrap: str, topic: str) -> int:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    resource = ConfigResource(ResourceType.TOPIC, topic)
    return int(admin.describe_configs([resource])[resource].result()["max.message.bytes"].value)


def replicate_cli(config: Path, timeout: float) -> subprocess.CompletedProcess[str]:
    """``airmirror replicate`` in its own process group; killed (with its Spark JVM) after ``timeout``."""
    args = [sys.executable, "-m", "airmirror.cli", "replicate", str(config), "--flow", "a->b"]
    process = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        out, err = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        out, err = process.communicate()
        pytest.fail(f"replicate did not finish within {timeout:.0f}s; last output:\n{err[-3000:]}")
    return subprocess.CompletedProcess(args, process.returncode, out, err)


def test_oversized_record_fails_clearly_then_resumes_without_duplicates(clusters, prefix, tmp_path):
    a, b = clusters["a"].bootstrap, clusters["b"].bootstrap
    topic, remote = f"{prefix}.big", f"a.{prefix}.big"
    big_offset = load_source(a, topic)
    create_topic(b, remote, 1, {"max.message.bytes": str(MIB)})
    config = write_config(
        tmp_path / "mm2.properties",
        clusters,
        f"a->b.enabled = true\ntopics = {prefix}.*\nairmirror.spark.master = local[2]\n"
        "airmirror.transaction.max.records = 1000\n"
        f"config.properties.exclude = {MM2_DEFAULT_CONFIG_EXCLUDES}, max\\.message\\.bytes",
    )
    read = read_partition(a, topic, 0)
    source = [record for _, record in read]
    assert len(source) == SMALL_BEFORE + 1 + SMALL_AFTER and dict(read)[big_offset].key == BIG_KEY

    # Spark start, then up to 4 task attempts that each fail fast: well under FAILING_RUN_TIMEOUT_S.
    failed = replicate_cli(config, FAILING_RUN_TIMEOUT_S)
    output = failed.stdout + failed.stderr
    assert failed.returncode == 1, output
    assert "airmirror: error:" in failed.stderr, output
    size = len(BIG_KEY) + len(BIG_VALUE)
    for fragment in (f"{topic}-0@{big_offset}", f"{size} bytes", remote, "max.message.bytes"):
        assert fragment in failed.stderr, f"{fragment!r} missing from the error:\n{failed.stderr}"
    assert max_message_bytes(b, remote) == MIB, "the remote topic's limit changed under the test"
    partial = records_of(b, remote, 0)
    assert 0 < len(partial) < big_offset, "no chunk before the big record was committed: the test proves less"
    assert partial == source[: len(partial)]

    set_max_message_bytes(b, remote, 3 * MIB)
    resumed = replicate_cli(config, 600)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr

    target = records_of(b, remote, 0)
    assert len(target) == len(source)
    assert target == source
