"""Reads of exact source ranges (:mod:`airmirror.replication.spark.range_reader`) from an in-memory source cluster
(``conftest.py``): committed records only, in order, within ``[start, end)``; a read ends at its end, at an end of
partition at or beyond it, or (after waiting) where a truncated log now ends; a read range is unassigned."""

from __future__ import annotations

import pytest
from confluent_kafka import KafkaError, KafkaException, Message

from airmirror.replication.spark import range_reader
from airmirror.replication.spark.range_reader import EARLY_END_WAIT_S, OPEN_END, RangesReader, ReadRange, ReadState
from tests.unit.kafka_stand_ins import Clock, StandInCluster

TOPIC = "orders"


@pytest.fixture(autouse=True)
def reader_clock(monkeypatch: pytest.MonkeyPatch, clock: Clock) -> Clock:
    monkeypatch.setattr(range_reader, "time", clock)
    return clock


def read_all(reader: RangesReader) -> dict[tuple[str, int], list[int]]:
    """The offsets of every record the read hands over, per partition."""
    offsets: dict[tuple[str, int], list[int]] = {}
    for got in reader.rounds():
        for key, messages in got.items():
            offsets.setdefault(key, []).extend(m.offset() or 0 for m in messages)
    return offsets


def test_a_read_returns_the_committed_records_of_its_range_in_order_and_ends_at_its_end(
    source: StandInCluster,
) -> None:
    source.fill(TOPIC, 0, 3)
    source.skip(TOPIC, 0, 2)  # aborted records and a marker
    source.fill(TOPIC, 0, 5)

    with RangesReader({}, [ReadRange(TOPIC, 0, 1, 8)]) as reader:
        assert read_all(reader) == {(TOPIC, 0): [1, 2, 5, 6, 7]}
        assert reader.reads[(TOPIC, 0)].reached == 8


def test_a_range_that_ends_in_aborted_records_ends_at_the_end_of_partition(source: StandInCluster) -> None:
    source.fill(TOPIC, 0, 3)
    source.skip(TOPIC, 0, 2)

    with RangesReader({}, [ReadRange(TOPIC, 0, 0, 5)]) as reader:
        assert read_all(reader) == {(TOPIC, 0): [0, 1, 2]}
        assert reader.reads[(TOPIC, 0)].done


def test_each_range_is_unassigned_once_read_and_a_dropped_one_is_never_read(source: StandInCluster) -> None:
    for partition in (0, 1, 2):
        source.fill(TOPIC, partition, 10)

    with RangesReader(
        {}, [ReadRange(TOPIC, 0, 0, 2), ReadRange(TOPIC, 1, 0, 10), ReadRange(TOPIC, 2, 0, 10)]
    ) as reader:
        reader.drop(TOPIC, 2)
        reader.seek(TOPIC, 1, 7, None)
        rounds = reader.rounds()
        first = next(rounds)
        (consumer,) = source.consumers
        assert set(consumer.positions) == set()  # both reads ended in the first poll: both unassigned
        assert {key: [m.offset() for m in messages] for key, messages in first.items()} == {
            (TOPIC, 0): [0, 1],
            (TOPIC, 1): [7, 8, 9],
        }
    assert consumer.closed


def test_an_end_of_partition_below_the_end_waits_then_ends_the_range_where_a_truncated_log_ends(
    source: StandInCluster,
) -> None:
    source.seconds_per_poll = 1.0
    source.fill(TOPIC, 0, 5)  # the plan said 8: an unclean leader election truncated the log since
    began = source.clock.time()

    with RangesReader({}, [ReadRange(TOPIC, 0, 0, 8)]) as reader:
        rounds, read, offsets = reader.rounds(), reader.reads[(TOPIC, 0)], []
        while read.state is not ReadState.SHORT_END:  # at the end of partition, 5, below the range's end
            offsets += [m.offset() for m in next(rounds).get((TOPIC, 0), [])]
        assert offsets == [0, 1, 2, 3, 4] and read_all(reader) == {}  # it waits, then ends at the log's end
        assert (read.end, read.reached, read.state) == (5, 5, ReadState.READ)
    assert source.clock.time() - began > EARLY_END_WAIT_S


