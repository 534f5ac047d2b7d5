"""One flow's health at a glance, from the metadata DB only: the rules the replication overview, ``/api/flows``
and ``airmirror status`` (without ``--flow``) share.

States (:class:`FlowState`), each a rule; a flow is in every state whose rule holds, and shown by the worst:

1. ``failing``: its newest failed run (:mod:`airmirror.replication.run_failures`) is newer than its newest
   committed batch.
2. ``stopped partitions``: some of its partitions are no longer copied: a stop that only ``airmirror reset`` ends
   (a deleted or recreated remote topic, a truncated partition), or a copied source topic the source cluster no
   longer holds (:mod:`airmirror.store.gone_topics`; :attr:`FlowHealth.gone_topics` says since when), which ends
   by itself if the topic is created again.
3. ``waiting for a leader``: its newest plan left some source partitions where they stand because they had no
   leader (:mod:`airmirror.store.leader_waits`; :attr:`FlowHealth.leader_waits` says since when); they go on by
   themselves once their leader is back.
4. ``not running``: no batch committed for :data:`NOT_RUNNING_AFTER` (or ever) and no run holds the flow now.
5. ``lagging``: its oldest record not yet copied is older than :data:`LAGGING_AFTER`, by the newest lag
   samples (taken after each commit).
6. ``healthy``: none of the above.

Worst first (:func:`worst_first`) orders by state, in the order above, then by the oldest record's age.

Heartbeats: replication latency needs heartbeats that travelled the flow, which flow ``target->source``
writes on the source cluster.  Without that reverse flow :attr:`FlowHealth.latency_note` says so and names the
newest heartbeat this flow wrote to its target, when it was acknowledged there.

Every read is bounded by the flow's partitions (one row each) and :data:`SPARKLINE_POINTS`, never by its history.
"""

from __future__ import annotations

import enum
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from airmirror import names
from airmirror.config import FlowConfig
from airmirror.model import (
    HeartbeatEmission,
    JsonObject,
    LeaderWait,
    PartitionKey,
    RunFailure,
    json_object,
    utc_text,
)
from airmirror.replication.status import SchemaFigures, schema_figures
from airmirror.store import MetadataStore

LAGGING_AFTER = timedelta(minutes=5)
NOT_RUNNING_AFTER = timedelta(hours=1)
SAMPLES_WINDOW = timedelta(hours=6)
"""How far back the newest lag sample of a partition is looked for, and the span of the sparkline."""
SPARKLINE_POINTS = 48


class FlowState(str, enum.Enum):
    """A flow's states, worst first (the module's rules)."""

    FAILING = "failing"
    STOPPED = "stopped partitions"
    WAITING = "waiting for a leader"
    NOT_RUNNING = "not running"
    LAGGING = "lagging"
    HEALTHY = "healthy"

    @property
    def rank(self) -> int:
        """0 for the worst state."""
        return list(FlowState).index(self)


@dataclass(frozen=True, kw_only=True)
class FlowHealth:
    """One flow's figures at a glance.  ``state`` is the worst of ``states``; ``lag_sparkline`` the total lag in
    records over :data:`SAMPLES_WINDOW`, oldest first."""

    flow: str
    dag_id: str
    state: FlowState
    states: list[FlowState]
    partitions: int
    lag_records: int
    oldest_record_age_ms: int | None
    replication_latency_ms: int | None
    latency_note: str | None
    last_success_at: datetime | None
    live_run_since: datetime | None
    last_failure: RunFailure | None
    gaps: int
    gap_records: int
    stopped_partitions: int
    leader_waits: list[LeaderWait] = field(default_factory=list)
    gone_topics: dict[str, datetime] = field(default_factory=dict)
    records_filtered: int = 0
    records_skipped: int = 0
    schemas: SchemaFigures = field(default_factory=SchemaFigures)
    lag_sparkline: list[int] = field(default_factory=list)

    def as_json(self) -> JsonObject:
        return json_object(self)


