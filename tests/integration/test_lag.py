"""Lag in seconds against records of known produce times: ``status --json`` gives each partition's record age
(the age of the oldest record not yet copied), and every batch commit keeps a lag sample in the metadata DB."""

from __future__ import annotations

import json
import subprocess
import sys
import time

import pytest

from tests.conftest import write_config
from tests.kafka_helpers import Record, create_topic, produce
from tests.mirror_helpers import opened, replicate

pytestmark = pytest.mark.integration

AGE_MS = 120_000


def status(config) -> dict:
    shown = subprocess.run(
        [sys.executable, "-m", "airmirror.cli", "status", str(config), "--flow", "a->b", "--json"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert shown.returncode == 0, shown.stderr
    return json.loads(shown.stdout)


def test_record_age_is_the_age_of_the_oldest_record_not_yet_copied(clusters, prefix, spark, tmp_path):
    topic = f"{prefix}.aged"
    create_topic(clusters["a"].bootstrap, topic)
    produced_at = int(time.time() * 1000) - AGE_MS
    produce(
        clusters["a"].bootstrap,
        topic,
        0,
        [Record(f"k{i}".encode(), b"v", (), produced_at + i * 1000) for i in range(10)],
    )
    config = write_config(tmp_path / "mm2.properties", clusters, f"a->b.enabled = true\ntopics = {prefix}.*")

    before = time.time() * 1000
    [waiting] = status(config)["partitions"]
    assert waiting["lag"] == 10
    assert before - produced_at <= waiting["record_age_ms"] <= time.time() * 1000 - produced_at

    replicate(config, spark, max_records=4)
    before = time.time() * 1000
    [halfway] = status(config)["partitions"]
    fifth = produced_at + 4 * 1000
    assert halfway["lag"] == 6 and before - fifth <= halfway["record_age_ms"] <= time.time() * 1000 - fifth

    replicate(config, spark)
    [done] = status(config)["partitions"]
    assert (done["lag"], done["record_age_ms"]) == (0, None)

    with opened(config) as (flow, store):
        samples = store.lag_samples(flow.name)
    assert [(s.lag_records, s.record_age_ms is None) for s in samples] == [(6, False), (0, True)]
    first = samples[0]
    assert abs(first.record_age_ms - (first.sampled_at.timestamp() * 1000 - fifth)) <= 1
