"""The durability rule of the internal topics airmirror creates (creation itself: tests/integration)."""

from __future__ import annotations

import pytest

from airmirror.kafka.topics import durability_configs


@pytest.mark.parametrize(("factor", "min_insync"), [(1, "1"), (2, "1"), (3, "2"), (4, "2"), (5, "2")])
def test_min_insync_replicas_is_factor_minus_one_between_one_and_two(factor: int, min_insync: str) -> None:
    assert durability_configs(factor) == {"min.insync.replicas": min_insync}


def test_broker_default_factor_keeps_the_broker_default() -> None:
    assert durability_configs(-1) == {}
