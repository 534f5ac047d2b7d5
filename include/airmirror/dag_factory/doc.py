"""The ``doc_md`` of a flow DAG: the flow's effective settings, secrets masked."""

from __future__ import annotations

from collections.abc import Callable

from airmirror.config import FlowConfig
from airmirror.config.db_urls import masked_db_url
from airmirror.config.secrets import masked
from airmirror.mm2.policy import PatternList


def patterns(values: PatternList) -> str:
    return ", ".join(p.pattern for p in values.patterns)


EFFECTIVE: dict[str, Callable[[FlowConfig], object]] = {
    "topics": lambda f: patterns(f.topics.include),
    "topics.exclude": lambda f: patterns(f.topics.exclude),
    "groups": lambda f: patterns(f.groups.include),
    "groups.exclude": lambda f: patterns(f.groups.exclude),
    "replication.policy.class": lambda f: type(f.policy).__name__,
    "replication.factor": lambda f: f.topic_sync.replication_factor,
    "sync.topic.configs.enabled": lambda f: f.topic_sync.sync_configs_enabled,
    "emit.heartbeats.enabled": lambda f: f.heartbeats.enabled,
    "emit.heartbeats.interval.seconds": lambda f: f.heartbeats.interval_seconds,
    "emit.checkpoints.enabled": lambda f: f.checkpoints.enabled,
    "emit.checkpoints.interval.seconds": lambda f: f.checkpoints.interval_seconds,
    "sync.group.offsets.enabled": lambda f: f.checkpoints.sync_group_offsets_enabled,
    "airmirror.schedule": lambda f: f.dag.schedule,
    "airmirror.live": lambda f: f.dag.live,
    "airmirror.spark.master": lambda f: f.spark.master,
    "airmirror.spark.submit": lambda f: f.spark.submit,
    "airmirror.batch.max.records.per.partition": lambda f: f.copy.max_records_per_partition or "no cap",
    "airmirror.metadata.db.url": lambda f: masked_db_url(f.metadata_db_url),
}


def flow_doc(flow: FlowConfig) -> str:
    """Markdown describing the flow; every value as airmirror resolved it (defaults shown as such)."""
    lines = [
        f"# airmirror flow `{flow.name}`",
        "",
        f"Replicates cluster `{flow.source}` to cluster `{flow.target}` from `{flow.config_path}`.",
        "Tasks: `sync_topics` -> `plan_batch` -> `replicate` (Spark) -> `record_batch`; "
        "`emit_heartbeats` and `emit_checkpoints` run whatever replication does.",
        *(
            [
                "Live: each run's `replicate` copies batches back to back for the length of its data interval, while "
                "`emit_heartbeats` and `emit_checkpoints` emit at their intervals beside it."
            ]
            if flow.dag.live
            else []
        ),
        "",
        "| setting | value |",
        "|---|---|",
    ]
    for key, effective in EFFECTIVE.items():
        origin = "" if flow.get(key) is not None else " (default)"
        lines.append(f"| `{key}` | `{effective(flow)}`{origin} |")
    for label, alias, kind in (
        ("source consumer", flow.source, "consumer"),
        ("target producer", flow.target, "producer"),
    ):
        if (connection := flow.connection_id(alias)) is not None:
            lines.append(f"| {label} | the settings of Airflow connection `{connection}`, under the file's |")
        for key, value in sorted(masked(flow.file_client_config(alias, kind)).items()):
            lines.append(f"| {label} `{key}` | `{value}` |")
    return "\n".join(lines) + "\n"
