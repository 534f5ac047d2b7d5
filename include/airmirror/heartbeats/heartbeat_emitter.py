"""Heartbeats: emitting them in MM2's format, and measuring replication latency from copied ones.

Emitting (the DAG's heartbeat task and ``airmirror heartbeat`` call :func:`emit_heartbeat`): one record
``Heartbeat(source, target, now)`` is written to the policy's heartbeats topic (``heartbeats``) partition 0 on the
flow's TARGET, as MM2's heartbeat connector does; the topic is created if missing (one partition, compacted, see
:func:`airmirror.kafka.topics.ensure_internal_topic`).  Once the target acknowledged it, the emission is stored in the
metadata DB (``airmirror status`` shows it).  With ``emit.heartbeats.enabled = false`` or a negative
``emit.heartbeats.interval.seconds`` (MM2 then runs no heartbeat task) nothing is written and the report says which key
turned heartbeats off.

Replication: heartbeats topics of the source (``heartbeats``, ``c.heartbeats``...) are replicated like any
topic, whatever ``topics`` says (MM2's rule in :func:`airmirror.mm2.policy.should_replicate_topic`), to
``{source}.heartbeats`` and so on.  Note that every flow out of a cluster then copies that cluster's
``heartbeats`` topic.

Latency (called by :func:`airmirror.replication.pipeline.record_batch` after the batch commit): for each copied range
of a heartbeats topic, the newest copied record (target offset ``downstream_end - 1``) is read back and
decoded; latency = commit time - heartbeat timestamp, stored per (flow, heartbeat source alias, heartbeat
target alias).  Observing never fails a batch: problems are logged as warnings.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

from airmirror.config import FlowConfig
from airmirror.kafka.clients import target_admin
from airmirror.kafka.records import OutgoingRecord, read_record_at, write_records
from airmirror.kafka.topics import COMPACTED, ensure_internal_topic
from airmirror.mm2.wire_formats import Heartbeat
from airmirror.model import HeartbeatEmission, HeartbeatLatency, PartitionKey, PlannedRange, RangeResult
from airmirror.store import MetadataStore

log = logging.getLogger(__name__)

REPLICATION_FACTOR_KEY = "heartbeats.topic.replication.factor"


@dataclass(frozen=True)
class HeartbeatReport:
    """What :func:`emit_heartbeat` did: ``heartbeat`` is ``None`` when heartbeats are off, and ``off_by`` then
    says why (:attr:`~airmirror.config.flow_settings.HeartbeatSettings.off_by`)."""

    flow: str
    topic: str
    heartbeat: Heartbeat | None
    off_by: str | None = None


def emit_heartbeat(flow: FlowConfig, store: MetadataStore) -> HeartbeatReport:
    """Write one heartbeat of ``flow`` to its target (see the module docstring)."""
    topic = flow.policy.heartbeats_topic()
    if flow.heartbeats.off_by is not None:
        log.info("%s for %s: no heartbeat written", flow.heartbeats.off_by, flow.name)
        return HeartbeatReport(flow.name, topic, None, flow.heartbeats.off_by)
    ensure_internal_topic(flow, target_admin(flow), topic, COMPACTED, REPLICATION_FACTOR_KEY)
    heartbeat = Heartbeat(flow.source, flow.target, _now_ms())
    write_records(flow, topic, [OutgoingRecord(heartbeat.key(), heartbeat.value(), heartbeat.timestamp)])
    store.record_heartbeat_emitted(flow.name, HeartbeatEmission(topic, _datetime(heartbeat.timestamp)))
    log.info("%s: heartbeat %d written to %s on %s", flow.name, heartbeat.timestamp, topic, flow.target)
    return HeartbeatReport(flow.name, topic, heartbeat)


def observe_heartbeats(
    flow: FlowConfig, store: MetadataStore, ranges: Sequence[PlannedRange], results: Sequence[RangeResult]
) -> list[HeartbeatLatency]:
    """Store the latency of the newest heartbeat of every copied heartbeats range; never raises."""
    observed_at = datetime.now(UTC)
    remote = {r.key: r.remote_topic for r in ranges}
    latencies = []
    for result in results:
        if not flow.policy.is_heartbeats_topic(result.topic) or not result.records or result.downstream_end is None:
            continue
        topic, offset = remote[PartitionKey(result.topic, result.partition)], result.downstream_end - 1
        try:
            heartbeat = _read_heartbeat(flow, topic, result.partition, offset)
            latency = HeartbeatLatency(
                heartbeat.source_alias,
                heartbeat.target_alias,
                _datetime(heartbeat.timestamp),
                observed_at,
                int(observed_at.timestamp() * 1000) - heartbeat.timestamp,
            )
            store.record_heartbeat_latency(flow.name, latency)
        except Exception as error:
            log.warning("%s: no heartbeat latency from %s-%d@%d: %s", flow.name, topic, result.partition, offset, error)
            continue
        log.info(
            "%s: heartbeat %s->%s latency %d ms",
            flow.name,
            latency.source_alias,
            latency.target_alias,
            latency.latency_ms,
        )
        latencies.append(latency)
    return latencies


def _read_heartbeat(flow: FlowConfig, topic: str, partition: int, offset: int) -> Heartbeat:
    message = read_record_at(flow.target_client("consumer"), topic, partition, offset)
    return Heartbeat.decode(message.key() or b"", message.value() or b"")


def _now_ms() -> int:
    return int(datetime.now(UTC).timestamp() * 1000)


def _datetime(epoch_ms: int) -> datetime:
    return datetime.fromtimestamp(epoch_ms / 1000, UTC)
