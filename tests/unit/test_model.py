"""Model values: what an empty planned range committed."""

from __future__ import annotations

import pytest

from airmirror.model import PartitionKey, PlannedRange, RangeResult


def test_an_empty_range_copied_nothing_and_keeps_its_start_epoch() -> None:
    planned = PlannedRange(topic="orders", partition=2, start=40, end=40, remote_topic="us.orders", start_epoch=7)
    assert planned.empty_result() == RangeResult(
        topic="orders", partition=2, start=40, end=40, records=0, bytes=0, end_epoch=7
    )


def test_a_range_with_records_has_no_empty_result() -> None:
    planned = PlannedRange(topic="orders", partition=2, start=40, end=41, remote_topic="us.orders")
    with pytest.raises(ValueError, match=str(PartitionKey("orders", 2))):
        planned.empty_result()
