"""A bench results document (``benchmarks/results/<UTC timestamp>.json``): its layout (:class:`BenchDocument`, each
case's part typed by its ``case_*.py`` module), its JSON text and its Markdown tables."""

from __future__ import annotations

import json
import re
from typing import NotRequired, TypedDict

from case_big_partition import BigPartition, big_partition_lines
from case_copiers import copier_lines, ratio_lines
from case_latency import LatencyFigures, latency_lines
from case_live import LiveCase, LiveParams, live_lines
from case_partition_scaling import PartitionScaling, PartitionScalingParams, partition_scaling_lines
from case_scaling import Scaling, scaling_lines
from case_schema_ids import SchemaIds, schema_ids_lines
from case_transforms import Transforms, transforms_lines
from case_verify import VerifyFigures, verify_lines
from runs import CopyFigures
from shared import Machine


class Params(TypedDict):
    """What the bench was asked to run: the load of the copier, latency, live and schema-id and transform cases, and
    each other case's flags (``None`` for a case skipped)."""

    records: int
    record_size: int
    partitions: int
    spark_master: str
    copiers: list[str]
    big_partition_records: int | None
    live: LiveParams | None
    partition_scaling: PartitionScalingParams | None
    schema_ids_rounds: int | None
    transforms_rounds: int | None
    payload_mb: NotRequired[float]
    """The copier case's payload, when it ran."""


class BenchDocument(TypedDict):
    """A results document; each case's part is there only when the case ran (``bench_s`` once the bench ended)."""

    timestamp: str
    command: str
    machine: Machine
    params: Params
    copiers: dict[str, CopyFigures]
    ratios: dict[str, float]
    steady_ratios: dict[str, float]
    cpu_per_gb_ratios: dict[str, float]
    verify: NotRequired[VerifyFigures]
    latency: NotRequired[LatencyFigures]
    live_lag_ms: NotRequired[LiveCase]
    live_wide_lag_ms: NotRequired[LiveCase]
    scaling: NotRequired[Scaling]
    partition_scaling: NotRequired[PartitionScaling]
    big_partition: NotRequired[BigPartition]
    schema_ids: NotRequired[SchemaIds]
    transforms: NotRequired[Transforms]
    bench_s: NotRequired[float]


def results_json(document: BenchDocument) -> str:
    """Indented JSON, with lists of numbers (the RSS timelines' rows) kept on one line."""
    text = json.dumps(document, indent=2)
    numbers = re.compile(r"\[\s*(-?[\d.]+(?:,\s*-?[\d.]+)*)\s*\]")
    return numbers.sub(lambda m: "[" + ", ".join(x.strip() for x in m[1].split(",")) + "]", text) + "\n"


def table(document: BenchDocument) -> str:
    """The results as Markdown tables, one per case the bench ran."""
    machine = document["machine"]
    lines = [f"{machine['nproc']} cores, {machine['ram_gb']} GB RAM, Kafka {machine['kafka']}"]
    lines += copier_lines(document["params"], document["copiers"])
    lines += ratio_lines(document)
    lines += verify_lines(document.get("verify"))
    lines += latency_lines(document.get("latency"))
    lines += live_lines(document["params"], document.get("live_lag_ms"), document.get("live_wide_lag_ms"))
    lines += scaling_lines(document.get("scaling"))
    lines += partition_scaling_lines(document.get("partition_scaling"))
    lines += big_partition_lines(document.get("big_partition"))
    lines += schema_ids_lines(document.get("schema_ids"))
    lines += transforms_lines(document.get("transforms"))
    return "\n".join(lines)
