"""A record stamped in the future, as ``airmirror`` users see it: a time-bounded batch (``--until``) stops before
it, ``status`` names it, and a batch without a time bound copies past it."""

from __future__ import annotations

import json
import subprocess
import time

import pytest

from tests.cli_helpers import airmirror_process
from tests.conftest import write_config
from tests.kafka_helpers import Record, create_topic, produce, records_of, sample_records

pytestmark = pytest.mark.integration

DAY_MS = 86_400_000
# Kafka 4 rejects records stamped more than an hour ahead by default; this topic accepts a week.
ACCEPTS_FUTURE = {"message.timestamp.after.max.ms": str(7 * DAY_MS)}


def airmirror(*args: str) -> subprocess.CompletedProcess[str]:
    result = airmirror_process(*args)
    assert result.returncode == 0, result.stdout + result.stderr
    return result


def stamped(label: str, ahead_ms: int) -> Record:
    return Record(label.encode(), f"{label} value".encode(), (), int(time.time() * 1000) + ahead_ms)


def test_status_names_the_partition_pinned_by_a_future_timestamp(clusters, prefix, tmp_path):
    a, b = clusters["a"].bootstrap, clusters["b"].bootstrap
    topic = f"{prefix}.future"
    create_topic(a, topic, 3, config=ACCEPTS_FUTURE)
    pin = stamped("a day ahead", DAY_MS)
    produce(a, topic, 0, [*sample_records(5, "p0"), pin, *sample_records(5, "p0-after")])
    produce(a, topic, 1, sample_records(5, "p1"))
    produce(a, topic, 2, sample_records(5, "p2"))
    assert [len(records_of(a, topic, p)) for p in range(3)] == [11, 5, 5]
    config = write_config(
        tmp_path / "mm2.properties",
        clusters,
        f"a->b.enabled = true\ntopics = {prefix}.*\nairmirror.spark.master = local[1]",
    )
    flow = (str(config), "--flow", "a->b")

    airmirror("replicate", *flow, "--until", "now")
    assert [len(records_of(b, f"a.{topic}", p)) for p in range(3)] == [5, 5, 5]
    # p2's next record is stamped 30 s ahead: within the tolerance, so not reported.
    produce(a, topic, 2, [stamped("slightly ahead", 30_000), *sample_records(3, "p2-after")])

    status = json.loads(airmirror("status", *flow, "--json").stdout)
    by_partition = {p["partition"]: p for p in status["partitions"]}
    assert (by_partition[0]["future_timestamp_offset"], by_partition[0]["future_timestamp_ms"]) == (5, pin.timestamp)
    assert by_partition[0]["cursor"] == 5 and by_partition[0]["lag"] == 6
    for partition in (1, 2):
        assert by_partition[partition]["future_timestamp_offset"] is None
        assert by_partition[partition]["future_timestamp_ms"] is None
    assert by_partition[2]["lag"] == 4
    assert status["future_tolerance_ms"] == 60_000 and status["checked_at_ms"] < pin.timestamp

    text = airmirror("status", *flow).stdout
    warnings = [line for line in text.splitlines() if line.startswith("WARNING")]
    assert len(warnings) == 1 and f"{topic}-0" in warnings[0] and "(offset 5)" in warnings[0], text

    airmirror("replicate", *flow)
    for p in range(3):
        assert records_of(b, f"a.{topic}", p) == records_of(a, topic, p)
    after = json.loads(airmirror("status", *flow, "--json").stdout)
    assert after["total_lag"] == 0
    assert all(p["future_timestamp_ms"] is None and p["future_timestamp_offset"] is None for p in after["partitions"])
