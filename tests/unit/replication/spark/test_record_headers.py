"""Headers survive the trip from consumed records to the Arrow batch and back to the producer's form."""

from __future__ import annotations

import pytest

from airmirror.replication.spark.partition_writer import header_lists
from airmirror.replication.spark.range_reader import headers_array
from airmirror.replication.spark.record_schema import HEADER_ARROW_TYPE

CASES = [
    pytest.param([None, None, None], id="no-headers"),
    pytest.param([None, [("a", b"1"), ("b", None)], None, [("c", b"")]], id="mixed-with-null-values"),
    pytest.param([[("dup", b"1"), ("dup", b"2"), ("dup", None)]], id="duplicate-names-keep-order"),
    pytest.param([[("k", b"\x00\xff")], [], None], id="binary-and-empty"),
]


@pytest.mark.parametrize("headers", CASES)
def test_headers_round_trip(headers: list) -> None:
    column = headers_array(headers)
    assert column.type == HEADER_ARROW_TYPE
    assert header_lists(column) == headers


def test_sliced_column_keeps_its_own_records() -> None:
    headers = [[("a", b"1")], None, [("b", b"2"), ("c", None)], [("d", b"4")]]
    assert header_lists(headers_array(headers).slice(1, 2)) == [None, [("b", b"2"), ("c", None)]]
