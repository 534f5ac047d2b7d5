"""What crosses between a flow DAG's tasks: each XCom value turns into JSON and back unchanged, and a value read
back with a key missing, unknown or of the wrong type fails, naming where, never showing the value."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest

from airmirror.dag_factory.assets import CopiedEvent, TopicCopy
from airmirror.dag_factory.xcoms import BatchCopied, LiveCopied, PlannedRun, RunRecorded
from airmirror.kafka.topics import TopicMapping
from airmirror.model import (
    JsonShapeError,
    PartitionVerification,
    RangeCopied,
    Verdict,
    Verification,
    from_json,
    json_object,
    to_json,
)

RECORDED = RunRecorded(
    batch_id=7,
    records=12,
    bytes=3400,
    copied={"kafka://b:9092/a.orders": TopicCopy(source="kafka://a:9092/orders", records=12)},
)


def through_xcom(value: object) -> object:
    """What a reading task gets: the JSON text Airflow stores, parsed."""
    return json.loads(json.dumps(to_json(value)))


@pytest.mark.parametrize(
    "value",
    [
        PlannedRun(batch_id=3, partitions=2, offsets=40, resumed=False, first_batch=3),
        PlannedRun(batch_id=None, partitions=0, offsets=0, resumed=False, first_batch=1),
        BatchCopied(batch_id=None, records=0),
        LiveCopied(batches=4, records=100, bytes=2048),
        RECORDED,
        RangeCopied(topic="orders", partition=1, records=5, bytes=50),
    ],
)
def test_every_xcom_value_comes_back_as_it_went(value: object) -> None:
    assert from_json(type(value), through_xcom(value)) == value


def test_the_topic_sync_list_comes_back_as_mappings() -> None:
    mappings = [TopicMapping("orders", "a.orders", 3), TopicMapping("pay", "a.pay", 1)]
    assert through_xcom(mappings) == [
        {"source_topic": "orders", "remote_topic": "a.orders", "partitions": 3},
        {"source_topic": "pay", "remote_topic": "a.pay", "partitions": 1},
    ]
    assert from_json(list[TopicMapping], through_xcom(mappings)) == mappings


def test_record_batch_keeps_its_xcom_shape() -> None:
    assert json_object(RECORDED) == {
        "batch_id": 7,
        "records": 12,
        "bytes": 3400,
        "copied": {"kafka://b:9092/a.orders": {"source": "kafka://a:9092/orders", "records": 12}},
    }


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"batch_id": 1, "records": 2, "bytes": 3, "copied": {}, "first_batch": 1}, r"unknown \['first_batch'\]"),
        ({"batch_id": 1, "records": 2, "copied": {}}, r"missing \['bytes'\]"),
        (
            {"batch_id": 1, "records": "2", "bytes": 3, "copied": {}},
            r"RunRecorded\.records: expected int, got a string",
        ),
        ({"batch_id": 1, "records": True, "bytes": 3, "copied": {}}, r"records: expected int, got a boolean"),
        ({"batch_id": 1.5, "records": 2, "bytes": 3, "copied": {}}, r"batch_id: expected int \| None, got a number"),
        (
            {"batch_id": 1, "records": 2, "bytes": 3, "copied": {"kafka://b/t": {"source": 9, "records": 2}}},
            r"copied\['kafka://b/t'\]\.source: expected str, got a number",
        ),
        ([], "RunRecorded: expected RunRecorded, got an array"),
        (None, "expected RunRecorded, got null"),
    ],
)
def test_a_value_read_back_wrong_fails_naming_where(data: object, message: str) -> None:
    with pytest.raises(JsonShapeError, match=message):
        from_json(RunRecorded, data)


def test_an_error_never_shows_the_value_read() -> None:
    with pytest.raises(JsonShapeError) as raised:
        from_json(PlannedRun, {"batch_id": "s3cr3t", "partitions": 1, "offsets": 1, "resumed": False, "first_batch": 1})
    assert "s3cr3t" not in str(raised.value)


def test_enums_and_times_cross_as_values_and_iso_text() -> None:
    partition = PartitionVerification(
        verdict=Verdict.MISSING,
        first_offset=4,
        source_records=5,
        target_records=4,
        missing=1,
        topic="orders",
        partition=0,
        remote_topic="a.orders",
        source_start=0,
        source_end=5,
        target_start=0,
        target_end=4,
        reason="source offset 4 has no copy",
    )
    assert through_xcom(partition)["verdict"] == "missing"  # type: ignore[index]
    assert from_json(PartitionVerification, through_xcom(partition)) == partition
    with pytest.raises(JsonShapeError, match="verdict: expected Verdict"):
        from_json(PartitionVerification, {**json_object(partition), "verdict": "lost"})

    verified_at = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
    document = Verification("a->b", verified_at, None, [partition], id=9).as_dict()
    assert document["verified_at"] == "2026-01-02T03:04:05+00:00"
    assert document["equal"] is False
    assert document["verdicts"]["missing"] == 1  # type: ignore[index,call-overload]
    assert document["partitions"] == [json_object(partition)]


def test_what_has_no_json_form_is_refused_when_written() -> None:
    with pytest.raises(TypeError, match="a set has no JSON form"):
        to_json({"topics": {"orders"}})


def test_an_asset_event_extra_names_the_batch_and_the_records() -> None:
    assert json_object(CopiedEvent(batch_id=7, records=12)) == {"batch_id": 7, "records": 12}