@pytest.mark.parametrize("end", [8, OPEN_END], ids=["bounded", "open"])
def test_a_range_whose_next_offsets_retention_deleted_ends_where_the_read_got_to(
    source: StandInCluster, end: int
) -> None:
    """Retention (or DeleteRecords) passed the read's position after the range was planned: the range ends there,
    is named in ``ended``, and the other ranges read on; the next plan records the deleted offsets as a gap.  A
    rewind (an aborted chunk's) reads it again only up to where it ended."""
    source.fill(TOPIC, 0, 8)
    source.fill(TOPIC, 1, 3)
    source.delete(TOPIC, 0, below=5)

    with RangesReader({}, [ReadRange(TOPIC, 0, 2, end), ReadRange(TOPIC, 1, 0, 3)]) as reader:
        rounds = reader.rounds()
        first = next(rounds)
        assert [m.offset() for m in first[(TOPIC, 1)]] == [0, 1, 2] and (TOPIC, 0) not in first
        next(rounds, None)
        read = reader.reads[(TOPIC, 0)]
        assert (read.reached, read.state) == (2, ReadState.ENDED_EARLY) and read.done
        assert reader.ended == {(TOPIC, 0)}
        reader.seek(TOPIC, 0, 2, None)
        assert (read.end, read.state, reader.ended) == (2, ReadState.READ, {(TOPIC, 0)})


def test_an_offset_out_of_range_at_or_above_the_log_start_fails_the_read(source: StandInCluster) -> None:
    """Only retention ends a range early: an offset out of range that the log start does not explain fails the read,
    so nothing is skipped silently."""
    source.fill(TOPIC, 0, 8)
    source.out_of_range.add((TOPIC, 0))

    with RangesReader({}, [ReadRange(TOPIC, 0, 2, 8)]) as reader, pytest.raises(KafkaException, match="out of range"):
        read_all(reader)


@pytest.mark.parametrize("end", [8, OPEN_END], ids=["bounded", "open"])
def test_a_read_whose_topic_was_deleted_ends_where_it_got_to_and_the_others_read_on(
    source: StandInCluster, clock: Clock, end: int
) -> None:
    """librdkafka reports nothing for a deleted topic: a read short of its end that hears nothing is checked after
    ``STALL_CHECK_S``, ends where it got to, and is named in ``ended``; a quiet read of a topic that exists waits."""
    source.seconds_per_poll = 1.0
    source.fill(TOPIC, 0, 4)
    source.fill("kept", 0, 2)
    source.delete_topic(TOPIC)
    began = clock.monotonic()

    with RangesReader({}, [ReadRange(TOPIC, 0, 1, end), ReadRange("kept", 0, 0, 4)]) as reader:
        for _ in reader.rounds():
            if reader.reads[(TOPIC, 0)].done:
                break
        read = reader.reads[(TOPIC, 0)]
        assert (read.reached, read.state) == (1, ReadState.ENDED_EARLY) and reader.ended == {(TOPIC, 0)}
        assert clock.monotonic() - began >= range_reader.STALL_CHECK_S
        assert not reader.reads[("kept", 0)].done  # quiet too, but its topic exists: it waits on as before


def test_a_quiet_read_whose_topic_metadata_is_not_ready_waits_on(source: StandInCluster, clock: Clock) -> None:
    """Only a topic the cluster no longer knows ends a read: a topic-level error such as a leader not available yet
    leaves it waiting."""
    source.seconds_per_poll = 1.0
    source.fill(TOPIC, 0, 2)
    source.topic_errors[TOPIC] = KafkaError(KafkaError.LEADER_NOT_AVAILABLE)
    began = clock.monotonic()

    with RangesReader({}, [ReadRange(TOPIC, 0, 0, 4)]) as reader:
        rounds = reader.rounds()
        while clock.monotonic() - began < 2 * range_reader.STALL_CHECK_S:
            next(rounds)
        assert not reader.reads[(TOPIC, 0)].done and reader.ended == set()


