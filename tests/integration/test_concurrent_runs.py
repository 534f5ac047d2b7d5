"""Two runs of one flow at once (a CLI run beside a DAG run, a backfill beside a scheduled run).

The flow lease (:mod:`airmirror.store.flow_lease`) lets exactly one of them work: the other exits 1 at once,
saying plainly that another run holds the flow, and changes nothing.  Whatever the interleaving, no batch is
left that can never commit, the target equals the source record for record, and the next run succeeds.

Every run is the real CLI in its own process (own Spark JVM), against the session's two real Kafka clusters
and a SQLite metadata DB.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient

from airmirror.config import load_config
from airmirror.model import BatchState
from airmirror.replication.options import BatchOptions
from airmirror.replication.pipeline import plan_batch, sync_flow_topics
from airmirror.store import MetadataStore, describe_holder
from airmirror.store.opening import open_flow
from tests.conftest import write_config
from tests.kafka_helpers import create_topic, produce, records_of, sample_records

pytestmark = [pytest.mark.integration, pytest.mark.slow]

FLOW = "a->b"
PARTITIONS = 2
RECORDS_PER_PARTITION = 5_000
BUSY = "flow 'a->b' is being replicated by another run (holder "
NOTHING_CHANGED = "; nothing was changed; run again once it finishes"


def start_cli(config: Path) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "airmirror.cli", "replicate", str(config), "--flow", FLOW],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )


def finish(process: subprocess.Popen[str]) -> tuple[int, str, str]:
    try:
        stdout, stderr = process.communicate(timeout=600)
    except subprocess.TimeoutExpired:
        process.kill()
        stdout, stderr = process.communicate()
        raise AssertionError(f"replicate did not finish within 600 s:\n{stdout}\n{stderr}") from None
    return process.returncode, stdout, stderr


def run_cli(config: Path) -> tuple[int, str, str]:
    return finish(start_cli(config))


def produce_more(bootstrap: str, topic: str, label: str) -> None:
    for p in range(PARTITIONS):
        produce(bootstrap, topic, p, sample_records(RECORDS_PER_PARTITION, prefix=f"{label}-{p}"))


def assert_next_run_copies_what_follows(clusters, config, topic: str) -> None:
    """After the race: more records are produced, and the next run succeeds and copies them exactly."""
    produce_more(clusters["a"].bootstrap, topic, "second")
    code, stdout, stderr = run_cli(config)
    assert code == 0, f"{stdout}\n{stderr}"
    assert_all_batches_committed(config)
    assert_target_equals_source(clusters, topic)


def assert_target_equals_source(clusters, topic: str) -> None:
    a, b = clusters["a"].bootstrap, clusters["b"].bootstrap
    for p in range(PARTITIONS):
        source, target = records_of(a, topic, p), records_of(b, f"a.{topic}", p)
        assert len(target) == len(source)
        assert target == source, f"{topic}-{p}: the target differs from the source"


def assert_all_batches_committed(config: Path) -> list[int]:
    """Every batch of the flow is COMMITTED and the lease is free; returns the batch ids, oldest first."""
    flow = load_config(config).flow(FLOW)
    with MetadataStore.open(flow.metadata_db_url) as store:
        assert store.unfinished_batch(flow.name) is None
        assert store.flow_lease(flow.name) is None, "a finished run left its lease behind"
        batches = store.batches(flow.name, limit=100)
    assert all(batch.state is BatchState.COMMITTED for batch in batches), [(b.id, b.state, b.error) for b in batches]
    return sorted(batch.id for batch in batches)


def assert_one_won(outcomes: list[tuple[int, str, str]]) -> None:
    """Exactly one run succeeded and the other exited 1 saying, in one line, that another run holds the flow
    (having started no Spark: a JVM would say more); or, if the second only started after the first finished,
    both succeeded."""
    codes = sorted(code for code, _, _ in outcomes)
    report = "\n".join(f"exit {code}\nstdout:\n{out}\nstderr:\n{err}" for code, out, err in outcomes)
    assert codes in ([0, 1], [0, 0]), report
    for code, stdout, stderr in outcomes:
        if code == 1:
            assert stderr.startswith(f"airmirror: error: {BUSY}"), report
            assert stderr.strip().endswith(NOTHING_CHANGED), report
            assert len(stderr.splitlines()) == 1, report
            assert stdout == "", report


@pytest.fixture
def flow_config(clusters, prefix, tmp_path) -> tuple[Path, str]:
    topic = f"{prefix}.orders"
    create_topic(clusters["a"].bootstrap, topic, PARTITIONS)
    produce_more(clusters["a"].bootstrap, topic, "first")
    config = write_config(
        tmp_path / "mm2.properties",
        clusters,
        f"a->b.enabled = true\ntopics = {prefix}.*\nairmirror.spark.master = local[2]\n"
        "airmirror.transaction.max.records = 2000",
    )
    return config, topic


def test_two_concurrent_runs_one_wins_the_other_says_so(clusters, flow_config):
    config, topic = flow_config
    first, second = start_cli(config), start_cli(config)
    assert_one_won([finish(first), finish(second)])
    assert_all_batches_committed(config)
    assert_target_equals_source(clusters, topic)

    assert_next_run_copies_what_follows(clusters, config, topic)


def test_two_concurrent_runs_resume_an_unfinished_batch_once(clusters, flow_config):
    """The batch a DAG run planned (its sync_topics and plan tasks ran, then it stopped) is RUNNING when two
    runs start together: without the lease both would resume it and fence each other's producers."""
    config, topic = flow_config
    with open_flow(config, FLOW) as (flow, store):
        topics = sync_flow_topics(flow, store, BatchOptions())
        planned = plan_batch(flow, store, topics.mappings, BatchOptions())
    assert planned.batch_id is not None and sum(r.size for r in planned.ranges) == PARTITIONS * RECORDS_PER_PARTITION

    first, second = start_cli(config), start_cli(config)
    outcomes = [finish(first), finish(second)]
    assert_one_won(outcomes)
    assert any(code == 0 and f"batch {planned.batch_id} (resumed)" in stdout for code, stdout, _ in outcomes)
    assert planned.batch_id in assert_all_batches_committed(config)
    assert_target_equals_source(clusters, topic)

    assert_next_run_copies_what_follows(clusters, config, topic)


def test_a_run_beside_a_dag_task_holding_the_flow_changes_nothing(clusters, flow_config):
    config, topic = flow_config
    holder = describe_holder("Airflow dag airmirror__a__b run manual__backfill task replicate try 1")
    flow = load_config(config).flow(FLOW)
    with MetadataStore.open(flow.metadata_db_url) as store, store.hold_flow(FLOW, holder):
        code, stdout, stderr = run_cli(config)
        assert code == 1, f"{stdout}\n{stderr}"
        assert stderr.startswith(f"airmirror: error: {BUSY}{holder}, since "), stderr
        assert NOTHING_CHANGED in stderr
        assert store.batches(FLOW) == []
        assert store.flow_lease(FLOW).holder == holder
    remote = AdminClient({"bootstrap.servers": clusters["b"].bootstrap}).list_topics(timeout=30).topics
    assert f"a.{topic}" not in remote, "the losing run created the remote topic"

    code, stdout, stderr = run_cli(config)
    assert code == 0, f"{stdout}\n{stderr}"
    assert_all_batches_committed(config)
    assert_target_equals_source(clusters, topic)
