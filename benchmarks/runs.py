"""The bench's measured copies, which its cases are made of: a source topic loaded and digested, one run of MM2 or of
airmirror over it, measured (:class:`CopyFigures`) and checked against what the target must then hold, and the
rounds that alternate such runs.

Every copy is checked record by record (per partition, a digest of every record's key, value, headers and
timestamp in offset order): a copy that differs ends the bench (``SystemExit``, exit 1) naming what differs.
"""

from __future__ import annotations

import json
import re
import sys
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import NotRequired, TypedDict, TypeVar

from copiers import CopierRun, airmirror_properties, mm2_properties, run_copier
from kafka_io import WATCH_INTERVAL_S, ProducedHeaders, TargetWatch, create_topic, load_topic, topic_digest
from shared import Clusters, log

from airmirror.devtools.mm2 import mm2_command, write_mm2_files

COPY_JOB_LOG = re.compile(
    r"copy job of batch \d+: (?P<ranges>\d+) ranges, (?P<records>\d+) records, (?P<bytes>\d+) bytes"
    r" in (?P<seconds>[\d.]+) s"
)
"""airmirror's INFO line on each copy job (``airmirror.replication.spark.copy_job``)."""
AIRMIRROR = str(Path(sys.executable).parent / "airmirror")
"""The ``airmirror`` command of this interpreter's environment."""
Run = TypeVar("Run")


@dataclass
class SourceTopic:
    """A loaded source topic: its records over its partitions, their payload bytes (keys and values) and each
    partition's ``(record count, digest)`` (:func:`kafka_io.topic_digest`), which a copy must match."""

    name: str
    partitions: int
    records: int
    payload_bytes: int
    digest: list[tuple[int, str]]


class CopyFigures(TypedDict):
    """One copier run's figures over a source topic (see the figures in ``bench.py``'s docstring); an airmirror run
    (:func:`run_airmirror`) adds its process tree's peak RSS and CPU seconds by role (:class:`shared.TreeUsage`)
    and, when asked for, its RSS timeline."""

    wall_s: float
    steady_s: float
    steady_mb_s: float
    records_per_s: int
    peak_rss_mb: int
    cpu_s: float
    cpu_s_per_gb: float
    mb_s_total: float
    first_write_s: float
    write_window_s: float
    write_window_mb_s: float
    """``None`` when the first and the last write came in the same poll of the target."""
    peak_rss_by_role_mb: NotRequired[dict[str, float]]
    cpu_s_by_role: NotRequired[dict[str, float]]
    rss_timeline: NotRequired[list[list[float]]]


def prepare_source(
    clusters: Clusters,
    name: str,
    partitions: int,
    records: int,
    size: int,
    stamp_now: bool = False,
    values: Callable[[int], bytes] | None = None,
    headers: Callable[[int], ProducedHeaders | None] | None = None,
) -> SourceTopic:
    """A source topic loaded by :func:`kafka_io.load_topic` (``values`` and ``headers`` as there) and digested."""
    started = time.monotonic()
    bootstrap = clusters.source.bootstrap
    create_topic(bootstrap, name, partitions)
    payload = load_topic(
        bootstrap, name, partitions, records, size, stamp_now=stamp_now, values=values, headers=headers
    )
    loaded = time.monotonic()
    digest = topic_digest(bootstrap, name, partitions)
    log(
        f"loaded {name}: {records} records, {payload / 1e6:.0f} MB in {loaded - started:.1f} s "
        f"(digest {time.monotonic() - loaded:.1f} s)"
    )
    return SourceTopic(name, partitions, records, payload, digest)


def check_copy(clusters: Clusters, source: SourceTopic, target_topic: str) -> None:
    """Exit (``VERIFICATION FAILED``) unless every partition of ``target_topic`` on the target has ``source``'s
    digest."""
    copy = topic_digest(clusters.target.bootstrap, target_topic, source.partitions)
    wrong = [p for p in range(source.partitions) if copy[p] != source.digest[p]]
    if wrong:
        details = ", ".join(f"p{p}: {copy[p][0]} records vs {source.digest[p][0]}" for p in wrong)
        raise SystemExit(f"VERIFICATION FAILED: {target_topic} differs from {source.name} in partitions {details}")
    log(
        f"verified {target_topic}: {sum(c for c, _ in copy)} records, "
        f"digests equal in all {source.partitions} partitions"
    )


