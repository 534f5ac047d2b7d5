"""A topic leaves the flow's selection while an unfinished batch holds committed chunks of it: the resumed batch
still finishes that topic's range (or, for a topic deleted on the source, ends it where its copy got to), so
the next run with the topic back continues exactly once instead of refusing to write duplicates.

The interruption is real: topic Y holds a 2 MiB record after 12,000 small ones, and its remote topic accepts at
most 1 MiB (see :mod:`tests.integration.test_oversized_record`), so the batch's copy commits some chunks of Y
and then fails.  The copy tasks run in this process, once each (the function a Spark task runs, without Spark's
four attempts at a range that cannot pass).  The remote limit is raised, and the batch is resumed with Y out of
the selection in each way a topic can leave it: ``replicate --topics`` (the command's main, in process), the
DAG's ``topics`` param (the library steps the DAG's tasks run, with the options the param gives), a config
change, a topic deleted on the source.

Every test uses its own source alias for the shared cluster ``a`` (its own flow, remote topics, batch-log
progress and DB), so the source topics are loaded once for the module.
"""

from __future__ import annotations

import re
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import pytest
from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient

from airmirror.cli import main
from airmirror.dag_factory.params import batch_options
from airmirror.devtools.local_kafka import LocalBroker
from airmirror.errors import ReplicationFailure
from airmirror.model import NoJobYet, PartitionKey
from airmirror.replication.health import FlowState, flow_health
from airmirror.replication.options import BatchOptions
from airmirror.replication.pipeline import plan_batch, record_batch, run_batch, sync_flow_topics
from airmirror.replication.spark.copy_job import plan_copy_tasks
from airmirror.replication.spark.progress import supersede_jobs
from airmirror.replication.spark.task_writer import run_attempt
from tests.conftest import write_config
from tests.integration.test_oversized_record import MIB, MM2_DEFAULT_CONFIG_EXCLUDES, load_source, set_max_message_bytes
from tests.kafka_helpers import create_topic, delete_topic_and_wait, end_offset, produce, records_of
from tests.mirror_helpers import opened, replicate, unique_records

pytestmark = pytest.mark.integration

X_RECORDS = 50


@dataclass(frozen=True)
class Topics:
    """Source topics on cluster ``a``: ``x`` stays selected, ``y`` leaves the selection mid-batch."""

    prefix: str
    x: str
    y: str


@dataclass(frozen=True)
class Interrupted:
    """A flow whose RUNNING batch committed ``partial`` records of ``y`` into ``remote_y``, then failed."""

    config: Path
    flow: str
    remote_x: str
    remote_y: str
    partial: int


def load_topics(bootstrap: str, prefix: str) -> Topics:
    topics = Topics(prefix, f"{prefix}.x", f"{prefix}.y")
    create_topic(bootstrap, topics.x)
    produce(bootstrap, topics.x, 0, unique_records(topics.x, X_RECORDS))
    load_source(bootstrap, topics.y)
    return topics


@pytest.fixture(scope="module")
def shared_topics(clusters) -> Topics:
    return load_topics(clusters["a"].bootstrap, f"t{uuid.uuid4().hex[:8]}")


def flow_config(path: Path, clusters: dict[str, LocalBroker], alias: str, topics: Topics) -> Path:
    """A flow ``{alias}->b`` from cluster ``a`` (under ``alias``) that keeps the remote topics' own
    ``max.message.bytes`` and commits every 1,000 records."""
    return write_config(
        path,
        {alias: clusters["a"], "b": clusters["b"]},
        f"{alias}->b.enabled = true\ntopics = {topics.prefix}.*\nairmirror.spark.master = local[2]\n"
        "airmirror.transaction.max.records = 1000\n"
        f"config.properties.exclude = {MM2_DEFAULT_CONFIG_EXCLUDES}, max\\.message\\.bytes",
    )


def interrupt(clusters: dict[str, LocalBroker], tmp_path: Path, topics: Topics) -> Interrupted:
    """Plan and store a batch of X and Y with the pipeline's steps, and run its copy tasks in this process (the
    function each Spark task runs, once, without Spark's retries): X's range is copied, Y's commits chunks and
    then fails on the big record.  Then raise Y's remote limit, so the batch could finish."""
    alias = f"s{uuid.uuid4().hex[:6]}"
    a, b = clusters["a"].bootstrap, clusters["b"].bootstrap
    remote_y = f"{alias}.{topics.y}"
    create_topic(b, remote_y, 1, {"max.message.bytes": str(MIB)})
    config = flow_config(tmp_path / "mm2.properties", clusters, alias, topics)
    with opened(config, f"{alias}->b") as (flow, store):
        options = BatchOptions()
        planned = plan_batch(flow, store, sync_flow_topics(flow, store, options).mappings, options)
        # as run_batch does before the job
        job = supersede_jobs(flow, [], NoJobYet(), planned.batch_id, check_lease=lambda: None)
        tasks = plan_copy_tasks(
            flow,
            planned.batch_id,
            planned.ranges,
            lambda: len(planned.ranges),
            job=job,
            scan_from=None,
            recorded_remote_ids=store.remote_topic_ids(flow.name),
        )
        assert [len(task.ranges) for task in tasks] == [1, 1]
        store.set_copy_tasks(planned.batch_id, len(tasks), tasks[0].log_end)  # as run_batch does before the job
        for task in tasks:
            if task.ranges[0].topic == topics.y:
                with pytest.raises((ReplicationFailure, KafkaException)):  # the broker refused the big record
                    run_attempt(task, first_attempt=True)
            else:
                run_attempt(task, first_attempt=True)
        assert store.unfinished_batch(flow.name).id == planned.batch_id
    partial = len(records_of(b, remote_y, 0))
    assert 0 < partial < end_offset(a, topics.y, 0), "no chunk of Y was committed: the test proves less"
    set_max_message_bytes(b, remote_y, 3 * MIB)
    return Interrupted(config, f"{alias}->b", f"{alias}.{topics.x}", remote_y, partial)


