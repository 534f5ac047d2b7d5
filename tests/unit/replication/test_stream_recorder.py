"""How a stream's recordings run the after-commit actions (:class:`airmirror.replication.streaming.StreamRecorder`),
on a real SQLite store: the ones that act on every recording run on each recording's deltas, the ones that only
report where the copy stands (:data:`~airmirror.replication.recording.SAMPLED`) once per sampling interval and
at the end, on each partition's newest recording; and how a recording whose DB commit failed is reconciled with
what the DB holds.  The actions and the batch log's tail are stand-ins; the store is real."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from airmirror.errors import ReplicationFailure
from airmirror.model import OffsetRun, PartitionKey, PlannedRange, RangeResult
from airmirror.replication import streaming
from airmirror.replication.recording import CommittedBatch
from airmirror.replication.streaming import StreamRecorder
from airmirror.store import MetadataStore
from airmirror.store.streams import STREAM_PARAM

FLOW = "a->b"
TOPIC = "orders"


class Calls:
    """Stand-ins for the after-commit actions: each notes the ``(topic, partition, end)`` it was handed."""

    def __init__(self) -> None:
        self.every: list[list[tuple[int, int]]] = []
        self.sampled: list[list[tuple[int, int]]] = []

    def on_every(self, flow: Any, store: MetadataStore, committed: CommittedBatch) -> None:
        self.every.append([(r.partition, r.end) for r in committed.results])

    def on_sample(self, flow: Any, store: MetadataStore, committed: CommittedBatch) -> None:
        assert [p.partition for p in committed.planned] == [r.partition for r in committed.results]
        self.sampled.append(sorted((r.partition, r.end) for r in committed.results))


@pytest.fixture
def calls(monkeypatch: pytest.MonkeyPatch) -> Calls:
    found = Calls()
    monkeypatch.setattr(streaming, "EVERY_RECORDING", (found.on_every,))
    monkeypatch.setattr(streaming, "SAMPLED", (found.on_sample,))
    return found


@pytest.fixture
def recorder(tmp_path: Path) -> Iterator[StreamRecorder]:
    ranges = [PlannedRange(topic=TOPIC, partition=p, start=0, end=0, remote_topic=f"a.{TOPIC}") for p in range(2)]
    with MetadataStore.open(f"sqlite:///{tmp_path / 'metadata.db'}") as store:
        batch_id = store.begin_batch(FLOW, ranges, {"trigger": "test", STREAM_PARAM: True})
        yield StreamRecorder(None, store, batch_id, ranges, None)  # type: ignore[arg-type]  # the stand-ins need no flow


def delta(partition: int, start: int, end: int) -> RangeResult:
    return RangeResult(
        topic=TOPIC,
        partition=partition,
        start=start,
        end=end,
        records=end - start,
        bytes=10 * (end - start),
        runs=(OffsetRun(start, end, start),),
        downstream_start=start,
        downstream_end=end,
    )


@pytest.mark.proves("streaming rule 3")
def test_sampled_actions_wait_for_their_interval_and_see_each_partitions_newest_recording(recorder, calls, monkeypatch):
    monkeypatch.setattr(streaming, "SAMPLE_INTERVAL_S", 3600.0)
    recorder.record([delta(0, 0, 5)], {})
    recorder.record([delta(0, 5, 9), delta(1, 0, 2)], {})
    assert calls.every == [[(0, 5)], [(0, 9), (1, 2)]]
    assert calls.sampled == []

    recorder.record([], {}, final=True)
    assert calls.sampled == [[(0, 9), (1, 2)]]
    assert recorder.store.stream_recorded(recorder.batch_id)[PartitionKey(TOPIC, 0)].end == 9


def test_a_due_sample_runs_with_the_recording_and_an_idle_one_runs_nothing(recorder, calls, monkeypatch):
    monkeypatch.setattr(streaming, "SAMPLE_INTERVAL_S", 0.0)
    recorder.record([delta(1, 0, 3)], {})
    recorder.record([], {})
    assert calls.sampled == [[(1, 3)]]
    assert calls.every == [[(1, 3)]]


@dataclass
class Runs:
    """A stand-in for a runs record: the end it was read at, and no schema ids."""

    end: int
    schema_ids: dict[int, int] = field(default_factory=dict)


class Tail:
    """A stand-in for the batch log's tail: partition 0's copy stands at ``position``; its runs records are kept
    until forgotten."""

    def __init__(self) -> None:
        self.position = 0
        self.runs: list[Runs] = []

    def read_to(self, position: int) -> None:
        self.position = position
        self.runs.append(Runs(position))

    def deltas(self, recorded: dict[PartitionKey, RangeResult]) -> tuple[list[RangeResult], dict[PartitionKey, Any]]:
        end = recorded[PartitionKey(TOPIC, 0)].end
        if self.position <= end:
            return [], {}
        return [delta(0, end, self.position)], {PartitionKey(TOPIC, 0): list(self.runs)}

    def forget(self, used: dict[PartitionKey, Any]) -> None:
        self.runs = [r for r in self.runs if r not in used.get(PartitionKey(TOPIC, 0), [])]


def losing_the_outcome(monkeypatch: pytest.MonkeyPatch, store: MetadataStore, commits: bool) -> None:
    """The next ``record_stream`` fails as a dropped DB connection fails it, after committing or before."""
    real = store.record_stream

    def fails(*args: Any, **kwargs: Any) -> None:
        monkeypatch.setattr(store, "record_stream", real)
        if commits:
            real(*args, **kwargs)
        raise ReplicationFailure("metadata store sqlite:///m.db: could not record stream batch: connection lost")

    monkeypatch.setattr(store, "record_stream", fails)


@pytest.mark.parametrize("committed", [True, False], ids=["committed-after-all", "not-committed"])
@pytest.mark.proves("streaming rule 3")
def test_a_recording_whose_commit_failed_is_reconciled_with_the_db_and_the_stream_goes_on(
    recorder, calls, monkeypatch, committed
):
    tail = Tail()
    tail.read_to(5)
    losing_the_outcome(monkeypatch, recorder.store, committed)
    with pytest.raises(ReplicationFailure, match="connection lost"):
        recorder.record_tail(tail)
    tail.read_to(9)
    recorder.record_tail(tail)
    stored = recorder.store.stream_recorded(recorder.batch_id)[PartitionKey(TOPIC, 0)]
    assert (stored.end, stored.records) == (9, 9)
    assert calls.every == ([[(0, 5)], [(0, 9)]] if committed else [[(0, 9)]])
    assert tail.runs == []
