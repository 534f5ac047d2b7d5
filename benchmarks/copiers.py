"""Run one copier as a child process and measure it: wall time, target progress, peak RSS and CPU of its tree."""

from __future__ import annotations

import subprocess
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import psutil
from kafka_io import TargetWatch

from airmirror.devtools.processes import stop_process_group

SPARK_SHUTDOWN_S = 60.0
"""How long a copier's leftover processes (a Spark JVM finishing its shutdown) may take to exit by themselves."""


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


class TreeUsage:
    """Samples a process and all its descendants every ``interval`` s: the peak of their summed RSS, and the CPU
    seconds (user + system) they used since this object was created.

    CPU: each process counts with its last sample, so a process that ends between two samples loses at most
    ``interval`` s of its CPU; processes already running at creation count from their first sample.

    RSS: also keeps the peak of each role's sum (``cli``: the root process; ``jvm``: Java processes, for airmirror
    the Spark driver JVM; ``python``: other Python descendants, for airmirror the Spark Python workers and
    their daemon; ``other``: anything else, such as launcher shells) and, every ``timeline_s`` seconds, a row
    ``[seconds since start, total, cli, jvm, python, other]`` in MiB: which process grows, and when.
    """

    ROLES = ("cli", "jvm", "python", "other")

    def __init__(self, pid: int, interval: float = 0.1, timeline_s: float = 1.0) -> None:
        self.root = psutil.Process(pid)
        self.interval = interval
        self.timeline_s = timeline_s
        self.peak = 0
        self.role_peaks = dict.fromkeys(self.ROLES, 0)
        self.timeline: list[list[float]] = []
        self._roles: dict[int, str] = {}
        self._cpu: dict[int, float] = {}
        self._started = time.monotonic()
        self._note_peaks(self._sample())
        self._cpu_start = dict(self._cpu)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _role(self, process: psutil.Process) -> str:
        role = self._roles.get(process.pid)
        if role is None:
            if process.pid == self.root.pid:
                role = "cli"
            else:
                name = process.name().lower()
                role = "jvm" if name.startswith("java") else "python" if name.startswith("python") else "other"
            if role != "other":  # a launcher shell may exec java later: classify it again
                self._roles[process.pid] = role
        return role

    def _sample(self) -> dict[str, int]:
        """RSS by role now; notes each process's CPU seconds on the way."""
        by_role = dict.fromkeys(self.ROLES, 0)
        try:
            processes = [self.root, *self.root.children(recursive=True)]
        except psutil.Error:
            return by_role
        for process in processes:
            try:
                with process.oneshot():
                    times = process.cpu_times()
                    by_role[self._role(process)] += process.memory_info().rss
                self._cpu[process.pid] = times.user + times.system
            except psutil.Error:
                pass
        return by_role

    def _run(self) -> None:
        next_row = 0.0
        while not self._stop.is_set():
            by_role = self._sample()
            total = self._note_peaks(by_role)
            elapsed = time.monotonic() - self._started
            if total and elapsed >= next_row:
                self.timeline.append([round(elapsed, 1), *(round(x / 2**20) for x in (total, *by_role.values()))])
                next_row = elapsed + self.timeline_s
            self._stop.wait(self.interval)

    def _note_peaks(self, by_role: dict[str, int]) -> int:
        """Count one sample's RSS towards the peaks; returns its total."""
        total = sum(by_role.values())
        self.peak = max(self.peak, total)
        for role, rss in by_role.items():
            self.role_peaks[role] = max(self.role_peaks[role], rss)
        return total

    def stop(self) -> float:
        """Stop sampling (one last sample first); returns the peak RSS in MiB.  Every sample counts towards the
        peaks, the first and the last too: a copier shorter than a few sampling intervals on a loaded machine may
        get no other."""
        self._stop.set()
        self._thread.join()
        self._note_peaks(self._sample())
        return self.peak / 2**20

    def cpu_s(self) -> float:
        """CPU seconds (user + system) the tree used from creation to the last sample."""
        return sum(used - self._cpu_start.get(pid, 0.0) for pid, used in self._cpu.items())

    def cpu_s_by_role(self) -> dict[str, float]:
        """:meth:`cpu_s` split by role (see the class docstring): for airmirror, ``python`` is its copy tasks'."""
        by_role = dict.fromkeys(self.ROLES, 0.0)
        for pid, used in self._cpu.items():
            by_role[self._roles.get(pid, "other")] += used - self._cpu_start.get(pid, 0.0)
        return {role: round(seconds, 2) for role, seconds in by_role.items() if seconds}

    def role_peaks_mb(self) -> dict[str, float]:
        return {role: round(peak / 2**20) for role, peak in self.role_peaks.items() if peak}


def run_copier(
    name: str,
    command: list[str],
    watch: TargetWatch,
    workdir: Path,
    *,
    ends_by_itself: bool,
    timeout: float,
    env: dict[str, str] | None = None,
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
        process = subprocess.Popen(command, stdout=out, stderr=err, env=env, start_new_session=True)
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
    relative = lambda t: None if t is None else t - started  # noqa: E731
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