def expected_counts(source: SourceTopic) -> list[int]:
    """Each partition's record count: the end offset a copy of every partition reaches."""
    return [count for count, _ in source.digest]


def write_window(run: CopierRun) -> float:
    """How long ``run`` took from its first write to its last, as its target watch saw them: at least the watch's
    interval (:data:`~kafka_io.WATCH_INTERVAL_S`), within which the polls cannot tell writes apart."""
    return max((run.all_written_s or 0) - (run.first_write_s or 0), WATCH_INTERVAL_S)


def summarize(run: CopierRun, source: SourceTopic, steady_s: float) -> CopyFigures:
    """The figures of ``run``, a copy of ``source``, whose steady part took ``steady_s``."""
    window = write_window(run)
    return {
        "wall_s": round(run.wall_s, 2),
        "steady_s": round(steady_s, 2),
        "steady_mb_s": round(source.payload_bytes / 1e6 / steady_s, 1),
        "records_per_s": round(source.records / run.wall_s),
        "peak_rss_mb": round(run.peak_rss_mb),
        "cpu_s": round(run.cpu_s, 1),
        "cpu_s_per_gb": round(run.cpu_s / (source.payload_bytes / 1e9), 1),
        "mb_s_total": round(source.payload_bytes / 1e6 / run.wall_s, 1),
        "first_write_s": round(run.first_write_s or 0, 2),
        "write_window_s": round(window, 2),
        "write_window_mb_s": round(source.payload_bytes / 1e6 / window, 1),
    }


def run_mm2(
    clusters: Clusters,
    source: SourceTopic,
    workdir: Path,
    timeout: float,
    tuned: bool,
    *,
    name: str | None = None,
    extra_lines: tuple[str, ...] = (),
    expected: SourceTopic | None = None,
) -> CopyFigures:
    """One MM2 run (default or tuned) of the whole source topic, measured and checked against ``expected`` (what the
    target must hold: by default the source itself); ``extra_lines`` (``{source}`` and ``{target}`` replaced by the
    aliases) go last in its file, and ``name`` (``mm2_tuned`` or ``mm2_default`` by default) names the run and,
    first letters, its aliases."""
    name = name or ("mm2_tuned" if tuned else "mm2_default")
    source_alias = {"mm2_tuned": "mmt", "mm2_default": "mmd"}.get(name, name.replace("_", ""))
    target_alias = f"{source_alias}t"
    expected = expected or source
    target_topic = f"{source_alias}.{source.name}"
    extra = [line.format(source=source_alias, target=target_alias) for line in extra_lines]
    properties = mm2_properties(
        source_alias,
        target_alias,
        clusters.source.bootstrap,
        clusters.target.bootstrap,
        source.name,
        tuned,
        extra=extra,
    )
    config, log_config = write_mm2_files(workdir, name, properties)
    watch = TargetWatch(clusters.target.bootstrap, target_topic, expected_counts(expected))
    run = run_copier(
        name, mm2_command(config, log_config, target_alias), watch, workdir, ends_by_itself=False, timeout=timeout
    )
    assert run.first_write_s is not None and run.all_written_s is not None
    result = summarize(run, source, write_window(run))
    check_copy(clusters, expected, target_topic)
    return result


def airmirror_command(config: Path, flow: str) -> list[str]:
    """``airmirror -v replicate CONFIG --flow FLOW --json``."""
    return [AIRMIRROR, "-v", "replicate", str(config), "--flow", flow, "--json"]


def copy_job_seconds(stderr: str) -> float:
    """The seconds of the last copy job an airmirror run logged (:data:`COPY_JOB_LOG`)."""
    matches = list(COPY_JOB_LOG.finditer(stderr))
    if not matches:
        raise RuntimeError("airmirror logged no copy job timing (expected 'copy job of batch ...' at INFO)")
    return float(matches[-1].group("seconds"))


