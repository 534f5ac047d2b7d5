"""How a batch's ranges are spread over copy tasks, and which attempts a retried job fences."""

from __future__ import annotations

from pathlib import Path

import pytest

from airmirror import names
from airmirror.config import load_config
from airmirror.errors import ReplicationFailure
from airmirror.model import NoJobYet, PartitionKey, PerPartitionJobs, PlannedRange, TaskJobs
from airmirror.replication.spark.copy_job import spread, task_failure
from airmirror.replication.spark.progress import attempt_ids


def ranges(*sizes: int) -> list[PlannedRange]:
    return [
        PlannedRange(topic=f"t{i % 3}", partition=i, start=100, end=100 + size, remote_topic=f"a.t{i % 3}")
        for i, size in enumerate(sizes)
    ]


@pytest.mark.proves("job_driver rule 2")
def test_every_range_lands_in_exactly_one_task_in_plan_order():
    planned = ranges(*range(1, 2001))
    tasks = spread(planned, 8)
    assert len(tasks) == 8
    assert sorted((r.topic, r.partition) for task in tasks for r in task) == sorted(
        (r.topic, r.partition) for r in planned
    )
    order = {r.key: i for i, r in enumerate(planned)}
    assert all([order[r.key] for r in task] == sorted(order[r.key] for r in task) for task in tasks)


def test_tasks_carry_nearly_equal_offsets():
    tasks = spread(ranges(900, 10, 10, 300, 300, 300, 5, 5), 2)
    loads = sorted(sum(r.size for r in task) for task in tasks)
    assert loads == [915, 915]
    skewed = spread(ranges(1000, 1, 1, 1), 2)
    assert sorted(len(task) for task in skewed) == [1, 3]


def test_fewer_ranges_than_slots_gives_one_task_per_range_and_the_spread_is_deterministic():
    planned = ranges(5, 7)
    assert [len(task) for task in spread(planned, 2)] == [1, 1]
    assert spread(planned, 1) == [planned]
    big = ranges(*[i % 17 + 1 for i in range(500)])
    assert spread(big, 4) == spread(list(big), 4)


def flow(tmp_path: Path):
    path = tmp_path / "mm2.properties"
    path.write_text(
        "clusters = us, dr\nus.bootstrap.servers = 127.0.0.1:1\ndr.bootstrap.servers = 127.0.0.1:2\n"
        "us->dr.enabled = true\n"
    )
    return load_config(path, env={}).flow("us->dr")


@pytest.mark.proves("task_writer rule 3", "job_driver rule 3")
def test_a_retried_job_fences_the_ids_the_job_before_it_used(tmp_path):
    f = flow(tmp_path)
    keys = [PartitionKey("orders", 0), PartitionKey("orders", 1)]
    assert attempt_ids(f, keys, NoJobYet()) == []
    assert attempt_ids(f, keys, TaskJobs(3)) == [
        t for i in range(3) for t in names.copy_task_transactional_ids("us", "dr", i)
    ]
    legacy = attempt_ids(f, keys, PerPartitionJobs())
    assert legacy == [names.transactional_id("us", "dr", "orders", 0), names.transactional_id("us", "dr", "orders", 1)]


@pytest.mark.proves("task_writer rule 1")
def test_copy_task_ids_never_equal_a_partition_id_and_share_the_flow_prefix():
    task_ids = {t for i in range(64) for t in names.copy_task_transactional_ids("us", "dr", i)}
    partition_ids = {
        names.transactional_id("us", "dr", topic, p) for topic in ("copy", "~copy0", "copy0", "x") for p in range(64)
    }
    assert not task_ids & partition_ids
    assert all(i.startswith(names.transactional_id_prefix("us", "dr")) for i in task_ids)
    assert len(task_ids) == 128
    assert not set(names.copy_task_transactional_ids("us", "dr", 0)) & set(
        names.copy_task_transactional_ids("us-dr", "x", 0)
    )


SPARK_JOB_ABORTED = """An error occurred while calling o57.collectAndServe.
: org.apache.spark.SparkException: Job aborted due to stage failure: Task 0 in stage 3.0 failed 4 times, most recent \
failure: Lost task 0.3 in stage 3.0 (TID 9) (127.0.0.1 executor driver): org.apache.spark.api.python.PythonException: \
Traceback (most recent call last):
  File "/work/include/airmirror/replication/spark/task_writer.py", line 700, in copy_task
    attempt.copy(reader)
confluent_kafka.error.KafkaException: KafkaError{code=_TRANSPORT,val=-195,str="Broker transport failure"}

\tat org.apache.spark.api.python.BasePythonRunner$ReaderIterator.handlePythonException(PythonRunner.scala:572)
Driver stacktrace:
\tat org.apache.spark.scheduler.DAGScheduler.failJobAndIndependentStages(DAGScheduler.scala:2898)
"""


def test_a_failed_spark_job_becomes_one_line_that_names_what_a_worker_raised() -> None:
    """A live run retries a ReplicationFailure (rule 8 of continuous), so every failed job becomes one, naming the
    airmirror error a task raised, else the last exception a worker raised, else Spark's first line."""
    airmirror = Exception(SPARK_JOB_ABORTED.replace("confluent_kafka.error.KafkaException: KafkaError", "x: y"))
    airmirror.args = (f"{airmirror.args[0]}\nairmirror.errors.ReplicationFailure: orders-0: the read stopped\n",)

    assert str(task_failure(airmirror)) == "orders-0: the read stopped"
    assert str(task_failure(Exception(SPARK_JOB_ABORTED))) == (
        "the Spark job failed: confluent_kafka.error.KafkaException: "
        'KafkaError{code=_TRANSPORT,val=-195,str="Broker transport failure"} '
        "(the Spark driver's log has the whole trace)"
    )
    assert str(task_failure(Exception("Executor lost\nmore"))) == (
        "the Spark job failed: Executor lost (the Spark driver's log has the whole trace)"
    )
    assert isinstance(task_failure(Exception()), ReplicationFailure)