def cursors(run: Interrupted) -> dict[str, int]:
    with opened(run.config, run.flow) as (flow, store):
        assert store.unfinished_batch(flow.name) is None
        return {key.topic: offset for key, offset in store.cursors(flow.name).items()}


def assert_y_finished_then_continues(clusters: dict[str, LocalBroker], spark, run: Interrupted, topics: Topics) -> None:
    """The resumed batch committed Y's whole range; with Y back and new records in it, the next run copies them
    exactly once: both remote topics equal their source topics record for record."""
    a, b = clusters["a"].bootstrap, clusters["b"].bootstrap
    assert cursors(run)[topics.y] == end_offset(a, topics.y, 0)
    produce(a, topics.y, 0, unique_records(f"more-{run.flow}", 10))
    assert replicate(run.config, spark, run.flow).summary.records == 10
    assert records_of(b, run.remote_y, 0) == records_of(a, topics.y, 0)
    assert records_of(b, run.remote_x, 0) == records_of(a, topics.x, 0)


def test_topics_flag_leaves_y_out(clusters, spark, shared_topics, tmp_path, capsys):
    run = interrupt(clusters, tmp_path, shared_topics)
    code = main(["replicate", str(run.config), "--flow", run.flow, "--topics", re.escape(shared_topics.x)])
    assert code == 0, capsys.readouterr().err
    assert_y_finished_then_continues(clusters, spark, run, shared_topics)


def test_dag_topics_param_leaves_y_out(clusters, spark, shared_topics, tmp_path):
    """The library steps the DAG's tasks run, in their order, with the options its ``topics`` param gives."""
    run = interrupt(clusters, tmp_path, shared_topics)
    options = batch_options({"topics": re.escape(shared_topics.x)}, None)
    with opened(run.config, run.flow) as (flow, store):
        planned = plan_batch(flow, store, sync_flow_topics(flow, store, options).mappings, options)
        assert planned.resumed
        run_batch(flow, store, planned, lambda: spark)
        record_batch(flow, store, planned)
    assert_y_finished_then_continues(clusters, spark, run, shared_topics)


def test_config_change_leaves_y_out(clusters, spark, shared_topics, tmp_path):
    run = interrupt(clusters, tmp_path, shared_topics)
    original = run.config.read_text()
    run.config.write_text(original + f"topics.exclude = {re.escape(shared_topics.y)}\n")
    assert replicate(run.config, spark, run.flow).planned.resumed
    run.config.write_text(original)
    assert_y_finished_then_continues(clusters, spark, run, shared_topics)


def test_deleted_source_topic_ends_where_its_copy_got_to(clusters, spark, prefix, tmp_path):
    """Y is deleted on the source: its range ends at its committed position, the batch commits, and the flow's health
    counts Y's partition stopped; Y created again is a new incarnation copied from its start (a recorded source
    reset), after the records copied, and stops nothing any more."""
    a, b = clusters["a"].bootstrap, clusters["b"].bootstrap
    topics = load_topics(a, prefix)
    run = interrupt(clusters, tmp_path, topics)
    copied = records_of(b, run.remote_y, 0)
    admin = AdminClient({"bootstrap.servers": a})
    admin.delete_topics([topics.y], operation_timeout=30)[topics.y].result()
    delete_topic_and_wait(admin, topics.y)

    assert replicate(run.config, spark, run.flow).planned.resumed
    assert cursors(run)[topics.y] == run.partial
    assert records_of(b, run.remote_y, 0) == copied
    with opened(run.config, run.flow) as (flow, store):
        gone = flow_health(flow, store, datetime.now(UTC), reverse_enabled=False)
    assert gone.state is FlowState.STOPPED and list(gone.gone_topics) == [topics.y] and gone.stopped_partitions == 1

    create_topic(a, topics.y)
    again = unique_records("again", 30)
    produce(a, topics.y, 0, again)
    assert replicate(run.config, spark, run.flow).summary.records == 30
    assert records_of(b, run.remote_y, 0) == copied + again
    with opened(run.config, run.flow) as (flow, store):
        back = flow_health(flow, store, datetime.now(UTC), reverse_enabled=False)
        assert back.gone_topics == {} and FlowState.STOPPED not in back.states
        [reset] = store.source_resets(flow.name)
        assert (reset.topic, reset.old_cursor, reset.new_start) == (topics.y, run.partial, 0)
        assert store.cursors(flow.name)[PartitionKey(topics.y, 0)] == 30