@dataclass
class AirmirrorFlow:
    """An airmirror flow ``source_alias->target_alias`` and its config file."""

    source_alias: str
    target_alias: str
    config: Path

    @property
    def flow(self) -> str:
        return f"{self.source_alias}->{self.target_alias}"

    def remote_topic(self, topic: str) -> str:
        return f"{self.source_alias}.{topic}"


def airmirror_flow(
    clusters: Clusters,
    topics: str,
    workdir: Path,
    alias: str,
    master: str | None,
    extra_lines: tuple[str, ...] = (),
) -> AirmirrorFlow:
    """A one-flow config ``alias->{alias}t`` of ``topics`` (a name or a pattern) in ``workdir``, with a metadata DB of
    its own there; ``extra_lines`` (``{source}`` and ``{target}`` replaced by the aliases) go last."""
    config = workdir / f"{alias}.properties"
    target_alias = f"{alias}t"
    extra = [line.format(source=alias, target=target_alias) for line in extra_lines]
    config.write_text(
        airmirror_properties(
            alias,
            target_alias,
            clusters.source.bootstrap,
            clusters.target.bootstrap,
            topics,
            workdir / f"{alias}.db",
            master,
            extra,
        )
    )
    return AirmirrorFlow(alias, target_alias, config)


def run_airmirror(
    clusters: Clusters,
    source: SourceTopic,
    flow: AirmirrorFlow,
    workdir: Path,
    timeout: float,
    name: str = "airmirror",
    timeline: bool = False,
    verify_copy: bool = True,
    expected: SourceTopic | None = None,
) -> CopyFigures:
    """One fresh ``airmirror replicate`` of the whole source topic, measured (with its RSS timeline if
    ``timeline``); the copy is checked against ``expected`` (what the target must hold: by default the source
    itself) unless ``verify_copy`` is false (the caller checks it)."""
    expected = expected or source
    watch = TargetWatch(clusters.target.bootstrap, flow.remote_topic(source.name), expected_counts(expected))
    run = run_copier(
        name, airmirror_command(flow.config, flow.flow), watch, workdir, ends_by_itself=True, timeout=timeout
    )
    report = json.loads(run.stdout)
    if report["records"] != expected.records:
        raise SystemExit(
            f"VERIFICATION FAILED: airmirror reports {report['records']} records copied, expected {expected.records}"
        )
    result = summarize(run, source, copy_job_seconds(run.stderr))
    result["peak_rss_by_role_mb"] = run.peak_rss_by_role_mb
    result["cpu_s_by_role"] = run.cpu_s_by_role
    if timeline:
        result["rss_timeline"] = run.rss_timeline
    if verify_copy:
        check_copy(clusters, expected, flow.remote_topic(source.name))
    return result


def alternating_rounds(rounds: int, runs: Sequence[Run]) -> Iterator[tuple[int, Run]]:
    """``(round, run)``: each of ``runs`` once a round, in order in odd rounds and in reverse in even ones, so that no
    run always comes first (the one after a pause, on brokers that idled) or last."""
    for round_ in range(1, rounds + 1):
        for run in runs if round_ % 2 else runs[::-1]:
            yield round_, run


class NamedRun(TypedDict):
    """What :func:`summed_seconds` reads of a run of rounds: its name and its seconds."""

    run: str
    wall_s: float
    steady_s: float
    write_window_s: float


class RoundSeconds(TypedDict):
    """A run's seconds summed over the rounds."""

    wall_s: float
    steady_s: float
    write_window_s: float


def summed_seconds(runs: Sequence[NamedRun], names: Iterable[str]) -> dict[str, RoundSeconds]:
    """Per run name, its wall, steady and write-window seconds summed over the rounds."""

    def summed(name: str) -> RoundSeconds:
        named = [run for run in runs if run["run"] == name]
        return {
            "wall_s": sum(run["wall_s"] for run in named),
            "steady_s": sum(run["steady_s"] for run in named),
            "write_window_s": sum(run["write_window_s"] for run in named),
        }

    return {name: summed(name) for name in names}
