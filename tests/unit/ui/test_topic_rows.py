"""A whole-cluster flow's page: one row per topic, worst first, expandable to its partitions, filtered, paged."""

from __future__ import annotations

import time
from datetime import UTC, datetime
from pathlib import Path

import pytest

from airmirror.config import load_config
from airmirror.model import LagSample, PartitionKey
from airmirror.store import MetadataStore
from airmirror.ui.flow_view import PartitionRow, flow_view
from airmirror.ui.page import flow_page
from airmirror.ui.topic_rows import TOPICS_PER_PAGE, topic_page, topic_rows


def partition(
    topic: str, number: int, lag: int = 0, age: int | None = None, stopped: str | None = None, filtered: int = 0
):
    return PartitionRow(
        topic=topic,
        partition=number,
        remote_topic=f"a.{topic}",
        records=0,
        bytes=0,
        cursor=None,
        lag_records=lag,
        record_age_ms=age,
        sampled_at=None,
        gap_count=0,
        gap_offsets=0,
        resets=0,
        stopped=stopped,
        filtered=filtered,
        skipped=filtered // 2,
    )


def test_topics_sum_their_partitions_and_come_worst_first():
    rows = topic_rows(
        [
            partition("quiet", 0),
            partition("behind", 0, lag=500, age=90_000, filtered=4),
            partition("behind", 1, lag=20, age=1_000, filtered=2),
            partition("stopped", 0, stopped="deleted"),
            partition("busy", 0, lag=9_000, age=2_000),
        ]
    )
    assert [r.topic for r in rows] == ["stopped", "behind", "busy", "quiet"]
    behind = rows[1]
    assert (len(behind.partitions), behind.lag_records, behind.oldest_record_age_ms) == (2, 520, 90_000)
    assert (behind.filtered, behind.skipped) == (6, 3)


def test_a_filter_keeps_matching_topics_pages_hold_fifty_and_a_bad_regex_is_named():
    partitions = [partition(f"t{i:03d}", p) for i in range(120) for p in range(2)]
    page = topic_page(partitions, None, 3)
    assert (page.number, page.pages, len(page.rows), page.total) == (3, 3, 120 - 2 * TOPICS_PER_PAGE, 120)
    assert topic_page(partitions, None, 99).number == 3
    assert [r.topic for r in topic_page(partitions, r"^t11\d$", 1).rows] == [f"t11{i}" for i in range(10)]
    with pytest.raises(ValueError, match=r"topic filter '\(' is not a regular expression"):
        topic_page(partitions, "(", 1)


def test_a_two_thousand_partition_flow_page_renders_its_topics_from_the_metadata_db(tmp_path: Path, capsys):
    config = tmp_path / "mm2.properties"
    config.write_text("clusters = a, b\na.bootstrap.servers = x:1\nb.bootstrap.servers = y:1\na->b.enabled = true\n")
    flow = load_config(config, env={}).flow("a->b")
    now = datetime.now(UTC)
    with MetadataStore.open(f"sqlite:///{tmp_path / 'metadata.db'}") as store:
        samples = [LagSample(f"topic-{t:03d}", p, now, t * p, t * 100, None) for t in range(200) for p in range(10)]
        store.record_lag_samples(flow.name, samples)
        store.stop_partition(flow.name, PartitionKey("topic-007", 3), "source partition topic-007-3 was deleted")
        started = time.perf_counter()
        page = flow_page(flow_view(flow, "airmirror__a__b", store, now=now))
        rendered = time.perf_counter() - started
        filtered = flow_page(flow_view(flow, "airmirror__a__b", store, now=now), topic="topic-00[0-9]", page=1)
    with capsys.disabled():
        print(f"\n2,000-partition flow page (200 topics): {rendered * 1000:.0f} ms from the metadata DB to HTML")

    assert page.count("<tr data-topic-row=") == TOPICS_PER_PAGE and "200 of 200 topics; page 1 of 4" in page
    assert page.index('data-topic-row="topic-007"') < page.index('data-topic-row="topic-199"')  # the stop first
    assert page.count("<details>") == TOPICS_PER_PAGE and 'data-topic="topic-199" data-partition="9"' in page
    assert '<a rel="next" href="?page=2">' in page
    assert "10 of 200 topics; page 1 of 1" in filtered and 'value="topic-00[0-9]"' in filtered
