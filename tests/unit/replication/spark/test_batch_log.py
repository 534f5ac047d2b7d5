"""Batch-log records and anchors: exact round trips, bounded record sizes, untrusted anchors rejected."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest
from confluent_kafka import TopicPartition

from airmirror import names
from airmirror.errors import ReplicationFailure
from airmirror.model import OffsetRun
from airmirror.replication.offset_runs import merge_runs
from airmirror.replication.spark.batch_log import (
    LOG_FORMAT_VERSION,
    RUNS_PER_RECORD,
    LogReader,
    Progress,
    UnreadableRecord,
    decode_job,
    decode_runs,
    encode_job,
    encode_runs,
    progress_key,
    runs_key,
    runs_parts,
    trusted_anchor,
)
from tests.unit.kafka_stand_ins import StandInCluster, Transaction

LOG = names.batch_log_topic("us")

PROGRESS = Progress(
    batch_id=3,
    chunk=2,
    start=100,
    end=900,
    position=700,
    done=False,
    records=590,
    bytes=59_000,
    downstream_start=40,
    downstream_position=630,
    first_runs_offset=12,
)


@pytest.mark.proves("batch_log rule 3")
def test_progress_round_trips_and_reads_foreign_text_as_nothing():
    assert Progress.decode(PROGRESS.encode()) == PROGRESS
    assert Progress.decode(PROGRESS.encode().encode()) == PROGRESS
    for foreign in (None, "", "x", '{"b": 3}', "[1]", '"v"'):
        assert Progress.decode(foreign) is None
        assert decode_job(foreign) is None


def test_one_version_rule_a_record_of_another_version_or_shape_is_refused_never_read_as_nothing():
    """The one version rule (batch_log module docstring): progress, runs records and job markers alike."""
    for version in (1, 4, "2"):
        with pytest.raises(UnreadableRecord, match=f"a progress record is of format version {version!r}"):
            Progress.decode(json.dumps({"v": version, "b": 3}))
        with pytest.raises(UnreadableRecord, match="a job marker is of format version"):
            decode_job(json.dumps({"v": version, "job": "j"}))
        with pytest.raises(UnreadableRecord, match="a runs record is of format version"):
            decode_runs(json.dumps({"v": version, "runs": ""}).encode())
    with pytest.raises(UnreadableRecord, match="does not fit its format version"):
        Progress.decode(json.dumps({"v": LOG_FORMAT_VERSION, "b": 3}))
    with pytest.raises(UnreadableRecord, match="carries no format version"):
        decode_runs(b'{"runs": ""}')
    assert decode_job(encode_job("j")) == "j"


@pytest.mark.proves("batch_log rule 4")
def test_anchor_is_trusted_only_when_it_matches_its_offset():
    assert trusted_anchor(TopicPartition("t", 0, 630, metadata=PROGRESS.encode())) == PROGRESS
    assert trusted_anchor(TopicPartition("t", 0, 631, metadata=PROGRESS.encode())) is None
    assert trusted_anchor(TopicPartition("t", 0, 630, metadata="")) is None
    assert trusted_anchor(TopicPartition("t", 0, -1001)) is None


@pytest.mark.proves("batch_log rule 2")
def test_runs_split_into_bounded_records_that_round_trip():
    runs = [OffsetRun(i * 3, i * 3 + 2, 1000 + i * 2) for i in range(RUNS_PER_RECORD + 5)]
    parts = runs_parts(7, 4, runs)
    assert [len(p.runs) for p in parts] == [RUNS_PER_RECORD, 5]
    assert [p.part for p in parts] == [0, 1]
    for part in parts:
        value = encode_runs(part)
        assert len(value) < 4 * 1024 * 1024
        assert decode_runs(value) == part
    assert runs_parts(7, 4, []) == []


def test_holes_round_trip_and_a_run_with_more_than_a_record_holds_is_split_at_a_hole():
    holes = tuple(b for i in range(RUNS_PER_RECORD + 10) for b in (3 * i + 1, 3 * i + 2))
    whole = OffsetRun(0, 3 * (RUNS_PER_RECORD + 10), 500, holes=holes)
    parts = runs_parts(7, 4, [OffsetRun(-5, -3, 400), whole])
    assert len(parts) == 2
    for part in parts:
        assert decode_runs(encode_runs(part)) == part
    assert merge_runs([run for part in parts for run in part.runs]) == [OffsetRun(-5, -3, 400), whole]
    plain = encode_runs(runs_parts(7, 4, [OffsetRun(0, 2, 10)])[0])
    assert b'"holes"' not in plain and b'"v":2' in plain  # what an older reader reads; holes it refuses (version 3)
    assert b'"v":3' in encode_runs(parts[1])


def test_a_runs_record_carries_the_schema_ids_its_task_mapped_and_old_ones_read_without():
    carrying = replace(runs_parts(7, 4, [OffsetRun(0, 2, 10)])[0], schema_ids={12: 1012, 3: 1003})
    assert decode_runs(encode_runs(carrying)) == carrying
    plain = runs_parts(7, 4, [OffsetRun(0, 2, 10)])[0]
    assert b'"ids"' not in encode_runs(plain) and decode_runs(encode_runs(plain)).schema_ids == {}


def test_keys_never_collide_across_flows_topics_and_chunks():
    keys = {
        progress_key("us->dr", "dr-orders", 0),
        progress_key("us-dr->dr", "orders", 0),
        runs_key("a->b", "t", 1, 2, 3, 0),
        runs_key("a->b", "t", 12, 3, 0, 0),
        runs_key("a->b", "t-1", 2, 3, 0, 0),
    }
    assert len(keys) == 5


def test_the_log_reader_reads_keyed_records_to_a_watermark_and_an_open_transaction_holds_it(
    target: StandInCluster,
) -> None:
    """One reader for a scan and a stream's tail: records without a key are passed over, ends of partition and
    aborted offsets move it on, and a read that an open transaction holds below the watermark fails, saying where
    it stood (no read waits for ever)."""
    target.append(LOG, 0, None, b"keyless")
    target.append(LOG, 0, b"a", b"1")
    target.skip(LOG, 0)
    target.append(LOG, 0, b"b", b"2")
    with LogReader({}, LOG, 0) as reader:
        assert list(reader.read_to(4)) == [(b"a", b"1", 1), (b"b", b"2", 3)]
        target.append(LOG, 0, b"c", b"3", transaction=Transaction("a-zombie"))
        target.append(LOG, 0, b"d", b"4")
        with pytest.raises(ReplicationFailure, match="from offset 4 stayed at offset 4, below 6"):
            list(reader.read_to(6, stall=0.3))
