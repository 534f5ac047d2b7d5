"""Batch-log record and anchor encodings round-trip exactly."""

from __future__ import annotations

from airmirror.model import OffsetRun, RangeResult
from airmirror.replication.batch_log import Anchor, anchor_group, batch_log_topic, decode_result, encode_result


def test_result_round_trips_with_many_runs():
    runs = tuple(OffsetRun(i * 3, i * 3 + 2, 1000 + i * 3) for i in range(5000))
    result = RangeResult("orders", 4, 0, 15000, 10000, 123456, runs, 1000, 16000)
    value = encode_result("a->b", 17, result)
    assert len(value) < 200_000
    assert decode_result(value) == ("a->b", 17, result)


def test_anchor_metadata_round_trips():
    anchor = Anchor(batch_id=3, upstream_end=900, downstream_position=950, log_offset=12)
    assert Anchor.parse(950, anchor.metadata()) == anchor
    assert Anchor.parse(-1001, None) is None


def test_internal_names_are_internal_by_mm2_rules():
    assert batch_log_topic("a").endswith(".internal")
    assert anchor_group("a", "b") == "airmirror-eos-a-b"
