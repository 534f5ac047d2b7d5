"""Run one copier as a child process and measure it (wall time, target progress, peak RSS and CPU of its tree), and
the configs of the copiers: MM2's and airmirror's, each for one flow of one topic."""

from __future__ import annotations

import subprocess
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from kafka_io import TargetWatch
from shared import SPARK_SHUTDOWN_S, TreeUsage

from airmirror.devtools.processes import stop_process_group


@dataclass
class CopierRun:
    """What one copier run measured; times in seconds since the process started."""

    name: str
    returncode: int | None
    exit_s: float | None
    first_write_s: float | None
    all_written_s: float | None
    all_visible_s: float | None
    peak_rss_mb: float
    cpu_s: float
    stdout: str
    stderr: str
    peak_rss_by_role_mb: dict[str, float] = field(default_factory=dict)
    rss_timeline: list[list[float]] = field(default_factory=list)
    cpu_s_by_role: dict[str, float] = field(default_factory=dict)

    @property
    def wall_s(self) -> float:
        """Start to every record visible on the target and, for a copier that ends by itself, its exit."""
        assert self.all_visible_s is not None
        return max(self.all_visible_s, self.exit_s or 0.0)


def run_copier(
    name: str,
    command: list[str],
    watch: TargetWatch,
    workdir: Path,
    *,
    ends_by_itself: bool,
    timeout: float,
) -> CopierRun:
    """Start ``command`` in its own process group, wait for every record to be visible on the target.

    A copier that ends by itself (raw pipe, airmirror) must exit 0; one that runs forever (MM2) is stopped
    with SIGTERM (SIGKILL after 30 s) once the target has everything.  Raises ``RuntimeError`` with the tail
    of the copier's stderr if it fails or times out.
    """
    out_path, err_path = workdir / f"{name}.stdout", workdir / f"{name}.stderr"
    watch.start()
    with open(out_path, "wb") as out, open(err_path, "wb") as err:
        started = time.monotonic()
        process = subprocess.Popen(command, stdout=out, stderr=err, start_new_session=True)
        usage = TreeUsage(process.pid)
        exit_s = None
        try:
            if ends_by_itself:
                process.wait(timeout)
                exit_s = time.monotonic() - started
                if process.returncode == 0:
                    watch.wait_visible(30)
            else:
                watch.wait_visible(timeout, alive=lambda: process.poll() is None)
        except subprocess.TimeoutExpired:
            pass
        finally:
            peak = usage.stop()
            watch.stop()
            stop_process_group(process, linger_s=SPARK_SHUTDOWN_S)
    stdout, stderr = out_path.read_text(errors="replace"), err_path.read_text(errors="replace")

    def relative(t: float | None) -> float | None:
        return None if t is None else t - started

    run = CopierRun(
        name,
        process.returncode,
        exit_s,
        relative(watch.first_write),
        relative(watch.all_written),
        relative(watch.all_visible),
        peak,
        usage.cpu_s(),
        stdout,
        stderr,
        usage.role_peaks_mb(),
        usage.timeline,
        usage.cpu_s_by_role(),
    )
    if run.all_visible_s is None or (ends_by_itself and run.returncode != 0):
        tail = "\n".join(stderr.splitlines()[-30:])
        raise RuntimeError(f"copier {name} failed (exit {run.returncode}, all visible: {run.all_visible_s}):\n{tail}")
    return run


def flow_lines(source_alias: str, target_alias: str, source: str, target: str, topic: str) -> list[str]:
    """The MM2 keys of a one-flow, one-topic config on single-broker clusters (MM2 and airmirror alike)."""
    return [
        f"clusters = {source_alias}, {target_alias}",
        f"{source_alias}.bootstrap.servers = {source}",
        f"{target_alias}.bootstrap.servers = {target}",
        f"{source_alias}->{target_alias}.enabled = true",
        f"topics = {topic}",
        "replication.factor = 1",
        "offset-syncs.topic.replication.factor = 1",
        "heartbeats.topic.replication.factor = 1",
        "checkpoints.topic.replication.factor = 1",
    ]


def mm2_properties(
    source_alias: str,
    target_alias: str,
    source: str,
    target: str,
    topic: str,
    tuned: bool,
    exactly_once_rest_port: int | None = None,
    extra: Sequence[str] = (),
) -> str:
    """A dedicated-mode MM2 config for one flow of ``topic``: defaults, or the tuned settings; ``extra`` lines last.

    Only what a single-broker cluster needs differs from MM2's defaults: replication factor 1 for the remote
    and internal topics.  Checkpoints (no consumer groups to translate here) are off.  With
    ``exactly_once_rest_port``, MM2 writes to the target exactly once (Kafka 3.5+, dedicated mode: the target's
    ``exactly.once.source.support = enabled``, which needs MM2's internal REST server, here on that port of
    127.0.0.1) and reads the source read_committed, as Kafka's geo-replication docs ask.
    """
    lines = [
        *flow_lines(source_alias, target_alias, source, target, topic),
        "offset.storage.replication.factor = 1",
        "status.storage.replication.factor = 1",
        "config.storage.replication.factor = 1",
        "emit.checkpoints.enabled = false",
    ]
    if tuned:
        lines += [
            "tasks.max = 2",
            f"{target_alias}.producer.batch.size = {1024 * 1024}",
            f"{target_alias}.producer.linger.ms = 20",
            f"{target_alias}.producer.buffer.memory = {256 * 1024 * 1024}",
            f"{source_alias}.consumer.max.partition.fetch.bytes = {16 * 1024 * 1024}",
            f"{source_alias}.consumer.fetch.max.bytes = {64 * 1024 * 1024}",
            f"{source_alias}.consumer.max.poll.records = 5000",
        ]
    if exactly_once_rest_port is not None:
        lines += [
            f"{target_alias}.exactly.once.source.support = enabled",
            "dedicated.mode.enable.internal.rest = true",
            f"listeners = http://127.0.0.1:{exactly_once_rest_port}",
            f"{source_alias}.consumer.isolation.level = read_committed",
        ]
    lines += extra
    return "\n".join(lines) + "\n"


def airmirror_properties(
    source_alias: str,
    target_alias: str,
    source: str,
    target: str,
    topic: str,
    db: Path,
    master: str | None,
    extra: Sequence[str] = (),
) -> str:
    """An MM2-style config for one airmirror flow of ``topic`` with its own metadata DB; ``extra`` lines last."""
    lines = [
        *flow_lines(source_alias, target_alias, source, target, topic),
        "airmirror.batch.log.topic.replication.factor = 1",
        f"airmirror.metadata.db.url = sqlite:///{db}",
    ]
    if master:
        lines.append(f"airmirror.spark.master = {master}")
    lines += extra
    return "\n".join(lines) + "\n"
