"""What the driver reads and fences around a copy job (:mod:`airmirror.replication.spark.progress`): which ranges a
batch has still to copy, and which attempts it fences, whose open transactions never become visible."""

from __future__ import annotations

from pathlib import Path

import pytest
from confluent_kafka import KafkaException

from airmirror import names
from airmirror.config import FlowConfig, load_config
from airmirror.errors import ReplicationFailure
from airmirror.model import NoJobYet, PartitionKey, PerPartitionJobs, PlannedRange, TaskJobs
from airmirror.replication.spark.batch_log import Progress, decode_job, job_marker
from airmirror.replication.spark.progress import attempt_ids, fence_partitions, supersede_jobs, unfinished, untouched
from tests.unit.kafka_stand_ins import StandInCluster

BATCH = 7
KEYS = [PartitionKey("orders", 0), PartitionKey("orders", 1)]


@pytest.fixture
def flow(tmp_path: Path) -> FlowConfig:
    path = tmp_path / "mm2.properties"
    path.write_text(
        "clusters = a, b\na.bootstrap.servers = a:9092\nb.bootstrap.servers = b:9092\na->b.enabled = true\n"
    )
    return load_config(path, env={}).flow("a->b")


def planned(partition: int, start: int, end: int) -> PlannedRange:
    return PlannedRange(topic="orders", partition=partition, start=start, end=end, remote_topic="a.orders")


def progress(batch_id: int, position: int, done: bool) -> Progress:
    return Progress(
        batch_id=batch_id,
        chunk=0,
        start=0,
        end=10,
        position=position,
        done=done,
        records=position,
        bytes=position,
        downstream_start=0,
        downstream_position=position,
        first_runs_offset=0,
    )


@pytest.mark.proves("job_driver rule 2")
def test_a_range_is_untouched_until_its_batch_commits_a_chunk_and_unfinished_until_one_says_done() -> None:
    ranges = [planned(0, 0, 10), planned(1, 0, 10), planned(2, 0, 10), planned(3, 0, 10), planned(4, 5, 5)]
    found = {
        PartitionKey("orders", 0): None,
        PartitionKey("orders", 1): progress(BATCH - 1, 10, done=True),  # an earlier batch's
        PartitionKey("orders", 2): progress(BATCH, 4, done=False),
        PartitionKey("orders", 3): progress(BATCH, 10, done=True),
        PartitionKey("orders", 4): None,  # nothing to copy
    }

    assert [r.partition for r in untouched(ranges, found, BATCH)] == [0, 1]
    assert [r.partition for r in unfinished(ranges, found, BATCH)] == [0, 1, 2]


def test_the_attempts_fenced_are_those_of_the_batchs_copy_tasks(flow: FlowConfig) -> None:
    assert attempt_ids(flow, KEYS, NoJobYet()) == []
    assert attempt_ids(flow, KEYS, TaskJobs(2)) == [
        *names.copy_task_transactional_ids("a", "b", 0),
        *names.copy_task_transactional_ids("a", "b", 1),
    ]
    assert attempt_ids(flow, KEYS, PerPartitionJobs()) == [
        names.transactional_id("a", "b", "orders", partition) for partition in (0, 1)
    ]


@pytest.mark.proves("task_writer rule 2")
def test_fencing_aborts_what_an_attempt_left_open_and_it_can_never_commit(
    flow: FlowConfig, target: StandInCluster
) -> None:
    zombie = target.Producer({"transactional.id": names.copy_task_transactional_ids("a", "b", 1)[1]})
    zombie.init_transactions()
    zombie.begin_transaction()
    zombie.produce("a.orders", b"v", b"k", partition=0)
    zombie.flush()

    fence_partitions(flow, KEYS, TaskJobs(2), check_lease=lambda: None)

    assert [t.state for t in target.transactions] == ["aborted"]
    assert target.committed_records("a.orders", 0) == []
    with pytest.raises(KafkaException) as raised:
        zombie.commit_transaction()
    assert raised.value.args[0].fatal()
    fenced = [tid for tid, method in target.calls if method == "init_transactions"][1:]
    assert fenced == attempt_ids(flow, KEYS, TaskJobs(2))


@pytest.mark.proves("task_writer rule 3", "job_driver rule 1")
def test_superseding_commits_a_new_job_token_then_fences_the_attempts(flow: FlowConfig, target: StandInCluster) -> None:
    """Rule 1 of the task writer: the new token is committed before the fencing, so an attempt that starts after
    the fencing reads it; every call makes a token of its own."""
    first = supersede_jobs(flow, KEYS, TaskJobs(2), 7, check_lease=lambda: None)
    second = supersede_jobs(flow, KEYS, TaskJobs(2), 7, check_lease=lambda: None)

    group = names.anchor_group("a", "b")
    assert first != second and first.startswith("7-")
    assert decode_job(target.groups[group][job_marker(names.batch_log_topic("a"))].metadata) == second
    methods = [method for _, method in target.calls if method in ("commit", "init_transactions")]
    assert methods == ["commit", *["init_transactions"] * 4] * 2  # two tasks of two producers each


@pytest.mark.proves("job_driver rule 1")
def test_a_run_whose_lease_is_lost_neither_supersedes_nor_fences(flow: FlowConfig, target: StandInCluster) -> None:
    """Only the lease holder fences: the check comes before the job token and before any fence, so a thawed driver
    leaves the owner's job and tasks alone."""

    def lost() -> None:
        raise ReplicationFailure("lost its lease")

    with pytest.raises(ReplicationFailure, match="lost its lease"):
        supersede_jobs(flow, KEYS, TaskJobs(2), 7, check_lease=lost)
    with pytest.raises(ReplicationFailure, match="lost its lease"):
        fence_partitions(flow, KEYS, TaskJobs(2), check_lease=lost)

    assert target.calls == [] and names.anchor_group("a", "b") not in target.groups
    fence_partitions(flow, KEYS, NoJobYet(), check_lease=lost)  # nothing to fence: nothing checked
