"""The driver's watch over a copy job (rules 4-6 of airmirror.replication.job_driver), with the Spark job and the
store's lease stood in for: the job is a function run in the driver's thread, cancelled through its job group."""

from __future__ import annotations

import threading
import time
from typing import Any, cast

import pytest

from airmirror.errors import ReplicationFailure
from airmirror.model import RangeCopied
from airmirror.replication import job_driver
from airmirror.replication.job_driver import WatchedJob, watch_copy_job
from airmirror.replication.spark import copy_job
from airmirror.store import FlowBusyError, MetadataStore

COPIED = [RangeCopied(topic="orders", partition=0, records=3, bytes=30)]


class SparkContext:
    """The part of a SparkContext the driver calls: cancelling a job group ends the job that runs in it, once the
    job is submitted (Spark cancels a group's active jobs only)."""

    def __init__(self) -> None:
        self.cancelled: list[str] = []
        self.submitted = threading.Event()
        self.cancel = threading.Event()

    def cancelJobGroup(self, group: str) -> None:
        self.cancelled.append(group)
        if self.submitted.is_set():
            self.cancel.set()


class Spark:
    def __init__(self) -> None:
        self.sparkContext = SparkContext()


class Lease:
    """The store's lease as the driver sees it: lost once :attr:`lease_lost` is set."""

    def __init__(self) -> None:
        self.lease_lost: FlowBusyError | None = None

    def raise_if_lease_lost(self) -> None:
        if self.lease_lost is not None:
            raise self.lease_lost


@pytest.fixture(autouse=True)
def quick_wakes(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(job_driver, "WAKE_INTERVAL_S", 0.01)


def runs(monkeypatch: pytest.MonkeyPatch, job: Any) -> None:
    """Make ``job(spark, tasks, group)`` the Spark job the driver runs."""
    monkeypatch.setattr(copy_job, "run_copy_job", job)


def until_cancelled(spark: Spark, tasks: list[Any], group: str) -> list[RangeCopied]:
    """A streaming job, submitted a few wakes after its thread started: it runs until its job group is cancelled,
    then fails as Spark's cancelled job does."""
    time.sleep(0.05)
    spark.sparkContext.submitted.set()
    if not spark.sparkContext.cancel.wait(30):
        raise AssertionError("the job was never cancelled")
    raise ReplicationFailure(f"job group {group} was cancelled")


def watch(lease: Lease, spark: Spark, each_interval: Any = lambda job: None) -> WatchedJob:
    return watch_copy_job(cast(MetadataStore, lease), spark, [], "airmirror-batch-7", each_interval)


@pytest.mark.proves("job_driver rule 4")
def test_the_job_runs_in_a_thread_while_the_driver_wakes_and_its_copies_come_back(monkeypatch) -> None:
    wakes: list[str] = []

    def copies(spark: Spark, tasks: list[Any], group: str) -> list[RangeCopied]:
        time.sleep(0.1)  # a few of the driver's wakes
        return COPIED

    runs(monkeypatch, copies)

    job = watch(Lease(), Spark(), lambda job: wakes.append(threading.current_thread().name))

    assert job.copied == COPIED and job.error is None and not job.cancelled
    assert wakes and set(wakes) == {threading.current_thread().name}  # the driver wakes; the job runs in a thread


@pytest.mark.proves("job_driver rule 5", "job_driver rule 6")
def test_a_lost_lease_cancels_the_job_at_once_and_raises_the_loss(monkeypatch) -> None:
    lease, spark = Lease(), Spark()
    runs(monkeypatch, until_cancelled)

    def lose(job: WatchedJob) -> None:
        lease.lease_lost = FlowBusyError("src->tgt", None, "run B took the flow over")

    with pytest.raises(FlowBusyError, match="took the flow over"):
        watch(lease, spark, lose)
    assert set(spark.sparkContext.cancelled) == {"airmirror-batch-7"}
    assert not [t for t in threading.enumerate() if t.name == "airmirror-batch-7"]  # joined, never left behind


@pytest.mark.proves("job_driver rule 6")
def test_whatever_ends_the_wait_the_job_is_cancelled_and_joined(monkeypatch) -> None:
    spark = Spark()
    runs(monkeypatch, until_cancelled)

    def fail(job: WatchedJob) -> None:
        raise KeyboardInterrupt  # a signal in the driver

    with pytest.raises(KeyboardInterrupt):
        watch(Lease(), spark, fail)
    assert set(spark.sparkContext.cancelled) == {"airmirror-batch-7"}
    assert not [t for t in threading.enumerate() if t.name == "airmirror-batch-7"]


@pytest.mark.proves("job_driver rule 6")
def test_a_failed_job_raises_its_failure_a_cancelled_one_nothing_and_a_lost_lease_the_loss(monkeypatch) -> None:
    def failing(spark: Spark, tasks: list[Any], group: str) -> list[RangeCopied]:
        raise ReplicationFailure("a worker raised")

    runs(monkeypatch, failing)
    lease = Lease()
    failed = watch(lease, Spark())
    with pytest.raises(ReplicationFailure, match="a worker raised"):
        failed.raise_failure(cast(MetadataStore, lease))
    lease.lease_lost = FlowBusyError("src->tgt", None, "run B took the flow over")
    with pytest.raises(FlowBusyError):
        failed.raise_failure(cast(MetadataStore, lease))

    runs(monkeypatch, until_cancelled)
    cancelled = watch(Lease(), Spark(), lambda job: job.cancelled or job.cancel())  # once, before it is submitted
    assert cancelled.cancelled and "was cancelled" in str(cancelled.error)  # cancelled again once it was
    cancelled.raise_failure(cast(MetadataStore, Lease()))  # a job the driver cancelled is no failure