def flow_health(flow: FlowConfig, store: MetadataStore, now: datetime, *, reverse_enabled: bool) -> FlowHealth:
    """``flow``'s health by the module's rules; ``reverse_enabled`` says whether flow ``target->source`` runs."""
    stats = store.partition_stats(flow.name)
    since = now - SAMPLES_WINDOW
    samples = store.newest_lag_samples(flow.name, since)
    ages = [s.record_age_ms for s in samples if s.record_age_ms is not None]
    last_success = max((s.last_batch_at for s in stats.values()), default=None)
    failure = store.run_failure(flow.name)
    lease = store.flow_lease(flow.name)
    running = lease is not None and lease.expires_at > now
    latencies = store.heartbeat_latencies(flow.name)
    latency = max(latencies, key=lambda observed: observed.observed_at) if latencies else None
    gone = store.gone_topics(flow.name)
    stopped = stopped_partitions(store, flow, stats.keys(), gone)
    waits = store.leader_waits(flow.name)
    oldest_age = max(ages, default=None)
    states = [
        state
        for state, holds in (
            (FlowState.FAILING, failure is not None and (last_success is None or failure.failed_at > last_success)),
            (FlowState.STOPPED, stopped > 0),
            (FlowState.WAITING, bool(waits)),
            (FlowState.NOT_RUNNING, not running and (last_success is None or now - last_success > NOT_RUNNING_AFTER)),
            (FlowState.LAGGING, oldest_age is not None and oldest_age > LAGGING_AFTER / timedelta(milliseconds=1)),
        )
        if holds
    ] or [FlowState.HEALTHY]
    return FlowHealth(
        flow=flow.name,
        dag_id=names.dag_id(flow.source, flow.target),
        state=states[0],
        states=states,
        partitions=len(stats),
        lag_records=sum(s.lag_records for s in samples),
        oldest_record_age_ms=oldest_age,
        replication_latency_ms=None if latency is None else latency.latency_ms,
        latency_note=None
        if latency is not None
        else latency_note(flow, reverse_enabled, store.heartbeat_emission(flow.name)),
        last_success_at=last_success,
        live_run_since=lease.acquired_at if lease is not None and running else None,
        last_failure=failure,
        gaps=sum(s.gap_count for s in stats.values()),
        gap_records=sum(s.gap_offsets for s in stats.values()),
        stopped_partitions=stopped,
        leader_waits=waits,
        gone_topics=gone,
        records_filtered=sum(s.filtered for s in stats.values()),
        records_skipped=sum(s.skipped for s in stats.values()),
        schemas=schema_figures(flow, store),
        lag_sparkline=[point.lag_records for point in store.lag_series(flow.name, since, now, SPARKLINE_POINTS)],
    )


def stopped_partitions(
    store: MetadataStore, flow: FlowConfig, partitions: Iterable[PartitionKey], gone: Iterable[str]
) -> int:
    """How many of the flow's partitions (``partitions``: those with cursors) a stop covers, or belong to a ``gone``
    topic (a stop of a whole topic, or a gone topic, covers each partition it has; a partition counts once)."""
    per_topic = Counter(key.topic for key in partitions)
    stops = store.stops(flow.name)
    whole = {stop.topic for stop in stops if stop.partition is None} | set(gone)
    single = {(stop.topic, stop.partition) for stop in stops if stop.partition is not None and stop.topic not in whole}
    return len(single) + sum(max(1, per_topic[topic]) for topic in whole)


def gone_topic_reason(flow: FlowConfig, topic: str, since: datetime) -> str:
    """Why a gone topic's partitions are stopped (rule 2), as the replication view names it."""
    return (
        f"source topic {topic} is gone from cluster {flow.source} since {utc_text(since)}: its partitions are no "
        f"longer copied; {flow.remote_topic(topic)} keeps what was copied"
    )


def latency_note(flow: FlowConfig, reverse_enabled: bool, emitted: HeartbeatEmission | None) -> str:
    """Why the flow shows no replication latency, and its newest heartbeat (see the module docstring)."""
    reverse = f"{flow.target}->{flow.source}"
    why = (
        f"no heartbeat has travelled {flow.name} yet (flow {reverse} writes them on cluster {flow.source})"
        if reverse_enabled
        else f"latency is measured from heartbeats written on cluster {flow.source} by flow {reverse}, "
        "which is not enabled"
    )
    if emitted is None:
        return f"{why}; {flow.name} has written no heartbeat to cluster {flow.target} yet"
    at = utc_text(emitted.heartbeat_at)
    return (
        f"{why}; {flow.name} wrote its newest heartbeat to {emitted.topic} on cluster {flow.target}, acknowledged {at}"
    )


def worst_first(healths: list[FlowHealth]) -> list[FlowHealth]:
    """``healths`` by state (worst first), then by the oldest record's age (oldest first), then by name."""
    return sorted(healths, key=lambda h: (h.state.rank, -(h.oldest_record_age_ms or 0), h.flow))
