"""Asset events of a flow's runs: downstream DAGs can be scheduled on replicated data.

Contract: a run that copies records emits, through the flow's asset alias (:func:`alias_name`), one asset
event per remote topic it wrote, on ``kafka://{host:port}/{remote topic}`` (the scheme of Airflow's Kafka
provider; ``host:port`` is the target's first bootstrap server), whose extra (:class:`CopiedEvent`) holds the
run's last batch id and the records it copied into that topic.  A run that copies nothing emits none.

What a run copied travels between its tasks (XCom, :class:`~airmirror.dag_factory.xcoms.RunRecorded`) as a
:data:`Copied` map: per remote-topic URI, the URI of its source topic (``kafka://{source host:port}/{topic}``)
and the records copied, which is also what the run's lineage reports (:mod:`airmirror.dag_factory.lineage`).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace
from typing import Any

from airflow.sdk import Asset, AssetAlias

from airmirror import names
from airmirror.config import FlowConfig
from airmirror.model import RangeResult, TopicCopied, json_object


def alias_name(flow: FlowConfig) -> str:
    """The flow's asset alias: its DAG id with ``__remote_topics``."""
    return f"{names.dag_id(flow.source, flow.target)}__remote_topics"


def topic_uri(bootstrap_servers: str, topic: str) -> str:
    """``kafka://{first server}/{topic}``, the Kafka provider's asset URI."""
    return f"kafka://{bootstrap_servers.split(',')[0].strip()}/{topic}"


@dataclass(frozen=True, kw_only=True)
class TopicCopy:
    """The records a run copied into one remote topic, and the URI of their source topic."""

    source: str
    records: int


Copied = dict[str, TopicCopy]
"""Remote-topic URI -> what the run copied into it."""


@dataclass(frozen=True, kw_only=True)
class CopiedEvent:
    """The extra of an asset event (what downstream DAGs read): the run's last batch and the records it copied
    into the event's remote topic."""

    batch_id: int | None
    records: int


def copied_by_uri(flow: FlowConfig, results: Iterable[RangeResult | TopicCopied]) -> Copied:
    """What ``results`` copied, per remote topic (topics that received no record are left out)."""
    source = flow.source_client("consumer")["bootstrap.servers"]
    target = flow.target_client("producer")["bootstrap.servers"]
    return merge_copied(
        {topic_uri(target, flow.remote_topic(r.topic)): TopicCopy(source=topic_uri(source, r.topic), records=r.records)}
        for r in results
        if r.records
    )


def merge_copied(parts: Iterable[Copied]) -> Copied:
    """One map of ``parts``, the records of a remote topic summed."""
    merged: Copied = {}
    for part in parts:
        for uri, copied in part.items():
            earlier = merged.get(uri)
            merged[uri] = copied if earlier is None else replace(earlier, records=earlier.records + copied.records)
    return merged


def emit_asset_events(outlet_events: Any, alias: str, copied: Copied, batch_id: int | None) -> None:
    """One event per remote topic with records (see the module contract)."""
    for uri, topic in sorted(copied.items()):
        if topic.records:
            extra = json_object(CopiedEvent(batch_id=batch_id, records=topic.records))
            outlet_events[AssetAlias(alias)].add(Asset(uri), extra=extra)
