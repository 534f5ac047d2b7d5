"""A flow's partitions as the flow page lists them: one row per topic, worst first, filtered and paged, so that a
whole-cluster flow (thousands of partitions) reads like the demo's.

Contract:

1. A topic's row sums its partitions' lag (records) and the records the flow's transforms filtered and
   ``errors.tolerance = all`` skipped, takes their oldest record age, counts their gaps and their stopped partitions,
   and holds the partitions themselves (shown when the row is expanded).
2. Worst first: more stopped partitions, then the older oldest record, then the larger lag, then the name.
3. ``topic`` (a regular expression, searched in the topic's name) keeps the matching topics; one that does not
   compile raises :class:`ValueError` naming it.
4. Pages hold :data:`TOPICS_PER_PAGE` topics; a page number past the last shows the last.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from airmirror.ui.flow_view import PartitionRow

TOPICS_PER_PAGE = 50


@dataclass(frozen=True, kw_only=True)
class TopicRow:
    topic: str
    remote_topic: str
    partitions: list[PartitionRow]
    lag_records: int
    oldest_record_age_ms: int | None
    gap_count: int
    stopped: int
    filtered: int = 0
    skipped: int = 0


@dataclass(frozen=True, kw_only=True)
class TopicPage:
    """Page ``number`` of ``pages`` of the topics that ``matching`` of ``total`` matched."""

    rows: list[TopicRow]
    number: int
    pages: int
    matching: int
    total: int


def topic_rows(partitions: Sequence[PartitionRow]) -> list[TopicRow]:
    """One row per topic (rule 1), worst first (rule 2)."""
    by_topic: dict[str, list[PartitionRow]] = {}
    for row in partitions:
        by_topic.setdefault(row.topic, []).append(row)
    rows = [
        TopicRow(
            topic=topic,
            remote_topic=members[0].remote_topic,
            partitions=sorted(members, key=lambda p: p.partition),
            lag_records=sum(p.lag_records or 0 for p in members),
            oldest_record_age_ms=max((p.record_age_ms for p in members if p.record_age_ms is not None), default=None),
            gap_count=sum(p.gap_count for p in members),
            stopped=sum(1 for p in members if p.stopped),
            filtered=sum(p.filtered for p in members),
            skipped=sum(p.skipped for p in members),
        )
        for topic, members in by_topic.items()
    ]
    return sorted(rows, key=lambda t: (-t.stopped, -(t.oldest_record_age_ms or 0), -t.lag_records, t.topic))


def topic_page(partitions: Sequence[PartitionRow], topic: str | None, number: int) -> TopicPage:
    """The topics matching ``topic`` (rule 3), page ``number`` (rule 4)."""
    rows = topic_rows(partitions)
    matching = rows
    if topic:
        try:
            pattern = re.compile(topic)
        except re.error as error:
            raise ValueError(f"topic filter {topic!r} is not a regular expression: {error}") from error
        matching = [row for row in rows if pattern.search(row.topic)]
    pages = max(1, -(-len(matching) // TOPICS_PER_PAGE))
    number = min(max(1, number), pages)
    shown = matching[(number - 1) * TOPICS_PER_PAGE : number * TOPICS_PER_PAGE]
    return TopicPage(rows=shown, number=number, pages=pages, matching=len(matching), total=len(rows))
