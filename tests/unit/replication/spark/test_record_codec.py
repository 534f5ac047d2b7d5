"""How the transforms read a JSON key or value: orjson's speed, the standard library's exact big integers."""

from __future__ import annotations

import pytest

from airmirror.replication.spark.record_codec import holds_float, read_json


@pytest.mark.parametrize(
    ("text", "read"),
    [
        (b'{"n":12345678901234567890123}', {"n": 12345678901234567890123}),
        (b'[1,[2,{"a":[-99999999999999999999]}]]', [1, [2, {"a": [-99999999999999999999]}]]),
        (b'{"x":1.5,"n":18446744073709551616}', {"x": 1.5, "n": 18446744073709551616}),
        (b"12345678901234567890123", 12345678901234567890123),
        (b'{"u64":18446744073709551615,"pi":3.14159}', {"u64": 18446744073709551615, "pi": 3.14159}),
        (
            b'{"note":"1234567890123456789012345","a":{"b":[true,null]}}',
            {"note": "1234567890123456789012345", "a": {"b": [True, None]}},
        ),
    ],
)
def test_json_is_read_with_every_integer_exact(text: bytes, read: object) -> None:
    assert read_json(text) == read
    assert repr(read_json(text)) == repr(read)


@pytest.mark.parametrize(
    ("read", "holds"),
    [({"a": 1, "b": "x"}, False), ({"a": {"b": [1, 2.0]}}, True), ([[[]], {}], False), (0.5, True), ("1.5", False)],
)
def test_a_float_is_found_at_any_depth(read: object, holds: bool) -> None:
    assert holds_float(read) is holds


def test_what_is_not_json_raises_value_error() -> None:
    with pytest.raises(ValueError):
        read_json(b"not json")
