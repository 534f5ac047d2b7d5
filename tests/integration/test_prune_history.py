"""The after-commit action ``recording.prune_history`` on real clusters (it reads both log starts) and a real SQLite
store: after enough committed batches it leaves a partition's offset-sync runs folded, to a bounded count, and
translation unchanged where the runs stay exact.  No Spark: the batches are committed to the store directly."""

from __future__ import annotations

from pathlib import Path

import pytest

from airmirror.checkpoints.translation import failback_position, forward_position
from airmirror.config import load_config
from airmirror.model import OffsetRun, PartitionKey, PlannedRange, RangeResult
from airmirror.replication import recording
from airmirror.replication.recording import CommittedBatch
from airmirror.store import MetadataStore
from airmirror.store.folding import EXACT_RUNS, FOLD_SIZE, FOLDED_RUNS
from tests.conftest import write_config
from tests.kafka_helpers import create_topic

pytestmark = pytest.mark.integration

BATCHES = 20
"""Two runs a batch (a transaction marker between them): 40 exact runs, more than ``EXACT_RUNS + FOLD_SIZE``."""


def two_run_batch(topic: str, remote: str, batch: int) -> tuple[PlannedRange, RangeResult]:
    """Batch ``batch`` copies source ``[10 b, 10 b + 10)`` but offset ``10 b + 5`` (a marker) to ``11 b`` on."""
    start, downstream = 10 * batch, 11 * batch
    runs = (OffsetRun(start, start + 5, downstream), OffsetRun(start + 6, start + 10, downstream + 6))
    return (
        PlannedRange(topic=topic, partition=0, start=start, end=start + 10, remote_topic=remote),
        RangeResult(
            topic=topic,
            partition=0,
            start=start,
            end=start + 10,
            records=9,
            bytes=900,
            runs=runs,
            downstream_start=downstream,
            downstream_end=downstream + 11,
        ),
    )


def translated(store: MetadataStore, flow: str, key: PartitionKey, tail: OffsetRun, end: int) -> list[int | None]:
    """Forward translation of every source offset and failback of every target offset from ``tail`` on, below
    ``end``, through the store's runs (log starts 0)."""
    cursor, last = store.cursors(flow)[key], store.last_offset_run(flow, key)
    forward = [
        forward_position(offset, cursor, store.find_offset_run(flow, key, offset), last, 0)
        for offset in range(tail.upstream_start, end)
    ]
    back = [
        failback_position(offset, cursor, store.find_offset_run_downstream(flow, key, offset), False, 0)
        for offset in range(tail.downstream_start, end)
    ]
    return forward + back


def test_prune_history_folds_old_runs_and_keeps_the_exact_tail(clusters, prefix, tmp_path: Path):
    topic = f"{prefix}.pruned"
    config = write_config(tmp_path / "mm2.properties", clusters, f"a->b.enabled = true\ntopics = {prefix}.*")
    flow = load_config(config).flow("a->b")
    remote = flow.remote_topic(topic)
    create_topic(clusters["a"].bootstrap, topic)
    create_topic(clusters["b"].bootstrap, remote)
    key = PartitionKey(topic, 0)
    with MetadataStore.open(flow.metadata_db_url) as store:
        for batch in range(BATCHES):
            planned, result = two_run_batch(topic, remote, batch)
            batch_id = store.begin_batch(flow.name, [planned], {})
            store.commit_batch(batch_id, [result])
        exact_runs = store.offset_runs(flow.name, key)
        tail, end = exact_runs[-EXACT_RUNS], 11 * BATCHES + 2
        before = translated(store, flow.name, key, tail, end)

        recording.prune_history(flow, store, CommittedBatch(batch_id, [planned], [result], {}))

        runs = store.offset_runs(flow.name, key)
        assert len(exact_runs) == 2 * BATCHES and len(runs) < len(exact_runs)
        assert len(runs) <= FOLDED_RUNS + EXACT_RUNS + FOLD_SIZE - 1
        assert not runs[0].exact and runs[-EXACT_RUNS:] == exact_runs[-EXACT_RUNS:]
        assert translated(store, flow.name, key, tail, end) == before
