"""Asset events of a flow's runs: downstream DAGs can be scheduled on replicated data.

Contract: a run that copies records emits, through the flow's asset alias (:func:`alias_name`), one asset
event per remote topic it wrote, on ``kafka://{host:port}/{remote topic}`` (the scheme of Airflow's Kafka
provider; ``host:port`` is the target's first bootstrap server), whose extra holds the run's last batch id and
the records it copied into that topic.  A run that copies nothing emits none.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from airflow.sdk import Asset, AssetAlias

from airmirror import names
from airmirror.config import FlowConfig
from airmirror.model import RangeResult


def alias_name(flow: FlowConfig) -> str:
    """The flow's asset alias: its DAG id with ``__remote_topics``."""
    return f"{names.dag_id(flow.source, flow.target)}__remote_topics"


def topic_uri(bootstrap_servers: str, topic: str) -> str:
    """``kafka://{first server}/{topic}``, the Kafka provider's asset URI."""
    return f"kafka://{bootstrap_servers.split(',')[0].strip()}/{topic}"


def copied_by_uri(flow: FlowConfig, results: Iterable[RangeResult]) -> dict[str, int]:
    """Records copied per remote-topic asset URI (topics that received none are left out)."""
    bootstrap = flow.target_client("producer")["bootstrap.servers"]
    copied: dict[str, int] = {}
    for result in results:
        if result.records:
            uri = topic_uri(bootstrap, flow.remote_topic(result.topic))
            copied[uri] = copied.get(uri, 0) + result.records
    return copied


def merge_copied(*parts: Mapping[str, int]) -> dict[str, int]:
    merged: dict[str, int] = {}
    for part in parts:
        for uri, records in part.items():
            merged[uri] = merged.get(uri, 0) + records
    return merged


def emit_asset_events(outlet_events: Any, alias: str, copied: Mapping[str, int], batch_id: int | None) -> None:
    """One event per remote topic with records (see the module contract)."""
    for uri, records in sorted(copied.items()):
        if records:
            outlet_events[AssetAlias(alias)].add(Asset(uri), extra={"batch_id": batch_id, "records": records})
