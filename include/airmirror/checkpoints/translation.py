"""Exact offset translation: where a consumer group of the flow's source resumes on the flow's target.

Where the partition's runs are exact (always its newest 16, see :mod:`airmirror.store.retention`), a consumer
resuming at the translated position reads exactly the records it had not consumed on the source: no duplicate,
no gap.  Inside a *folded* run (older runs that retention merged to keep their count bounded) the position is
at or before the exact one, never past it (MM2's rule: the group may re-read records, it never skips any).  It
re-reads at most as many records as the run has offsets holding no copy (``length - records`` upstream,
``downstream_length - records`` downstream): the commit markers, about one per folded transaction, plus aborted
records and compaction holes (see :meth:`~airmirror.model.OffsetRun.downstream_at_most` and
:meth:`~airmirror.model.OffsetRun.upstream_at_most`).  Translation reads the metadata store only (offset-sync
runs and cursors, see :class:`~airmirror.model.OffsetRun`) plus the log start offsets of the target partitions.

**Forward** (a topic the flow replicates; runs of this flow map upstream -> downstream).  For a committed
upstream offset ``u`` of source partition ``P`` with cursor ``c`` (every offset below ``c`` was copied or holds
no readable record: aborted, transaction marker, compacted away, lost to retention):

1. ``u > c``, or ``P`` has no cursor yet: **not yet** (``None``).  Never a position past replicated data.
2. a run contains ``u``: the downstream offset of its first copy at or after ``u`` (``u``'s own, unless ``u`` lies
   in one of the run's holes: a record a transform dropped, a compaction hole, a marker); at or before it in a
   folded run;
3. else the first run after ``u`` (``u`` points into a dropped or compacted record, an aborted transaction, a marker
   or a retention gap): that run's ``downstream_start``, the first replicated record at or after ``u``;
4. else (``u <= c`` and nothing was copied at or after ``u``): just after the last copied record of ``P`` (the
   last run's ``downstream_stop``; a folded run cut by a truncation may stop past copies of records the source
   no longer holds, never past a copy of one it holds), or, if ``P`` never copied a record, the target
   partition's log start offset.

Taken over from MM2 (``airmirror takeover``): below ``exact_from``, where the exact runs of ``P`` begin (the
takeover's walk of MM2's tail starts at MM2's last offset sync; without a walk, because MM2 wrote no sync or
retention deleted its record, at the takeover's cursor), MM2 copied the records and only its imported syncs say
where.  There ``u`` translates as MM2 translates it: with the newest imported sync ``s`` at or before ``u``,
``s.downstream`` if ``u`` is ``s.upstream``, else ``s.downstream + 1`` (never past the exact position, possibly
before it: the group re-reads records, it never skips any); with no sync at or before ``u``, no translation
(``None``), as MM2 gives none and writes no checkpoint: never the first run's downstream offset, which lies past
MM2's copies of the records from ``u`` on.  Rules 2-4 apply from ``exact_from`` on.

**Failback** (a topic that originated on the target, e.g. ``b.orders`` on ``a`` in flow ``a->b``: a cycle the
flow never copies).  As MM2 does, the checkpoint names the upstream topic on the target (``orders``).  The runs
of the reverse flow (``b->a``, same metadata database) map ``orders`` (upstream) to ``b.orders`` (downstream),
so the group's committed offset ``d`` of ``b.orders`` is translated backwards:

1. a reverse run contains ``d``: its upstream offset for ``d`` (at or before it in a folded run);
2. else the first reverse run after ``d`` (``d`` points at markers between copies): its ``upstream_start``;
3. else (``d`` is at or past the last copied record): the reverse flow's cursor, unless that flow has an
   unfinished batch for the partition (its records may be visible on ``a`` already) or no cursor: not yet.

Deliberate difference from MM2: a multi-hop topic (``b.c.orders`` on ``a``) maps to its upstream name on the
target (``c.orders``, where the reverse flow copied it from), not to MM2's ``originalTopic`` (``orders``).

Every position is raised to the target partition's log start offset: records below it are gone there, and a
committed offset below the log start would make a consumer reset by ``auto.offset.reset``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from functools import cached_property

from confluent_kafka.admin import OffsetSpec

from airmirror.config import FlowConfig
from airmirror.config.routes import Route, route, routed_back
from airmirror.kafka.clients import target_admin
from airmirror.kafka.offsets import list_offsets
from airmirror.mm2.wire_formats import OffsetSync
from airmirror.model import OffsetRun, PartitionKey
from airmirror.store import MetadataStore


def forward_position(
    upstream_offset: int,
    cursor: int | None,
    covering: OffsetRun | None,
    last: OffsetRun | None,
    target_start: int,
    mm2_sync: OffsetSync | None = None,
    exact_from: int | None = None,
) -> int | None:
    """Forward rules 1-4, and MM2's rule below ``exact_from``.  ``covering``: the run containing or following
    ``upstream_offset``; ``last``: the partition's last run (only used when ``covering`` is ``None``);
    ``mm2_sync``: the newest imported MM2 sync at or before it; ``exact_from``: where the partition's exact runs
    begin after a takeover from MM2 (``None`` when it was not taken over)."""
    if cursor is None or upstream_offset > cursor:
        return None
    if exact_from is not None and upstream_offset < exact_from:
        if mm2_sync is None:
            return None
        position = mm2_sync.downstream_offset + (0 if upstream_offset == mm2_sync.upstream_offset else 1)
    elif covering is not None:
        position = covering.downstream_at_most(upstream_offset)
    elif last is not None:
        position = last.downstream_stop
    else:
        position = target_start
    return max(position, target_start)


def never_translates(
    upstream_offset: int, cursor: int | None, mm2_sync: OffsetSync | None, exact_from: int | None
) -> bool:
    """Whether :func:`forward_position` gives ``None`` for good: ``upstream_offset`` is replicated (at or below
    ``cursor``) but lies in MM2's part of a taken-over partition (below ``exact_from``) with no imported MM2 sync at
    or before it.  No later run adds syncs there, so it never translates (MM2 gives none either)."""
    return (
        cursor is not None
        and upstream_offset <= cursor
        and exact_from is not None
        and upstream_offset < exact_from
        and mm2_sync is None
    )


def failback_position(
    downstream_offset: int, cursor: int | None, covering: OffsetRun | None, in_flight: bool, target_start: int
) -> int | None:
    """Failback rules 1-3.  ``covering``: the reverse flow's run containing or following ``downstream_offset``
    in downstream offsets; ``in_flight``: the reverse flow has an unfinished batch for the partition."""
    if covering is not None:
        position = covering.upstream_at_most(downstream_offset)
    elif cursor is None or in_flight:
        return None
    else:
        position = cursor
    return max(position, target_start)


@dataclass(frozen=True)
class TranslatedOffset:
    """Committed ``upstream_offset`` of ``route.topic``-``partition``; ``downstream_offset`` is the position
    in ``route.target_topic``-``partition`` on the target, ``None`` when not translatable.  ``never`` says why
    not: ``True`` when the offset lies in MM2's part of a taken-over partition below MM2's oldest imported sync,
    which no later run changes (MM2 gives no translation there either); ``False`` when it is not yet replicated."""

    route: Route
    partition: int
    upstream_offset: int
    downstream_offset: int | None
    never: bool = False


class Translator:
    """Translates committed offsets of one flow (read-only: the metadata store and the target's log starts)."""

    def __init__(self, flow: FlowConfig, store: MetadataStore) -> None:
        self._flow = flow
        self._store = store

    @cached_property
    def routed_back(self) -> dict[str, str]:
        """The topics of the flow's source that the reverse flow's routers named (:func:`routed_back` of the topics
        the reverse flow has cursors for)."""
        reverse = self._flow.reverse_flow()
        if reverse is None:
            return {}
        return routed_back(reverse, {key.topic for key in self._store.cursors(reverse.name)})

    def translate(self, offsets: Mapping[PartitionKey, int]) -> dict[PartitionKey, TranslatedOffset]:
        """Translate every committed offset whose topic has a :func:`route`; other partitions are left out."""
        routes = {
            key: found for key in offsets if (found := route(self._flow, key.topic, self.routed_back)) is not None
        }
        flows = {r.runs_flow for r in routes.values()}
        in_flight = {name: self._unfinished(name) for name in flows if name != self._flow.name}
        cursors = {name: self._store.cursors(name) for name in flows}
        known = [
            PartitionKey(r.target_topic, key.partition)
            for key, r in routes.items()
            if PartitionKey(r.runs_topic, key.partition) in cursors[r.runs_flow]
        ]
        starts = list_offsets(target_admin(self._flow), set(known), OffsetSpec.earliest())
        translations = {}
        for key, r in routes.items():
            runs_key = PartitionKey(r.runs_topic, key.partition)
            cursor = cursors[r.runs_flow].get(runs_key)
            position, never = None, False
            if cursor is not None:
                start = starts[PartitionKey(r.target_topic, key.partition)]
                if r.failback:
                    position = self._failback(
                        r.runs_flow, runs_key, offsets[key], cursor, start, in_flight[r.runs_flow]
                    )
                else:
                    position, never = self._forward(runs_key, offsets[key], cursor, start)
            translations[key] = TranslatedOffset(r, key.partition, offsets[key], position, never)
        return translations

    def _forward(
        self, key: PartitionKey, upstream_offset: int, cursor: int, target_start: int
    ) -> tuple[int | None, bool]:
        """The forward position, and whether the offset can never translate (see :class:`TranslatedOffset`)."""
        if upstream_offset > cursor:
            return None, False
        covering = self._store.find_offset_run(self._flow.name, key, upstream_offset)
        last = None if covering is not None else self._store.last_offset_run(self._flow.name, key)
        mm2_sync, exact_from = self._store.mm2_sync_before(self._flow.name, key, upstream_offset)
        position = forward_position(upstream_offset, cursor, covering, last, target_start, mm2_sync, exact_from)
        return position, never_translates(upstream_offset, cursor, mm2_sync, exact_from)

    def _failback(
        self,
        flow_name: str,
        key: PartitionKey,
        offset: int,
        cursor: int,
        target_start: int,
        in_flight: set[PartitionKey],
    ) -> int | None:
        covering = self._store.find_offset_run_downstream(flow_name, key, offset)
        return failback_position(offset, cursor, covering, key in in_flight, target_start)

    def _unfinished(self, flow_name: str) -> set[PartitionKey]:
        """Partitions of ``flow_name``'s unfinished batch.  Read BEFORE its cursors and runs: a batch that
        commits in between is then either seen as unfinished or fully present in the runs."""
        batch = self._store.unfinished_batch(flow_name)
        return set() if batch is None else {r.key for r in batch.ranges}
