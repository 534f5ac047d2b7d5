"""Which offset syncs a batch's exact runs give MM2's offset-syncs topic, and where that topic is."""

from __future__ import annotations

from collections.abc import Iterable
from itertools import islice
from pathlib import Path

import pytest

from airmirror.config import load_config
from airmirror.mm2.wire_formats import OffsetSync
from airmirror.model import OffsetRun
from airmirror.replication.offset_syncs_topic import offset_syncs


def pairs(syncs: Iterable[OffsetSync]) -> list[tuple[int, int]]:
    return [(s.upstream_offset, s.downstream_offset) for s in syncs]


def test_a_run_gives_its_first_record_every_lag_max_th_and_its_last() -> None:
    syncs = list(offset_syncs("orders", 3, [OffsetRun(1000, 1250, 40)], lag_max=100))
    assert pairs(syncs) == [(1000, 40), (1100, 140), (1200, 240), (1249, 289)]
    assert {(s.topic, s.partition) for s in syncs} == {("orders", 3)}


def test_gaps_between_runs_start_no_sync_so_dropped_records_add_none() -> None:
    runs = [OffsetRun(0, 10, 0), OffsetRun(12, 13, 10), OffsetRun(20, 25, 11)]  # markers at 10-11, a hole at 13-19
    assert pairs(offset_syncs("t", 0, runs, lag_max=100)) == [(0, 0), (24, 15)]
    assert pairs(offset_syncs("t", 0, runs, lag_max=5)) == [(0, 0), (5, 5), (12, 10), (24, 15)]
    every_tenth_dropped = [OffsetRun(10 * i + 1, 10 * i + 10, 9 * i) for i in range(1000)]  # 9,000 copied records
    syncs = pairs(offset_syncs("t", 0, every_tenth_dropped, lag_max=100))
    assert [downstream for _, downstream in syncs] == [*range(0, 9000, 100), 8999]
    assert syncs[-1] == (9999, 8999)


def test_holes_of_a_run_start_no_sync_and_each_sync_names_a_copied_record() -> None:
    every_tenth_dropped = OffsetRun(0, 9999, 0, holes=tuple(b for i in range(999) for b in (10 * i + 9, 10 * i + 10)))
    syncs = pairs(offset_syncs("t", 0, [every_tenth_dropped], lag_max=100))
    assert [downstream for _, downstream in syncs] == [*range(0, 9000, 100), 8999]
    assert all(upstream % 10 != 9 and upstream - upstream // 10 == downstream for upstream, downstream in syncs)
    assert syncs[-1] == (9998, 8999)


def test_mm2s_translation_of_the_syncs_is_never_past_exact_nor_more_than_lag_max_behind() -> None:
    runs = [OffsetRun(0, 7, 0), OffsetRun(9, 30, 7), OffsetRun(31, 40, 28)]  # drops at 7, 8 and 30
    kept = [u for run in runs for u in range(run.upstream_start, run.upstream_end)]
    syncs = pairs(offset_syncs("t", 0, runs, lag_max=10))
    for u in range(41):
        exact = next((i for i, offset in enumerate(kept) if offset >= u), len(kept))
        upstream, downstream = max((s for s in syncs if s[0] <= u), default=(None, 0))
        mm2 = downstream if upstream == u else downstream + 1  # OffsetSyncStore.translateDownstream
        assert exact - 10 < mm2 <= exact, u


def test_lag_max_zero_syncs_every_record() -> None:
    assert pairs(offset_syncs("t", 0, [OffsetRun(5, 8, 0)], lag_max=0)) == [(5, 0), (6, 1), (7, 2)]


@pytest.mark.parametrize(
    ("location", "place"),
    [
        ("", ("us", "mm2-offset-syncs.dr.internal")),
        ("source", ("us", "mm2-offset-syncs.dr.internal")),
        ("target", ("dr", "mm2-offset-syncs.us.internal")),
    ],
)
def test_the_topic_is_where_offset_syncs_topic_location_puts_it(tmp_path: Path, location: str, place: tuple) -> None:
    path = tmp_path / "mm2.properties"
    setting = f"offset-syncs.topic.location = {location}\n" if location else ""
    path.write_text(
        "clusters = us, dr\nus.bootstrap.servers = h:1\ndr.bootstrap.servers = h:2\nus->dr.enabled = true\n" + setting
    )
    assert load_config(path, env={}).flow("us->dr").offset_syncs_place() == place


def test_syncs_are_made_one_at_a_time_so_a_long_run_holds_none_in_memory() -> None:
    syncs = offset_syncs("t", 0, [OffsetRun(0, 10**15, 7)], lag_max=100)
    assert pairs(islice(syncs, 3)) == [(0, 7), (100, 107), (200, 207)]