def test_an_open_range_moves_to_where_the_read_caught_up_and_never_ends(source: StandInCluster) -> None:
    source.fill(TOPIC, 0, 3)
    source.skip(TOPIC, 0, 2)

    with RangesReader({}, [ReadRange(TOPIC, 0, 0, OPEN_END)]) as reader:
        rounds = reader.rounds()
        assert [m.offset() for m in next(rounds)[(TOPIC, 0)]] == [0, 1, 2]
        read = reader.reads[(TOPIC, 0)]
        assert (read.reached, read.state) == (5, ReadState.CAUGHT_UP)


def test_a_seek_outside_the_range_is_refused(source: StandInCluster) -> None:
    source.fill(TOPIC, 0, 10)

    with RangesReader({}, [ReadRange(TOPIC, 0, 2, 8)]) as reader, pytest.raises(ValueError):
        reader.seek(TOPIC, 0, 9, None)


def test_a_read_holds_at_most_one_range_per_partition(source: StandInCluster) -> None:
    with pytest.raises(ValueError, match="at most one range per partition"):
        RangesReader({}, [ReadRange(TOPIC, 0, 0, 5), ReadRange(TOPIC, 0, 5, 9)])


def test_the_epoch_reached_is_the_leader_epoch_of_the_last_record_read(source: StandInCluster) -> None:
    source.append(TOPIC, 0, b"k", b"v", leader_epoch=3)
    source.append(TOPIC, 0, b"k", b"v", leader_epoch=4)

    with RangesReader({}, [ReadRange(TOPIC, 0, 0, 2, start_epoch=2)]) as reader:
        read_all(reader)
        assert reader.reads[(TOPIC, 0)].reached_epoch == 4


def test_a_polls_messages_are_taken_in_runs_of_one_partition_in_their_order() -> None:
    messages = [
        Message(topic=TOPIC, partition=0, offset=5),
        Message(topic=TOPIC, partition=0, offset=6),
        Message(topic=TOPIC, partition=1, offset=3),
        Message(error=KafkaError(KafkaError._ALL_BROKERS_DOWN, "down")),  # an event of no partition
        Message(topic=TOPIC, partition=0, offset=7),
    ]

    runs = [(key, [m.offset() for m in run]) for key, run in range_reader.partition_runs(messages)]

    assert runs == [((TOPIC, 0), [5, 6]), ((TOPIC, 1), [3]), (None, [None]), ((TOPIC, 0), [7])]
    assert list(range_reader.partition_runs([])) == []


def test_a_bounded_read_whose_partition_lost_its_leader_ends_where_it_got_to_and_the_others_read_on(
    source: StandInCluster, clock: Clock
) -> None:
    """A sick partition stays alone: a bounded read that hears nothing and whose partition the metadata shows
    without a leader ends where it got to after ``STALL_CHECK_S`` (the batch commits its cursor there); the other
    ranges are read to their ends."""
    source.seconds_per_poll = 1.0
    source.records_per_poll = 1
    source.fill(TOPIC, 0, 4)
    source.fill(TOPIC, 1, 6)
    source.offline.add((TOPIC, 0))

    with RangesReader({}, [ReadRange(TOPIC, 0, 0, 4), ReadRange(TOPIC, 1, 0, 6)]) as reader:
        got = read_all(reader)
        read = reader.reads[(TOPIC, 0)]
        assert (read.reached, read.state) == (0, ReadState.ENDED_EARLY) and reader.ended == {(TOPIC, 0)}
    assert got[(TOPIC, 1)] == list(range(6))
