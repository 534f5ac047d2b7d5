"""Kafka stand-ins for the copy task's modules (:mod:`tests.unit.kafka_stand_ins`): a source cluster the range
reader reads, a target cluster the writer and the batch log talk to, and the clock the writer's bounds read."""

from __future__ import annotations

import pytest

from airmirror.replication.spark import batch_log, range_reader, remote_topics, task_writer
from tests.unit.kafka_stand_ins import Clock, StandInCluster


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Clock:
    """The writer's clock (chunk time bounds, stream ends); the source's polls move it."""
    moved = Clock()
    monkeypatch.setattr(task_writer, "time", moved)
    return moved


@pytest.fixture
def source(monkeypatch: pytest.MonkeyPatch, clock: Clock) -> StandInCluster:
    """The source cluster, read by :class:`~airmirror.replication.spark.range_reader.RangesReader`."""
    cluster = StandInCluster(clock)
    monkeypatch.setattr(range_reader, "Consumer", cluster.Consumer)
    return cluster


@pytest.fixture
def target(monkeypatch: pytest.MonkeyPatch) -> StandInCluster:
    """The target cluster: the copy task's transactional producer, its anchor group, the batch log and the remote
    topics' ids."""
    cluster = StandInCluster()
    monkeypatch.setattr(task_writer, "Producer", cluster.Producer)
    monkeypatch.setattr(task_writer, "Consumer", cluster.Consumer)
    monkeypatch.setattr(batch_log, "Consumer", cluster.Consumer)
    monkeypatch.setattr(remote_topics, "AdminClient", cluster.AdminClient)
    return cluster
